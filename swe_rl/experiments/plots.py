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
    """runs: method -> list of per-seed metric rows. One PNG per curve: thin lines per seed, thick mean, and a
    shaded band: the 95% t-interval of the mean over seeds at each step (where two or more seeds have it)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import numpy as np

    from swe_rl.experiments.stats import mean_t_interval

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
                    by_step = [dict(zip(*c, strict=True)) for c in curves]
                    stats = np.array([mean_t_interval([b[s] for b in by_step]) for s in common])
                    ax.plot(common, stats[:, 0], color=color, lw=2.2, label=f"{method} (n={len(curves)})")
                    if len(curves) > 1:
                        ax.fill_between(common, stats[:, 1], stats[:, 2], color=color, alpha=0.15, lw=0)
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


def plot_paired(primary: dict[str, Any], path: Path) -> Path:
    """The primary metric's paired differences (summary.json "primary"): per method against the baseline, one
    dot per seed (d_s, points of success), the mean with its two-level bootstrap 95% interval (thick) and the
    seeds-only interval (thin), and the zero line."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import numpy as np

    paired = primary["paired"]
    names = list(paired)
    fig, ax = plt.subplots(figsize=(1.8 + 1.4 * len(names), 3.8))
    rng = np.random.default_rng(0)  # jitter only
    for i, m in enumerate(names):
        p = paired[m]
        d = 100 * np.asarray(p["per_seed"])
        ax.scatter(i + rng.uniform(-0.12, 0.12, d.size), d, s=16, color="C0", alpha=0.6, zorder=3)
        mean = 100 * p["mean"]
        ax.errorbar(
            i + 0.3,
            mean,
            yerr=[[mean - 100 * p["lo"]], [100 * p["hi"] - mean]],
            fmt="o",
            color="C3",
            lw=2.5,
            capsize=5,
            zorder=4,
            label="mean, 95% CI (seeds + tasks)" if i == 0 else None,
        )
        s = p["seeds_only"]
        ax.errorbar(
            i + 0.42,
            mean,
            yerr=[[mean - 100 * s["lo"]], [100 * s["hi"] - mean]],
            fmt="none",
            color="C1",
            lw=1.2,
            capsize=3,
            zorder=4,
            label="95% CI (seeds only)" if i == 0 else None,
        )
    ax.axhline(0.0, color="black", lw=0.8)
    labels = [f"{m}\n- {primary['baseline']}\n{paired[m]['n_positive']}/{paired[m]['n_seeds']} seeds > 0"
              for m in names]  # fmt: skip
    ax.set_xticks(range(len(names)), labels, fontsize=8)
    ax.set_xlim(-0.6, len(names) - 0.2)
    ax.set_ylabel("paired difference (points of success)", fontsize=8)
    ax.set_title(f"primary: {primary['mode']} held-out success, last {primary['last_k']} evaluations",
                 fontsize=9)  # fmt: skip
    ax.grid(alpha=0.3, axis="y")
    ax.legend(fontsize=7, loc="upper right")
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


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
