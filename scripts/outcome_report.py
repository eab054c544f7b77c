"""Secondary, descriptive analysis of the AEM outcome study (docs/results/outcome_study_design.md), per decision.

For the start checkpoint and every run's final checkpoint, on the test split (the study's 200 tasks x 4 samples
at T = 1, the evaluator's seed): the share of episodes whose locate / edit 1 / edit 2 / submit decision is right,
and the mean entropy of each decision token. From the runs' metrics: the token entropy curve per method, and
AEM's premise on the start (span entropies within one turn type, the range rule's share of groups).

    python scripts/outcome_report.py [STUDY_DIR] [OUT_DIR]     (defaults: runs/aem_outcome, STUDY_DIR/turns)

Writes OUT_DIR/turns.json, turns.md and turns.png. The primary analysis is `swe-rl compare`'s summary.md.
"""

from __future__ import annotations

import json
import statistics
import sys
from pathlib import Path
from typing import Any

from swe_rl.experiments.decisions import TURNS, decision_tasks
from swe_rl.experiments.plots import series
from swe_rl.experiments.turns import decision_stats
from swe_rl.runs import RunDir


def main(study: Path, out: Path) -> None:
    if not study.is_dir():
        raise SystemExit(
            f"outcome_report: {study} is not a folder (expected a study's --out, e.g. runs/aem_outcome)"
        )
    runs = sorted(p for p in study.iterdir() if (p / "metrics.jsonl").is_file())
    if not runs or not (study / "start" / "config.json").is_file():
        raise SystemExit(f"outcome_report: {study} has no runs with metrics.jsonl or no start/ checkpoint: "
                         "expected the --out folder of scripts/outcome_study.sh")  # fmt: skip
    out.mkdir(parents=True, exist_ok=True)
    import yaml

    raw = yaml.safe_load((runs[0] / "config.yaml").read_text())
    n_tasks, n = raw["eval"]["n_tasks"], raw["eval"]["sampled"]
    tasks = decision_tasks(raw["eval"]["split"], n_tasks, raw["data"]["seed"])
    rf = bool(raw["data"].get("decisions", {}).get("reason_first", False))
    result: dict[str, Any] = {"start": decision_stats(study / "start", tasks, n, rf), "runs": {}}
    for r in runs:
        ckpts = sorted((r / "checkpoints").glob("step_*"))
        if not ckpts:
            continue
        result["runs"][r.name] = {"step": int(ckpts[-1].name.split("_")[1])} | decision_stats(
            ckpts[-1] / "model", tasks, n, rf
        )
    methods = sorted({name.rsplit("_s", 1)[0] for name in result["runs"]})
    # entropy curves and AEM's premise from the metrics
    curves: dict[str, dict[int, list[float]]] = {}
    premise: dict[str, list[float]] = {}
    for r in runs:
        m = r.name.rsplit("_s", 1)[0]
        rows = RunDir(r).read_metrics()
        steps, ent = series(rows, "entropy_mean")
        for s, v in zip(steps, ent, strict=True):
            curves.setdefault(m, {}).setdefault(s, []).append(v)
        _, rr = series(rows, "algo/aem/frac_groups_range_rule")
        if rr:
            premise.setdefault("range_rule_share_step1", []).append(rr[0])
            premise.setdefault("range_rule_share_all_steps", []).append(statistics.mean(rr))
    result["entropy_curve"] = {
        m: {s: statistics.mean(v) for s, v in sorted(c.items())} for m, c in curves.items()
    }
    result["premise"] = {k: statistics.mean(v) for k, v in premise.items()}
    (out / "turns.json").write_text(json.dumps(result, indent=1))
    lines = ["| checkpoint | runs | patch right | right + submitted | " + " | ".join(f"{t} right (H)" for t in TURNS) + " |",
             "|---|---|---|---|" + "---|" * len(TURNS)]  # fmt: skip
    s = result["start"]
    lines.append("| start | 1 | " + f"{s['success']:.1%} | {s['resolved']:.1%} | "
                 + " | ".join(f"{s[t]['right']:.1%} ({s[t]['entropy']:.2f})" for t in TURNS) + " |")  # fmt: skip
    for m in methods:
        rs = [v for k, v in result["runs"].items() if k.rsplit("_s", 1)[0] == m]
        cell = lambda f, rs=rs: statistics.mean(f(v) for v in rs)  # noqa: E731
        lines.append(f"| {m} (final) | {len(rs)} | {cell(lambda v: v['success']):.1%} | "
                     f"{cell(lambda v: v['resolved']):.1%} | " + " | ".join(
            f"{cell(lambda v, t=t: v[t]['right']):.1%} ({cell(lambda v, t=t: v[t]['entropy']):.2f})" for t in TURNS
        ) + " |")  # fmt: skip
    ec = result["entropy_curve"]
    lines += ["", "Token entropy of the old-policy pass (nats, mean over seeds):", "",
              "| method | step 1 | 10 | 20 | 40 | 60 | 100 |", "|---|---|---|---|---|---|---|"]  # fmt: skip
    for m in methods:
        lines.append(f"| {m} | " + " | ".join(
            f"{ec[m][st]:.3f}" if st in ec[m] else "n/a" for st in (1, 10, 20, 40, 60, 100)) + " |")  # fmt: skip
    lines += ["", "Start: within-group sd of the span-mean entropy, by turn (nats): " + ", ".join(
        f"{t} {s[t]['span_entropy_sd_within_group']:.3f}" for t in TURNS) + "."]  # fmt: skip
    if result["premise"]:
        p = result["premise"]
        lines += ["", f"AEM runs: groups under the 0.1-nat range rule at step 1: {p['range_rule_share_step1']:.1%}; "
                  f"over all steps: {p['range_rule_share_all_steps']:.1%}."]  # fmt: skip
    (out / "turns.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))
    _plot(result, methods, out / "turns.png")


def _plot(result: dict[str, Any], methods: list[str], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(8, 4))
    width = 0.8 / (len(methods) + 1)
    for j, m in enumerate(["start", *methods]):
        vals = (
            [[result["start"][t]["right"]] for t in TURNS]
            if m == "start"
            else [
                [v[t]["right"] for k, v in result["runs"].items() if k.rsplit("_s", 1)[0] == m] for t in TURNS
            ]
        )
        xs = [i + (j - len(methods) / 2) * width for i in range(len(TURNS))]
        ax.bar(xs, [statistics.mean(v) for v in vals], width, label=m, alpha=0.7)
        for x, v in zip(xs, vals, strict=True):
            ax.scatter([x] * len(v), v, s=8, color="black", zorder=3)
    ax.set_xticks(range(len(TURNS)), TURNS)
    ax.set_ylabel("share of test episodes with this decision right (T=1)")
    ax.set_ylim(0, 1.05)
    ax.legend(fontsize=8)
    ax.set_title("Which decisions each method learned (final checkpoints; dots = seeds)")
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


if __name__ == "__main__":
    study_dir = Path(sys.argv[1]) if len(sys.argv) > 1 else Path("runs/aem_outcome")
    main(study_dir, Path(sys.argv[2]) if len(sys.argv) > 2 else study_dir / "turns")
