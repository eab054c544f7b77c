"""`swe-rl train` on any task dataset (data.source=tasks) and the data-source table that replaced the if/elif."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from swe_rl.train.config import TrainConfig

ROOT = Path(__file__).resolve().parents[2]
SWE_RL = str(Path(sys.executable).with_name("swe-rl"))


def test_the_trainer_imports_no_experiment():
    code = ("import sys, swe_rl.train.run as r, swe_rl.train.loop; "
            "print(sorted(r.DATA_SOURCES), [m for m in sys.modules if m.startswith('swe_rl.experiments')])")  # fmt: skip
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "['generated', 'tasks'] []"


def test_unknown_source_and_missing_dataset_are_one_clear_error():
    import swe_rl.experiments  # noqa: F401  (registers toy and decisions)
    from swe_rl.train.run import build_env, data_source

    with pytest.raises(
        ValueError, match=r"data.source='nope': unknown; registered: decisions, generated, tasks, toy"
    ):
        data_source(TrainConfig.model_validate({"data": {"source": "nope"}}))
    with pytest.raises(ValueError, match=r"rollout\.engine=vllm needs data\.source=generated"):
        data_source(TrainConfig.model_validate({"data": {"source": "toy"}, "rollout": {"engine": "vllm"}}))
    cfg = TrainConfig.model_validate({"data": {"source": "tasks", "tasks": "/nowhere/rows.jsonl"}})
    with pytest.raises(
        ValueError, match=r"data.tasks='/nowhere/rows.jsonl': /nowhere/rows.jsonl: file not found"
    ):
        build_env(cfg, None, None)
    with pytest.raises(ValueError, match=r"data\.tasks: data\.source=tasks needs a task dataset"):
        build_env(TrainConfig.model_validate({"data": {"source": "tasks"}}), None, None)


def test_a_local_sandbox_runs_one_episode_at_a_time(tmp_path):
    """A local sandbox works in this host's one /testbed: slots side by side would reset and grade each other's
    tasks there. The shipped GPU-machine recipe (one slot) with a second slot is one clear error, from the CLI."""
    proc = subprocess.run([SWE_RL, "train", "-c", "configs/train/gpu_check.yaml", "-o", "rollout.slots=2", "-o",
                           f"out_dir={tmp_path}"], cwd=ROOT, capture_output=True, text=True, timeout=120)  # fmt: skip
    assert proc.returncode == 2 and "rollout.slots: 2 with sandbox.backend local; expected 1" in proc.stderr
    assert not any(tmp_path.iterdir())  # nothing started
    from swe_rl.config import ConfigError, load_config
    from swe_rl.evaluation.config import EvalConfig

    with pytest.raises(
        ConfigError, match=r"pool: 8 episodes at a time .* with sandbox\.backend local; expected 1"
    ):
        load_config(EvalConfig, overrides=["sandbox.backend=local"])  # 2 Ray actors x 4 episodes
    one = ["sandbox.backend=local", "pool.backend=local", "pool.episodes_per_actor=1"]
    assert load_config(EvalConfig, overrides=one).pool.episodes_per_actor == 1


@pytest.mark.docker
@pytest.mark.timeout(300)
def test_two_rl_steps_of_the_shipped_checkpoint_on_a_task_file(tmp_path):
    """The CLI from the repo root with relative paths, as a user runs it: generated micro tasks exported as JSONL,
    each episode in a fresh sandbox at the task's image, graded by the project's grader."""
    from swe_rl.tasks.generator import generate_tasks

    rows = tmp_path / "tasks.jsonl"  # what `swe-rl tasks generate -o FILE` writes
    rows.write_text("".join(t.model_dump_json() + "\n" for t in generate_tasks(3, "train", 0)))
    args = ["data.source=tasks", f"data.tasks={rows}", f"data.eval_tasks={rows}", "eval.n_tasks=1",
            "model.init=swe_rl/train/assets/demo_sft", "steps=2", "save_every=0", "log_trajectories=4",
            "rollout.tasks_per_step=1", "rollout.n_samples=2", "rollout.max_turns=3", f"out_dir={tmp_path}",
            "name=tasks", "optim.minibatch=4", "optim.micro_batch=4",
            "algo.reward.grade_timeout_gold_factor=10"]  # fmt: skip
    proc = subprocess.run([SWE_RL, "train", *(x for a in args for x in ("-o", a))], cwd=ROOT, capture_output=True,
                          text=True, timeout=280)  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-3000:]
    metrics = [json.loads(x) for x in (tmp_path / "tasks" / "metrics.jsonl").read_text().splitlines()]
    steps = [m for m in metrics if "reward_mean" in m]
    assert [m["step"] for m in steps] == [1, 2]
    trajs = [json.loads(x) for f in sorted((tmp_path / "tasks" / "trajectories").iterdir())
             for x in f.read_text().splitlines()]  # fmt: skip
    assert len(trajs) == 4 and all(t["exit"] != "error" and t["reward"] is not None for t in trajs)
    # the gold-relative limit from the recipe reached the grader: the tasks were validated before the first
    # rollout, and gold's test run here takes well under 6 s, so every test run had the 60 s floor, not 1800 s
    limits = [(t["grading"] or {}).get("tests", {}).get("test_limit_s") for t in trajs]
    assert limits == [60.0] * 4, [t["grading"] for t in trajs]
    assert any("eval/greedy_success" in m for m in metrics)  # the held-out set ran through the same pipeline
    # and its episodes stay in the run beside its per-task rewards, one file per evaluation
    records = sorted(p.name[:-5] for p in (tmp_path / "tasks" / "eval_tasks").iterdir())
    episodes = sorted(p.name[:-6] for p in (tmp_path / "tasks" / "eval_episodes").iterdir())
    assert records and records == episodes
    for name in records:
        modes = json.loads((tmp_path / "tasks" / "eval_tasks" / f"{name}.json").read_text())["modes"]
        lines = [
            json.loads(x)
            for x in (tmp_path / "tasks" / "eval_episodes" / f"{name}.jsonl").read_text().splitlines()
        ]
        assert {(r["mode"], r["task_id"]): [float(r["reward"] or 0.0)] for r in lines} == {
            (m, t): v for m, tasks in modes.items() for t, v in tasks.items()}  # fmt: skip
        assert all(r["patch"] is not None and r["messages"] for r in lines)
