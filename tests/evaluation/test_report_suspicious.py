"""Issue 25: the evaluation report keeps a suspicious episode's verdict (reward policy `keep`) and lists it with
the grader's reasons, in report.json and report.md."""

from __future__ import annotations

from swe_rl.agent.trajectory import Trajectory
from swe_rl.evaluation.harness import grading_record
from swe_rl.evaluation.report import build_report, episode_from, report_markdown


def test_suspicious_episodes_are_listed_with_their_reasons():
    reasons = ["tripwire: test detection: PYTEST_* environment: pkg/a.py"]
    hacked = Trajectory(task_id="a__r-1", sample_idx=0, patch="diff", exit_status="submitted", reward=1.0)
    hacked.resolved = True
    hacked.metrics["grading"] = {"failure": None, "tests": {}, "suspicious": reasons}
    record = grading_record(hacked, "ours")
    assert record["suspicious"] == reasons and record["resolved"]
    clean = Trajectory(task_id="b__s-2", sample_idx=0, patch="diff", exit_status="submitted", reward=1.0)
    clean.metrics["grading"] = {"failure": None, "tests": {}}
    eps = [episode_from(hacked, record, "a/r"), episode_from(clean, grading_record(clean, "ours"), "b/s")]
    rep = build_report(eps, 1, {"name": "x"})
    assert rep["counts"]["resolved"] == 1  # kept: evaluation reports, it does not re-grade
    assert rep["suspicious"] == [
        {"run": 0, "instance_id": "a__r-1", "bucket": "resolved", "reasons": reasons}
    ]
    assert "Suspicious episodes (reward hack suspected, verdict kept): 1" in report_markdown(rep, [])


def test_patch_caused_timeouts_are_unresolved_and_counted():
    """swe_rl.grading.grader._patch_caused: a timeout the patch caused on a validated instance is reward 0, counted
    unresolved (not an infrastructure failure) and named in the report."""
    hung = Trajectory(task_id="a__r-1", sample_idx=0, patch="diff", exit_status="submitted", reward=0.0)
    hung.metrics["grading"] = {
        "failure": None,
        "tests": {"patch_caused": {"failure": "test_timeout", "why": "x"}},
    }
    masked = Trajectory(task_id="b__s-2", sample_idx=0, patch="diff", exit_status="submitted", reward=None)
    masked.metrics["grading"] = {"failure": "test_timeout", "tests": {}}
    eps = [episode_from(t, grading_record(t, "ours"), "r") for t in (hung, masked)]
    rep = build_report(eps, 1, {"name": "x"})
    assert rep["counts"]["unresolved"] == 1 and rep["counts"]["infra_failure"] == 1
    assert rep["patch_caused_labels"] == {"test_timeout": 1} and rep["infra_failure_labels"] == {
        "test_timeout": 1
    }
    assert "Unresolved by what the patch caused (gold's grading here was clean): test_timeout ×1" in (
        report_markdown(rep, [])
    )
