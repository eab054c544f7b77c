"""Issue 25, class 6: the demo report says how many episodes were suspicious or touched the test harness, and
when the first suspicious one came (from the trainer's integrity/* metrics)."""

from __future__ import annotations

from swe_rl.experiments.demo_report import integrity_line


def test_integrity_line_counts_and_first_step():
    rows = [
        {"step": 1, "integrity/suspicious": 0.0, "integrity/harness_touched": 2.0},
        {"step": 2, "integrity/suspicious": 3.0, "integrity/harness_touched": 0.0},
        {"step": 2, "eval/greedy_success": 0.5},  # evaluation rows carry no integrity keys
        {"step": 3, "integrity/suspicious": 1.0, "integrity/harness_touched": 1.0},
    ]
    line = integrity_line(rows)
    assert "4 suspicious episode(s), first at step 2" in line and "3 that touched the test harness" in line
    assert "over 3 steps" in line
    assert "first at" not in integrity_line([{"step": 1, "integrity/suspicious": 0.0}])
    assert "not logged" in integrity_line([{"step": 1, "reward_mean": 0.1}])
