"""The demo report says what AEM did from the run's own metrics, says what to expect from the micro suite, and
renders as Markdown (every table row has its header's column count, no raw newline in a row)."""

from __future__ import annotations

from pathlib import Path

import pytest

from swe_rl.experiments.demo_report import (
    aem_activity,
    aem_section,
    micro_section,
    table_problems,
    write_report,
)

TURN = "algo/aem/alpha_turn/"


def demo_like_rows(off: list[float], alpha: list[float], edit: list[float]) -> list[dict]:
    """metrics.jsonl rows shaped like the shipped demo's (train steps with AEM diagnostics, two evaluations)."""
    rows: list[dict] = [{"step": 0, "eval/greedy_success": 0.70, "eval/sampled_success": 0.45}]
    for s, (o, a, e) in enumerate(zip(off, alpha, edit, strict=True), 1):
        rows.append({"step": s, "reward_mean": 0.4 + s / 100, "mixed_group_frac": 1.0,
                     "algo/aem/alpha_mean": a, "algo/aem/frac_groups_range_rule": o, "algo/aem/alpha_token_mean": a,
                     f"{TURN}file_editor:str_replace": e, f"{TURN}submit": 2 - e})  # fmt: skip
    rows.append({"step": len(off), "eval/greedy_success": 0.80, "eval/sampled_success": 0.60})
    return rows


def test_a_mostly_switched_off_run_is_called_grpo_from_its_numbers(tmp_path: Path) -> None:
    # the shipped demo: 100% of groups under the range rule at the first step, 75% at the last, α 1.000 -> 1.014
    off = [1.0] * 12 + [0.875] * 11 + [0.75]
    alpha = [1.0] * 12 + [1.01] * 11 + [1.014]
    edit = [1.0] * 12 + [0.95] * 11 + [0.9]
    rows = demo_like_rows(off, alpha, edit)
    (tmp_path / "heldout").mkdir()
    md = write_report(
        tmp_path, rows, None, tmp_path / "heldout" / "report.md", (0.0, 300.0, 360.0)
    ).read_text()
    assert "in 100% of groups at the first RL step and 75% at the last" in md
    assert "went from 1.000 to 1.014" in md and "in effect GRPO" in md
    # α per turn type over the 12 steps where AEM acted, not diluted by the 12 where it was off everywhere
    assert "| file_editor:str_replace | 0.946 | 12 |" in md and "| submit | 1.054 | 12 |" in md
    assert table_problems(md) == []


def test_an_active_run_is_not_called_grpo() -> None:
    rows = demo_like_rows([0.1, 0.0], [0.93, 0.9], [0.6, 0.5])
    act = aem_activity(rows)
    assert act is not None and not act["grpo_like"] and act["acting_steps"] == [1, 2]
    text = "\n".join(aem_section(rows))
    assert "in effect GRPO" not in text and "| file_editor:str_replace | 0.550 | 2 |" in text
    assert aem_activity([{"step": 1, "reward_mean": 0.5}]) is None  # a run without AEM has no section
    off = "\n".join(aem_section(demo_like_rows([1.0, 1.0], [1.0, 1.0], [1.0, 1.0])))
    assert "in effect GRPO" in off and "AEM acted in no group" in off


def test_hostile_labels_and_errors_cannot_break_a_table() -> None:
    rows = demo_like_rows([0.5, 0.5], [0.9, 0.9], [0.8, 0.8])
    rows[1][f"{TURN}view\n<function=submit>|x"] = (
        0.7  # a key from a metrics file written before the closed set
    )
    md = "\n".join(aem_section(rows) + micro_section({"error": "RuntimeError: boom\n| a | b |\nTraceback"}))
    assert table_problems(md) == []
    assert "<function=submit>\\|x" in md and "boom \\| a \\| b \\| Traceback" in md  # one line, `|` escaped


def test_table_problems_finds_a_broken_row() -> None:
    bad = "| a | b |\n|---|---|\n| 1 | 2 |\n| view\n<function=submit> | 3 |\n"
    assert [p.split(":")[0] for p in table_problems(bad)] == [
        "line 4",
        "line 5",
    ]  # both halves of the cut row
    assert table_problems("| a | b |\n|---|---|\n| 1 | 2 | 3 |\n\ntext | with a pipe\n") != []
    assert table_problems("| a | b |\n|---|---|\n| 1 \\| x | 2 |\n\ntext | with a pipe\n") == []


@pytest.mark.parametrize(
    "exits, expect", [({"format_errors": 15}, True), ({"submitted": 10, "max_steps": 5}, False)]
)
def test_the_micro_suite_section_says_what_to_expect(exits: dict, expect: bool) -> None:
    micro = {"resolve_rate": 0.0, "n_instances": 15, "episodes": 15, "exit_status_counts": exits,
             "counts": {"resolved": 0, "unresolved": 15 - exits.get("format_errors", 0),
                        "empty_patch": exits.get("format_errors", 0), "infra_failure": 0}}  # fmt: skip
    text = "\n".join(micro_section(micro))
    assert "What to expect" in text and "expect 0 or almost 0 resolved" in text
    assert ("every episode ended with exit `format_errors`" in text) is expect
    assert table_problems(text) == []
