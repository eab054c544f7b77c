"""`swe-rl train` / `swe-rl demo` are never silent: every RL step, rollout call and held-out evaluation shows up on
the progress console (plain lines here, where the console is not a terminal)."""

from __future__ import annotations

import io
import json
import re

import pytest
from rich.console import Console

from swe_rl.experiments.demo_report import table_problems


def lines_of(buf: io.StringIO) -> list[str]:
    return [ln.split(" · elapsed")[0] for ln in buf.getvalue().splitlines()]


def test_train_shows_each_step_with_its_reward(tmp_path):
    import swe_rl.experiments  # noqa: F401  (registers data.source=toy, as the swe-rl CLI does)
    from swe_rl.train.run import train_command

    buf = io.StringIO()
    overrides = [f"out_dir={tmp_path}", "data.source=toy", "steps=3", "save_every=0", "log_trajectories=0",
                 "rollout.tasks_per_step=4", "rollout.n_samples=4", "model.size=tiny"]  # fmt: skip
    run = train_command([], overrides, resume=False, console=Console(file=buf, width=200))
    rows = [json.loads(x) for x in run.metrics.read_text().splitlines()]
    lines = lines_of(buf)
    steps = [ln for ln in lines if ln.startswith("RL steps")]
    assert steps == [
        f"RL steps {r['step']}/3 · reward {r['reward_mean']:.2f} · resolved {r['resolve_rate']:.0%} · "
        f"step {r['time_step_s']:.0f}s"
        for r in rows
    ]
    assert sum(ln.startswith("rollouts 16/16 · resolved ") for ln in lines) == 3  # one rollout phase per step

    again = io.StringIO()  # resumed after the last step: the bar starts there, nothing is re-run
    train_command([], overrides, resume=True, console=Console(file=again, width=200))
    assert lines_of(again) == ["RL steps 3/3"]


def test_a_step_with_unscored_episodes_says_how_many_were_scored():
    # a step whose episodes all failed showed "reward 0.00 · resolved 0%", like a step that failed its tests
    from swe_rl.rollout.progress import RunProgress
    from swe_rl.train.progress import step_progress

    buf = io.StringIO()
    with RunProgress(Console(file=buf, width=200)) as bars:
        on_step = step_progress(bars, 2)
        on_step(1, {"reward_mean": 0.0, "resolve_rate": 0.0, "time_step_s": 1.0, "valid_frac": 0.0})
        on_step(2, {"reward_mean": 0.5, "resolve_rate": 0.5, "time_step_s": 1.0, "valid_frac": 1.0})
    steps = [ln for ln in lines_of(buf) if ln.startswith("RL steps")]
    assert steps == [
        "RL steps 1/2 · reward 0.00 · resolved 0% · step 1s · scored 0%",
        "RL steps 2/2 · reward 0.50 · resolved 50% · step 1s · scored 100%",
    ], steps


@pytest.mark.docker
def test_demo_shows_rl_steps_held_out_and_micro_suite(tmp_path, capfd):
    """A tiny `swe-rl demo` (shipped SFT checkpoint, real sandboxes and tests): each phase prints progress."""
    from swe_rl.config import load_config
    from swe_rl.experiments.demo import DemoConfig, run_demo

    cfg = load_config(DemoConfig, files=["configs/demo.yaml"], overrides=[
        f"out_dir={tmp_path}", "micro_limit=1", "train.steps=1", "train.save_every=1",
        "train.rollout.tasks_per_step=2", "train.rollout.n_samples=2", "train.rollout.slots=2",
        "train.rollout.max_turns=2", "train.eval.every=1", "train.eval.n_tasks=2", "train.eval.sampled=1",
    ])  # fmt: skip
    buf = io.StringIO()
    report = run_demo(cfg, console=Console(file=buf, width=200))
    lines = lines_of(buf)
    for phase in ("held-out greedy 2/2 · resolved", "held-out T=1 2/2 · resolved", "rollouts 4/4 · resolved"):
        assert any(ln.startswith(phase) for ln in lines), (phase, lines)
    assert any(ln.startswith("RL steps 1/1 · reward") and "held-out" in ln for ln in lines), lines
    # the episodes count up as they are graded, not only when the call returns
    assert any(ln.startswith("held-out greedy 1/2") for ln in lines), lines
    # a phase's "N/N" line is its end only: no line per episode graded after the last one ended (issue 26)
    for phase in ("held-out greedy", "held-out T=1", "rollouts"):
        full = [ln for ln in lines if re.match(rf"{re.escape(phase)} (\d+)/\1 ", ln)]
        assert full and all(ln.endswith("%)") for ln in full), full
    err = capfd.readouterr()
    assert "micro-suite evaluation" in err.out and "rollouts 1/1 · resolved" in err.err  # the harness's bar
    md = report.read_text()
    assert "## What AEM did" in md and "What to expect" in md and table_problems(md) == []
    # run again: the finished run resumes (no RL step, no second metrics row) and writes the same report
    rows = (tmp_path / "demo" / "rl" / "metrics.jsonl").read_text()
    again = run_demo(cfg, console=Console(file=io.StringIO(), width=200))
    assert again == report and (tmp_path / "demo" / "rl" / "metrics.jsonl").read_text() == rows
    assert (
        again.read_text().split("## What AEM did")[0].split("Time:")[0]
        == md.split("## What AEM did")[0].split("Time:")[0]
    )


def test_sft_steps_show_the_loss(tmp_path):
    from swe_rl.policy.tiny import build_tiny_model, build_tokenizer
    from swe_rl.rollout.progress import RunProgress
    from swe_rl.runs import RunDir
    from swe_rl.train.sft import SFTConfig, train_sft

    tok = build_tokenizer()
    ids = tok.encode("def f(x):\n    return x + 1\n" * 4)
    data = [(ids, [0] * 8 + [1] * (len(ids) - 8))] * 4
    cfg = SFTConfig(steps=4, batch=2, log_every=2, warmup=1)
    run = RunDir.create(tmp_path, "sft")
    buf = io.StringIO()
    with RunProgress(Console(file=buf, width=200), every_s=3600) as bars:
        train_sft(build_tiny_model(tok, size="tiny", seed=0), tok, data, cfg, run, bars)
    logged = {r["step"]: r["sft_loss"] for r in run.read_metrics()}
    # the first step, then every log_every steps with the window's mean loss (as in metrics.jsonl)
    assert [ln.split(" · loss")[0] for ln in lines_of(buf)] == [
        "SFT steps 1/4",
        "SFT steps 2/4",
        "SFT steps 4/4",
    ]
    assert lines_of(buf)[1:] == [f"SFT steps {s}/4 · loss {v:.4f}" for s, v in sorted(logged.items())]
