"""Report buckets, statistics and files from hand-made trajectories (the report's inputs, not a fake of it)."""

from __future__ import annotations

import json

from swe_rl.agent.trajectory import Trajectory
from swe_rl.evaluation.plots import write_plots
from swe_rl.evaluation.report import build_report, episode_from, report_json, report_markdown
from swe_rl.evaluation.store import EvalRun


def _traj(iid: str, run: int, patch: str, status: str = "submitted") -> Trajectory:
    msgs = [
        {"role": "system", "content": "s"},
        {"role": "assistant", "content": "a"},
        {"role": "user", "content": "o"},
    ]
    return Trajectory(
        task_id=iid, sample_idx=run, patch=patch, exit_status=status, messages=msgs, token_ids=[1, 2, 3]
    )


def test_buckets_rates_and_pass_at_k(tmp_path):
    rows = [
        (_traj("a__r-1", 0, "diff"), {"resolved": True, "reward": 1.0}, "a/r"),
        (_traj("a__r-1", 1, "diff"), {"resolved": False, "reward": 0.0}, "a/r"),
        (_traj("b__s-2", 0, ""), {"resolved": False, "reward": 0.0}, "b/s"),
        (_traj("b__s-2", 1, "", status="error"), None, "b/s"),
        (_traj("c__t-3", 0, "diff"), {"resolved": False, "reward": None, "failure": "sandbox_died"}, "c/t"),
        (_traj("c__t-3", 1, "diff"), {"resolved": True, "reward": 1.0}, "c/t"),
    ]
    eps = [episode_from(t, g, repo) for t, g, repo in rows]
    rep = build_report(eps, 2, {"name": "x"})
    assert rep["counts"] == {"resolved": 2, "unresolved": 1, "empty_patch": 1, "infra_failure": 2}
    assert rep["runs"][0]["resolved_ids"] == ["a__r-1"] and rep["runs"][0]["empty_patch_ids"] == ["b__s-2"]
    assert rep["runs"][1]["infra_failure_ids"] == ["b__s-2"]
    assert rep["resolve_rate"] == round(2 / 6, 6)
    assert rep["pass@1_mean_over_runs"] == round(2 / 6, 6)
    assert rep["pass@k"] == {"1": round(1 / 3, 6), "2": round(2 / 3, 6)}
    assert rep["infra_failure_labels"] == {"episode_error": 1, "sandbox_died": 1}
    assert rep["per_repo"]["a/r"] == {"episodes": 2, "resolved": 1, "resolve_rate": 0.5}
    assert rep["steps"]["mean"] == 1.0
    # Deterministic: the same episodes in another order give the same bytes.
    assert report_json(build_report(list(reversed(eps)), 2, {"name": "x"})) == report_json(rep)
    plots = write_plots(rep, eps, tmp_path)
    assert all((tmp_path / p).stat().st_size > 1000 for p in plots) and len(plots) == 4
    md = report_markdown(rep, plots)
    assert "| a/r | 2 | 1 | 50.0% |" in md and "resolve_rate_by_repo.png" in md


def test_run_files_are_swebench_predictions(tmp_path):
    run = EvalRun(tmp_path / "r")
    t = _traj("a__r-1", 0, "diff --git a/x b/x\n")
    run.save_trajectory(t)
    assert run.load_trajectory(0, "a__r-1").patch == t.patch
    run.write_run_files(0, [t], "m")
    pred = json.loads(run.predictions_path(0).read_text())
    assert pred == {"instance_id": "a__r-1", "model_name_or_path": "m", "model_patch": t.patch}
    assert not list(run.root.rglob("*.tmp"))
    # A half-written episode file (not possible with atomic writes, but a copy tool could leave one) is missing.
    run.traj_path(0, "b").write_text('{"task_id": "b", "sample')
    assert run.load_trajectory(0, "b") is None


def test_pool_losses_are_kept_per_session_and_summed_into_the_report(tmp_path):
    """What a lost node cost (the Ray pool's `lost`): one line per pool session in the run dir, so a resumed run
    and `swe-rl report` see the earlier sessions' too; a line cut short by a crash is skipped."""
    run = EvalRun(tmp_path / "r")
    assert run.pool_losses() == {}
    run.add_pool_losses({"actors_died": 1, "actors_unplaceable": 1, "episodes_rerun": 2}, episodes=40)
    run.add_pool_losses({"actors_died": 2, "actors_unplaceable": 0, "episodes_rerun": 1}, episodes=12)
    with run.pool_losses_path.open("a") as f:
        f.write('{"actors_died": 5, "epis')
    lost = EvalRun(tmp_path / "r").pool_losses()  # a new handle on the same dir: the resumed run's view
    assert lost == {"actors_died": 3, "actors_unplaceable": 1, "episodes_rerun": 3, "sessions": 2}
    eps = [episode_from(_traj("a__r-1", 0, "diff"), {"resolved": True, "reward": 1.0}, "a/r")]
    rep = build_report(eps, 1, {"name": "x"}) | {"pool_losses": lost}
    md = report_markdown(rep, [])
    assert (
        "Rollout pool losses (2 session(s)): actors died 3 · actors unplaceable 1 · episodes re-run 3" in md
    )


def test_per_node_counts_from_the_workers_node():
    """Episodes carry their rollout actor's node (RolloutWorker's metrics["worker_node"]): report.json counts
    episodes, resolved and infrastructure failures per node; report.md shows the table only past one node."""
    rows = [
        ("10.0.0.1 aaaaaaaa", {"resolved": True, "reward": 1.0}),
        ("10.0.0.1 aaaaaaaa", {"resolved": False, "reward": None, "failure": "sandbox_died"}),
        ("10.0.0.2 bbbbbbbb", {"resolved": True, "reward": 1.0}),
        (None, {"resolved": False, "reward": 0.0}),  # a local pool: no node
    ]
    eps = []
    for i, (node, grading) in enumerate(rows):
        t = _traj(f"a__r-{i}", 0, "diff")
        if node:
            t.metrics["worker_node"] = node
        eps.append(episode_from(t, grading, "a/r"))
    rep = build_report(eps, 1, {"name": "x"})
    assert rep["per_node"] == {
        "10.0.0.1 aaaaaaaa": {"episodes": 2, "resolved": 1, "infra_failure": 1},
        "10.0.0.2 bbbbbbbb": {"episodes": 1, "resolved": 1, "infra_failure": 0},
    }
    md = report_markdown(rep, [])
    assert "## Per node" in md and "| 10.0.0.1 aaaaaaaa | 2 | 1 | 1 |" in md
    one = build_report(eps[:2], 1, {"name": "x"})
    assert len(one["per_node"]) == 1 and "## Per node" not in report_markdown(one, [])
