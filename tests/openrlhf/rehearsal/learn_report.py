"""The learning rehearsal's arms in order (learn_main.py), its checks and its table.

Each arm writes `<work>/<arm>.json` when it is done (evaluation included); a rerun skips finished arms, so an
interrupted rehearsal continues where it stopped. Checks (each a line OK/FAIL, also in summary.json):
- OpenRLHF's metrics.jsonl has steps 1..N, each with its 64 samples' prompts, and every training row's task is used
  exactly as often as the dataset holds it (no prompt reused, none skipped);
- resumed: the first launch was interrupted at step K; the second launch's first step is K+1 (no restarted step
  counter), its steps run to N and the prompts of the two launches together are the dataset's;
- each arm's final model was read back from its saved folder and evaluated on every held-out episode.
"""

from __future__ import annotations

import json
import time
from collections import Counter
from pathlib import Path
from typing import Any

import learn_eval as ev
import learn_main as lm


def _done(work: Path, arm: str) -> dict[str, Any] | None:
    """A finished arm's result (evaluated); an arm that stopped before its evaluation is run again."""
    path = work / f"{arm}.json"
    res = json.loads(path.read_text()) if path.is_file() else None
    return res if res is not None and "eval" in res else None


def _save(work: Path, arm: str, result: dict[str, Any]) -> dict[str, Any]:
    (work / f"{arm}.json").write_text(json.dumps(result, indent=1))
    return result


def _prompt_checks(
    label: str, rows: list[dict], want: Counter, first: int, last: int
) -> list[tuple[str, bool, str]]:
    steps = [r["step"] for r in rows]
    used = Counter(p for r in rows for p in r.get("prompts", []))
    return [
        (f"{label}: steps {first}..{last} logged once each", steps == list(range(first, last + 1)), f"steps {steps}"),
        (f"{label}: every sample's prompt is a training row, used as often as the dataset holds it",
         used == Counter({k: v * lm.SAMPLES for k, v in want.items()}),
         f"{sum(used.values())} samples over {len(used)} tasks, dataset {sum(want.values())} rows"),
    ]  # fmt: skip


def _openrlhf_arm(
    work: Path, arm: str, steps: int, interrupt_at: int | None, want: Counter
) -> dict[str, Any]:
    t0 = time.time()
    launches = [lm.run_launch(work, arm, steps, interrupt_at)]
    metrics = work / arm / "metrics.jsonl"
    first_rows = lm.read_metrics(metrics)
    checks: list[tuple[str, bool, str]] = []
    if interrupt_at is not None:
        checks.append(("resumed: the first launch was interrupted after its checkpoint of step K",
                       launches[0]["interrupted"] and max((r["step"] for r in first_rows), default=0) >= interrupt_at,
                       f"interrupted {launches[0]['interrupted']}, steps logged {[r['step'] for r in first_rows]}"))  # fmt: skip
        launches.append(lm.run_launch(work, arm, steps))
    rows = lm.read_metrics(metrics)
    final = work / arm / "final"
    if interrupt_at is not None:
        second = rows[len(first_rows) :]
        k = second[0]["step"] - 1 if second else None
        checks.append(("resumed: the second launch continues the step counter from the checkpoint",
                       k is not None and k >= interrupt_at and k <= first_rows[-1]["step"],
                       f"first launch logged up to {first_rows[-1]['step'] if first_rows else None}, "
                       f"second starts at {second[0]['step'] if second else None}"))  # fmt: skip
        # a step that finished after the checkpoint but before the interrupt is done again from the checkpoint
        rows = [r for r in first_rows if k is None or r["step"] <= k] + second
    checks += _prompt_checks(arm, rows, want, 1, steps)
    checks.append((f"{arm}: final model saved", (final / "config.json").is_file(), str(final)))
    result = {"launches": launches, "train_wall_s": time.time() - t0, "checks": checks, "metrics": rows}
    if (final / "config.json").is_file():
        result["eval"] = ev.evaluate(final, f"eval-{arm}", work / "evals", work / "held_out.jsonl")
    return result


def run_arms(work: Path, steps: int, interrupt_at: int, arms: list[str]) -> int:
    from swe_rl.train.openrlhf.data import write_prompt_dataset

    work.mkdir(parents=True, exist_ok=True)
    tasks = lm.train_tasks(steps)
    write_prompt_dataset(tasks, work / "rows.jsonl")
    ev.write_held_out(work / "held_out.jsonl")
    want = Counter(t.instance_id for t in tasks)
    results: dict[str, Any] = {}
    for arm in arms:
        if (done := _done(work, arm)) is not None:
            results[arm] = done
            continue
        print(f"learn: arm {arm}", flush=True)
        t0 = time.time()
        if arm == "start":
            res: dict[str, Any] = {"eval": ev.evaluate(lm.start_model(), "eval-start", work / "evals",
                                                       work / "held_out.jsonl"), "checks": []}  # fmt: skip
        elif arm == "builtin":
            final = lm.train_builtin(work, steps)
            res = {"train_wall_s": time.time() - t0, "checks": [("builtin: final model saved", True, str(final))],
                   "eval": ev.evaluate(final, "eval-builtin", work / "evals", work / "held_out.jsonl")}  # fmt: skip
        else:
            res = _openrlhf_arm(work, arm, steps, interrupt_at if arm == "resumed" else None, want)
        res["wall_s"] = time.time() - t0
        results[arm] = _save(work, arm, res)
    return write_summary(work, steps, interrupt_at, results)


def _table(results: dict[str, Any], updates: int) -> tuple[list[str], dict[str, Any]]:
    start = results["start"]["eval"]
    lines = ["| arm | policy updates | greedy | sampled (T=1) | greedy gain [95% CI] | sampled gain [95% CI] |",
             "|---|---|---|---|---|---|"]  # fmt: skip
    stats: dict[str, Any] = {}
    for arm, res in results.items():
        e = res.get("eval")
        if e is None:
            continue
        row = [arm, "0" if arm == "start" else str(updates)]
        row += [f"{100 * e[m]['rate']:.1f}%" for m in ("greedy", "sampled")]
        for m in ("greedy", "sampled"):
            g = ev.paired_bootstrap(start[m]["tasks"], e[m]["tasks"])
            stats[f"{arm}/{m}_gain"] = g
            row.append("—" if arm == "start" else f"{100 * g[0]:+.1f} [{100 * g[1]:+.1f}, {100 * g[2]:+.1f}]")
        lines.append("| " + " | ".join(row) + " |")
    return lines, stats


def write_summary(work: Path, steps: int, interrupt_at: int, results: dict[str, Any]) -> int:
    updates = steps * lm.PROMPTS * lm.SAMPLES // lm.MINIBATCH
    lines, stats = _table(results, updates) if "start" in results else ([], {})
    verdicts: list[str] = []
    for a, b in (("start", "openrlhf"), ("builtin", "openrlhf"), ("openrlhf", "resumed")):
        if a in results and b in results and "eval" in results[a] and "eval" in results[b]:
            for m in ("greedy", "sampled"):
                d = ev.paired_bootstrap(results[a]["eval"][m]["tasks"], results[b]["eval"][m]["tasks"])
                stats[f"{b}-{a}/{m}"] = d
                say = ev.verdict_rising(d) if a == "start" else ev.verdict_same(d)
                verdicts.append(f"{b} − {a}, {m}: {100 * d[0]:+.1f} points [{100 * d[1]:+.1f}, {100 * d[2]:+.1f}] "
                                f"→ {say}")  # fmt: skip
    checks = [c for r in results.values() for c in r.get("checks", [])]
    text = "\n".join(
        [*lines, "", *verdicts, "", *(f"{'OK  ' if ok else 'FAIL'} {n}: {d}" for n, ok, d in checks)]
    )
    print("\n" + text, flush=True)
    (work / "table.md").write_text(text + "\n")
    summary = {"steps": steps, "interrupt_at": interrupt_at, "updates": updates, "stats": stats,
               "walls_s": {a: r.get("wall_s") for a, r in results.items()}, "checks": checks}  # fmt: skip
    (work / "summary.json").write_text(json.dumps(summary, indent=1))
    if lines:
        _plot(work, results)
    return 0 if all(ok for _, ok, _ in checks) else 1


def _plot(work: Path, results: dict[str, Any]) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    arms = [a for a in results if "eval" in results[a]]
    fig, ax = plt.subplots(figsize=(7, 3.5))
    for j, m in enumerate(("greedy", "sampled")):
        vals = [100 * results[a]["eval"][m]["rate"] for a in arms]
        ax.bar([i + 0.38 * j for i in range(len(arms))], vals, width=0.36, label=m)
    ax.set_xticks([i + 0.19 for i in range(len(arms))], arms)
    ax.set_ylabel("held-out success (%)")
    ax.set_title(f"{ev.HELD_OUT} held-out tasks: greedy, and {ev.SAMPLED} samples at T=1")
    ax.legend()
    fig.tight_layout()
    fig.savefig(work / "gains.png", dpi=120)
