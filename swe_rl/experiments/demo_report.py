"""The demo's report (runs/demo/report/report.md) from the run's own metrics: held-out success before and after RL,
how failures changed, what AEM actually did (computed from its diagnostics, with a plain verdict when the range
rule left it inactive), the micro suite with what a user should expect there, and the curves.

Every table row has its header's column count and no cell holds a raw newline or `|` (`md_cell`), so the report
renders as Markdown whatever a metric key or an error message contains; `table_problems` checks that.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from swe_rl.experiments.plots import AEM_TURN_PREFIX, series

# "In effect GRPO": the range rule switched AEM off in at least this share of groups on average over the steps,
# and the token-weighted mean α (what the token-mean loss sees) stayed within this of 1 at every step.
GRPO_LIKE_OFF_FRAC = 0.5
GRPO_LIKE_ALPHA_DEV = 0.05
RANGE_KEY = "algo/aem/frac_groups_range_rule"
ALPHA_KEY = "algo/aem/alpha_token_mean"


def md_cell(value: object) -> str:
    """One Markdown table cell: whitespace runs (newlines included) collapsed, `|` escaped."""
    return re.sub(r"\s+", " ", str(value)).strip().replace("|", "\\|")


def md_table(header: list[str], rows: list[list[object]]) -> list[str]:
    """Lines of a Markdown table; a row that does not have the header's width is an error."""
    for r in rows:
        if len(r) != len(header):
            raise ValueError(f"table row {r!r}: expected {len(header)} cells ({header})")
    out = ["| " + " | ".join(md_cell(h) for h in header) + " |", "|" + "---|" * len(header)]
    return out + ["| " + " | ".join(md_cell(c) for c in r) + " |" for r in rows]


def table_problems(markdown: str) -> list[str]:
    """Table rows that would not render as one row of their table: a table starts at a line beginning with `|`
    and runs to the next blank line; every line in it must begin and end with `|` and have the header's cell
    count (an escaped `\\|` is text). A raw newline in a cell shows up as two bad lines."""
    problems, width = [], None
    for n, line in enumerate(markdown.splitlines(), 1):
        text = line.strip()
        if not text:
            width = None
            continue
        if width is None and not text.startswith("|"):
            continue
        cells = len(re.split(r"(?<!\\)\|", text)) - 2
        if width is None:
            width = cells
        elif cells != width or not text.startswith("|") or not re.search(r"(?<!\\)\|$", text):
            problems.append(f"line {n}: not a row of {width} cells: {line}")
    return problems


def aem_activity(rows: list[dict[str, Any]]) -> dict[str, Any] | None:
    """What AEM did in a run, from its per-step diagnostics (None without AEM): the range rule's share of groups
    and the token-weighted mean α at the first and last step, the steps where AEM acted in at least one group,
    the mean α per turn type over those steps, and whether the run was in effect GRPO."""
    steps = [r for r in rows if r.get(RANGE_KEY) is not None and r.get(ALPHA_KEY) is not None]
    if not steps:
        return None
    off = [float(r[RANGE_KEY]) for r in steps]
    alpha = [float(r[ALPHA_KEY]) for r in steps]
    acting = [r for r in steps if float(r[RANGE_KEY]) < 1.0]
    turns = sorted(
        {k.removeprefix(AEM_TURN_PREFIX) for r in acting for k in r if k.startswith(AEM_TURN_PREFIX)}
    )
    by_turn = {}
    for t in turns:
        vals = [float(r[AEM_TURN_PREFIX + t]) for r in acting if r.get(AEM_TURN_PREFIX + t) is not None]
        by_turn[t] = (sum(vals) / len(vals), len(vals))
    mean_off = sum(off) / len(off)
    return {
        "steps": [int(r["step"]) for r in steps], "off_first": off[0], "off_last": off[-1], "off_mean": mean_off,
        "alpha_first": alpha[0], "alpha_last": alpha[-1], "alpha_max_dev": max(abs(a - 1) for a in alpha),
        "acting_steps": [int(r["step"]) for r in acting], "by_turn": by_turn,
        "grpo_like": mean_off >= GRPO_LIKE_OFF_FRAC and max(abs(a - 1) for a in alpha) <= GRPO_LIKE_ALPHA_DEV,
    }  # fmt: skip


def aem_section(rows: list[dict[str, Any]]) -> list[str]:
    """The report's "What AEM did" section: a plain verdict and α per turn type where AEM acts."""
    act = aem_activity(rows)
    if act is None:
        return []
    n = len(act["steps"])
    lines = ["", "## What AEM did", "",
             f"The range rule switched AEM off (α = 1 for the whole group) in {act['off_first']:.0%} of groups at the"
             f" first RL step and {act['off_last']:.0%} at the last ({act['off_mean']:.0%} on average over {n}"
             f" steps); the token-weighted mean α, which the token-mean loss sees, went from"
             f" {act['alpha_first']:.3f} to {act['alpha_last']:.3f}."]  # fmt: skip
    if act["grpo_like"]:
        lines[-1] += (" **So this run is in effect GRPO**: AEM barely changed any advantage. The range rule "
                      "switches AEM off in a group whose turns' mean entropies all lie within "
                      "`algo.modulator.aem.min_range` of each other, as they did in most groups here.")  # fmt: skip
    if not act["acting_steps"]:
        return [*lines, "", "AEM acted in no group at any step, so there is no α per turn type to show."]
    lines += ["", f"Mean α per turn type over the {len(act['acting_steps'])} steps where AEM acted in at least one"
              " group (spans in switched-off groups count with α = 1):", ""]  # fmt: skip
    body = [[t, f"{a:.3f}", k] for t, (a, k) in act["by_turn"].items()]
    return lines + md_table(["turn type", "mean α", "steps with this turn"], body)


def micro_section(micro: dict[str, Any]) -> list[str]:
    """The hand-written micro suite's result, and why a user should expect few or no resolved tasks there."""
    lines = ["", "## Hand-written micro suite (evaluation harness)", ""]
    if micro.get("error"):
        return [*lines, f"The micro-suite evaluation failed: {md_cell(micro['error'])}"]
    counts = micro.get("counts") or {}
    n = int(micro.get("episodes") or 0)
    rate = micro.get("resolve_rate")
    lines += md_table(["resolved", "unresolved", "empty patch", "infra failure", "resolve rate"],
                      [[counts.get("resolved", 0), counts.get("unresolved", 0), counts.get("empty_patch", 0),
                        counts.get("infra_failure", 0), "n/a" if rate is None else f"{rate:.1%}"]])  # fmt: skip
    exits = micro.get("exit_status_counts") or {}
    why = ", ".join(f"{k} {v}" for k, v in sorted(exits.items(), key=lambda kv: -kv[1]))
    lines += ["", f"Episodes by exit status: {md_cell(why) or 'n/a'}.", "",
              "What to expect: the demo's 1M-parameter model has only ever seen the generated micro tasks it was "
              "trained on. The hand-written suite's repositories, file names and free-form issue texts are new to "
              "it, so expect 0 or almost 0 resolved. This section shows that the evaluation harness runs the "
              "suite end to end on the trained checkpoint (sandboxes, agent, grading, report), not that the tiny "
              "model solves it."]  # fmt: skip
    if n and exits.get("format_errors", 0) == n:
        lines[-1] += (" Here every episode ended with exit `format_errors`: the model's reply did not parse as a "
                      "tool call, so no file was edited and every patch is empty.")  # fmt: skip
    return lines


def _failure_rows(rows: list[dict[str, Any]]) -> list[list[object]]:
    """How the unresolved held-out episodes failed, at the first and the last evaluation."""
    from swe_rl.train.evaluate import FAILURE_MODES

    out: list[list[object]] = []
    for mode in ("greedy", "sampled"):
        for fm in FAILURE_MODES:
            _, v = series(rows, f"eval/{mode}_fail/{fm}")
            if v and (v[0] or v[-1]):
                out.append(
                    [f"held-out failed by {fm.replace('_', ' ')}, {mode}", f"{v[0]:.1%}", f"{v[-1]:.1%}"]
                )
    return out


def summary_rows(rows: list[dict[str, Any]]) -> list[list[object]]:
    """Before / after rows: held-out success, train reward, mixed groups, failure modes."""
    _, succ = series(rows, "eval/greedy_success")
    _, samp = series(rows, "eval/sampled_success")
    _, mixed = series(rows, "mixed_group_frac")
    train_rows = [r for r in rows if "reward_mean" in r]
    out: list[list[object]] = [["held-out success, greedy", f"{succ[0]:.1%}", f"{succ[-1]:.1%}"] if succ
                               else ["held-out success, greedy", "n/a", "n/a"]]  # fmt: skip
    if samp:
        out.append(["held-out success, sampled T=1", f"{samp[0]:.1%}", f"{samp[-1]:.1%}"])
    if train_rows:
        first, last = train_rows[0]["reward_mean"], train_rows[-1]["reward_mean"]
        out.append(["train reward (first / last step)", f"{first:.1%}", f"{last:.1%}"])
    if mixed:
        out.append(["mixed groups (first / last step)", f"{mixed[0]:.0%}", f"{mixed[-1]:.0%}"])
    return out + _failure_rows(rows)


def integrity_line(rows: list[dict[str, Any]]) -> str:
    """Reward integrity over the run (a demo that learned to game the grader must show it): suspicious and harness-touching episodes, from integrity/*."""
    train = [r for r in rows if "integrity/suspicious" in r]
    if not train:
        return "Reward integrity: not logged by this trainer."
    sus = int(sum(r["integrity/suspicious"] for r in train))
    touched = int(sum(r.get("integrity/harness_touched", 0) for r in train))
    first = next((r["step"] for r in train if r["integrity/suspicious"]), None)
    when = f", first at step {first}" if first is not None else ""
    return (f"Reward integrity: {sus} suspicious episode(s){when} (rewarded per algo.reward.suspicious), "
            f"{touched} that touched the test harness (reset by the grader), over {len(train)} steps.")  # fmt: skip


def write_report(report_dir: Path, rows: list[dict[str, Any]], micro: dict[str, Any] | None, held_md: Path,
                 times: tuple[float, float, float]) -> Path:  # fmt: skip
    """report.md (+ PNG curves) in `report_dir`; `times`: SFT/load, RL + evaluation, total, in seconds."""
    from swe_rl.experiments.plots import plot_methods

    pngs = plot_methods({"GRPO+AEM": [rows]}, report_dir)
    steps, _ = series(rows, "eval/greedy_success")
    t_sft, t_rl, t_all = times
    lines = ["# swe-rl demo report", "", *md_table(["", "before RL", "after RL"], summary_rows(rows)),
             "", f"Steps with held-out evaluation: {steps}", "",
             f"Time: SFT/load {t_sft / 60:.1f} min, RL + evaluation {t_rl / 60:.1f} min, total {t_all / 60:.1f} min.",
             "", integrity_line(rows),
             "", f"Held-out episodes report (evaluation harness format): {held_md.relative_to(report_dir)}",
             *aem_section(rows)]  # fmt: skip
    if micro is not None:
        lines += micro_section(micro)
    evals = [r for r in rows if "eval/greedy_success" in r]
    if len(evals) >= 2 and any("_fail/" in k for k in evals[0]):
        from swe_rl.experiments.plots import plot_failure_modes

        first, last = ({k.removeprefix("eval/"): v for k, v in r.items()} for r in (evals[0], evals[-1]))
        pngs.append(
            plot_failure_modes({"before RL": first, "after RL": last}, report_dir / "failure_modes.png")
        )
    lines += ["", "## Curves", ""] + [f"![{p.stem}]({p.name})" for p in pngs]
    out = report_dir / "report.md"
    out.write_text("\n".join(lines) + "\n")
    return out
