"""Learning-curve plots from metrics.jsonl files: one run (the demo) or several methods x seeds (compare)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

CURVES = {
    "heldout_success.png": ("eval/greedy_success", "held-out success (greedy)"),
    "heldout_success_sampled.png": ("eval/sampled_success", "held-out success (sampled, T=1)"),
    "entropy.png": ("entropy_mean", "policy token entropy (old-policy pass)"),
    "mixed_groups.png": ("mixed_group_frac", "fraction of groups with mixed rewards"),
    "train_reward.png": ("reward_mean", "training reward (sampled, T=1)"),
    "aem_range_rule.png": (
        "algo/aem/frac_groups_range_rule",
        "AEM: share of groups under the range rule (α = 1)",
    ),
    "aem_alpha_token_mean.png": ("algo/aem/alpha_token_mean", "AEM: token-weighted mean α"),
}
AEM_TURN_PREFIX = "algo/aem/alpha_turn/"


def aem_summary(rows: list[dict[str, Any]]) -> dict[str, Any]:
    """AEM's own diagnostics of one run, averaged over its RL steps: the share of groups under the range rule,
    the token-weighted mean α and the mean α per turn type ({} for a run without AEM)."""
    steps = [r for r in rows if "algo/aem/alpha_mean" in r]
    if not steps:
        return {}

    def mean(key: str) -> float | None:
        vals = [float(r[key]) for r in steps if r.get(key) is not None]
        return sum(vals) / len(vals) if vals else None

    turns = sorted({k for r in steps for k in r if k.startswith(AEM_TURN_PREFIX)})
    return {
        "steps": len(steps),
        "frac_groups_range_rule": mean("algo/aem/frac_groups_range_rule"),
        "alpha_token_mean": mean("algo/aem/alpha_token_mean"),
        "alpha_by_turn": {k.removeprefix(AEM_TURN_PREFIX): mean(k) for k in turns},
    }


def aem_report_rows(rows: list[dict[str, Any]]) -> list[str]:
    """Markdown table rows (two columns after the label: first / last RL step) of AEM's diagnostics."""
    steps = [r for r in rows if "algo/aem/alpha_mean" in r]
    if not steps:
        return []
    first, last = steps[0], steps[-1]

    def cell(r: dict[str, Any], key: str, fmt: str) -> str:
        return format(float(r[key]), fmt) if r.get(key) is not None else "n/a"

    out = [
        f"| AEM: groups under the range rule (first / last step) | {cell(first, 'algo/aem/frac_groups_range_rule', '.0%')}"
        f" | {cell(last, 'algo/aem/frac_groups_range_rule', '.0%')} |",
        f"| AEM: token-weighted mean α | {cell(first, 'algo/aem/alpha_token_mean', '.3f')} | "
        f"{cell(last, 'algo/aem/alpha_token_mean', '.3f')} |",
    ]
    for key in sorted({k for r in steps for k in r if k.startswith(AEM_TURN_PREFIX)}):
        label = key.removeprefix(AEM_TURN_PREFIX)
        out.append(f"| AEM: mean α, {label} turns | {cell(first, key, '.3f')} | {cell(last, key, '.3f')} |")
    return out


def series(rows: list[dict[str, Any]], key: str) -> tuple[list[int], list[float]]:
    """(steps, values) of `key`; the last value wins when a step was logged twice (resume)."""
    by_step: dict[int, float] = {}
    for r in rows:
        if r.get(key) is not None:
            by_step[int(r["step"])] = float(r[key])
    steps = sorted(by_step)
    return steps, [by_step[s] for s in steps]


def plot_methods(runs: dict[str, list[list[dict[str, Any]]]], out_dir: Path) -> list[Path]:
    """runs: method -> list of per-seed metric rows. One PNG per curve: thin lines per seed, thick mean."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import numpy as np

    out_dir.mkdir(parents=True, exist_ok=True)
    written = []
    for name, (key, title) in CURVES.items():
        if not any(series(rows, key)[0] for seeds in runs.values() for rows in seeds):
            continue  # e.g. no sampled evaluation configured
        fig, ax = plt.subplots(figsize=(6, 3.6))
        for i, (method, seeds) in enumerate(sorted(runs.items())):
            color = f"C{i}"
            curves = [series(rows, key) for rows in seeds]
            curves = [c for c in curves if c[0]]
            for steps, vals in curves:
                ax.plot(steps, vals, color=color, alpha=0.25, lw=1)
            if curves:
                common = sorted(set.intersection(*(set(c[0]) for c in curves)))
                if common:
                    mean = [np.mean([dict(zip(*c, strict=True))[s] for c in curves]) for s in common]
                    ax.plot(common, mean, color=color, lw=2.2, label=f"{method} (n={len(curves)})")
        ax.set_title(title)
        ax.set_xlabel("RL step")
        ax.grid(alpha=0.3)
        if ax.get_legend_handles_labels()[0]:
            ax.legend(fontsize=8)
        fig.tight_layout()
        path = out_dir / name
        fig.savefig(path, dpi=100)
        plt.close(fig)
        written.append(path)
    return written


def plot_failure_modes(results: dict[str, dict[str, Any]], path: Path) -> Path:
    """results: checkpoint name -> held-out eval metrics (HeldOutEval). Stacked bars per checkpoint, one panel per
    decoding mode: success, then each failure mode (swe_rl.train.evaluate.FAILURE_MODES), as fractions of episodes."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from swe_rl.train.evaluate import FAILURE_MODES

    modes = [m for m in ("greedy", "sampled") if any(f"{m}_success" in r for r in results.values())]
    if not modes:
        raise ValueError("results: expected held-out eval metrics with greedy_success or sampled_success")
    names = list(results)
    parts = [
        ("success", "tab:green"),
        *zip(FAILURE_MODES, ("tab:red", "tab:orange", "tab:gray", "black"), strict=True),
    ]
    fig, axes = plt.subplots(
        1, len(modes), figsize=(1.0 + 0.55 * len(names) * len(modes), 3.8), squeeze=False
    )
    for ax, mode in zip(axes[0], modes, strict=True):
        bottom = [0.0] * len(names)
        for part, color in parts:
            key = f"{mode}_success" if part == "success" else f"{mode}_fail/{part}"
            vals = [float(results[n].get(key, 0.0)) for n in names]
            ax.bar(names, vals, bottom=bottom, color=color, label=part.replace("_", " "))
            bottom = [b + v for b, v in zip(bottom, vals, strict=True)]
        ax.set_title("greedy" if mode == "greedy" else "sampled (T=1)", fontsize=9)
        ax.set_ylabel("fraction of held-out episodes", fontsize=8)
        ax.set_ylim(0, 1)
        ax.tick_params(axis="x", labelrotation=60, labelsize=7)
    axes[0][-1].legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.0, 1.0))
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path
