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
}


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
