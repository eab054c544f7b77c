"""Held-out failure modes on generated tasks: patches made by real git from the task's own files."""

from __future__ import annotations

import subprocess

import pytest

from swe_rl.agent.trajectory import Trajectory
from swe_rl.tasks.generator import generate_tasks
from swe_rl.tasks.task import Task
from swe_rl.train.evaluate import FAILURE_MODES, failure_mode, summarize


def _patch(tmp_path, task: Task, old: str, new: str) -> str:
    """git diff of the task's repo after replacing `old` with `new` in the expert's file."""
    repo = tmp_path / task.instance_id
    if not repo.is_dir():
        repo.mkdir()
        for p, text in task.metadata["files"].items():
            (repo / p).write_text(text)
        git = ["git", "-c", "user.email=t@t", "-c", "user.name=t"]
        subprocess.run([*git, "init", "-q"], cwd=repo, check=True)
        subprocess.run([*git, "add", "-A"], cwd=repo, check=True)
        subprocess.run([*git, "commit", "-qm", "base"], cwd=repo, check=True)
    f = repo / task.metadata["expert"]["path"]
    f.write_text(f.read_text().replace(old, new, 1))
    diff = subprocess.run(["git", "diff"], cwd=repo, check=True, capture_output=True, text=True).stdout
    subprocess.run(["git", "checkout", "-q", "--", "."], cwd=repo, check=True)
    return diff


def _traj(task: Task, patch: str, reward: float | None, exit_status: str = "submitted") -> Trajectory:
    return Trajectory(
        task.instance_id, patch=patch, reward=reward, resolved=reward == 1.0, exit_status=exit_status
    )


def test_each_failure_is_told_apart(tmp_path):
    (t,) = generate_tasks(1, "held_out", seed=5)
    ex = t.metadata["expert"]
    right = _patch(tmp_path, t, ex["old"], ex["new"])
    flawed = _patch(tmp_path, t, ex["old"], ex["flawed_new"])
    assert right and flawed and right != flawed
    assert failure_mode(_traj(t, right, 1.0), t) is None
    assert failure_mode(_traj(t, flawed, 0.0), t) == "flawed_constant"
    # a copy error: the right line, but the expression mangled some other way
    assert failure_mode(_traj(t, _patch(tmp_path, t, ex["old"], ex["new"] + " + 0"), 0.0), t) == "other_edit"
    # the flawed constant plus a stray edit elsewhere is not the flawed expert's edit
    first = next(iter(t.metadata["files"].values())).splitlines()[0]
    stray = flawed + _patch(tmp_path, t, first, first + "  # x")
    assert failure_mode(_traj(t, stray, 0.0), t) == "other_edit"
    assert failure_mode(_traj(t, "", 0.0), t) == "no_edit"
    assert failure_mode(_traj(t, flawed, None), t) == "infra"
    assert failure_mode(_traj(t, "", None, "error"), t) == "infra"


def test_summarize_reports_modes_only_for_generated_tasks(tmp_path):
    tasks = generate_tasks(4, "held_out", seed=6)
    trajs = []
    for t in tasks:
        ex = t.metadata["expert"]
        trajs.append(_traj(t, _patch(tmp_path, t, ex["old"], ex["new"]), 1.0))
        trajs.append(_traj(t, _patch(tmp_path, t, ex["old"], ex["flawed_new"]), 0.0))
    trajs[-1] = _traj(tasks[-1], "", 0.0)
    out = summarize(trajs, tasks, 2, prefix="greedy_")
    assert out["greedy_success"] == 0.5
    assert out["greedy_fail/flawed_constant"] == 3 / 8 and out["greedy_fail/no_edit"] == 1 / 8
    assert out["greedy_fail/other_edit"] == out["greedy_fail/infra"] == 0.0
    assert sum(out[f"greedy_fail/{m}"] for m in FAILURE_MODES) == 1 - out["greedy_success"]
    plain = [t.model_copy(update={"metadata": {}}) for t in tasks]  # tasks without a flawed expert
    assert failure_mode(trajs[1], plain[0]) == "unknown"
    assert not any(k.startswith("fail/") for k in summarize(trajs, plain, 2))
    assert out["greedy_success_submitted"] == 0.5
    # a passing patch left behind by a format-error ending counts in `success` only (SWE-bench grades it)
    trajs[0] = _traj(tasks[0], trajs[0].patch, 1.0, exit_status="format_errors")
    out = summarize(trajs, tasks, 2, prefix="greedy_")
    assert out["greedy_success"] == 0.5 and out["greedy_success_submitted"] == 3 / 8


def test_failure_mode_plot(tmp_path):
    from swe_rl.experiments.plots import plot_failure_modes

    (t,) = generate_tasks(1, "held_out", seed=7)
    ex = t.metadata["expert"]
    ok, bad = _patch(tmp_path, t, ex["old"], ex["new"]), _patch(tmp_path, t, ex["old"], ex["flawed_new"])
    before = summarize([_traj(t, bad, 0.0)], [t], 1, prefix="greedy_")
    after = summarize([_traj(t, ok, 1.0)], [t], 1, prefix="greedy_")
    png = plot_failure_modes({"before": before, "after": after}, tmp_path / "modes.png")
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and png.stat().st_size > 5000
    with pytest.raises(ValueError, match="greedy_success"):
        plot_failure_modes({"x": {"loss": 1.0}}, tmp_path / "none.png")


def test_demo_report_shows_failure_modes_before_and_after(tmp_path):
    from swe_rl.experiments.demo_report import write_report
    from swe_rl.runs import RunDir

    (t,) = generate_tasks(1, "held_out", seed=8)
    ex = t.metadata["expert"]
    flawed = _traj(t, _patch(tmp_path, t, ex["old"], ex["flawed_new"]), 0.0)
    solved = _traj(t, _patch(tmp_path, t, ex["old"], ex["new"]), 1.0)
    rows = [
        {"step": s, **{f"eval/{k}": v for k, v in summarize([tr], [t], 1, prefix="greedy_").items()}}
        for s, tr in ((0, flawed), (4, solved))
    ]
    root = RunDir.create(tmp_path / "runs", "demo")
    held = root.report / "heldout" / "report.md"
    md = write_report(root.report, rows, None, held, (1.0, 2.0, 3.0)).read_text()
    assert "| held-out success, greedy | 0.0% | 100.0% |" in md
    assert "| held-out failed by flawed constant, greedy | 100.0% | 0.0% |" in md
    assert "other edit" not in md  # modes that never happened are left out
    assert "![failure_modes](failure_modes.png)" in md and (root.report / "failure_modes.png").is_file()
