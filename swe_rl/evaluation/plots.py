"""PNG plots for report.md: resolve rate by repo, steps and tokens per episode, exit reasons (matplotlib, Agg)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from swe_rl.evaluation.report import Episode


def write_plots(report: dict[str, Any], episodes: list[Episode], out_dir: Path) -> list[str]:
    """Write the PNGs into out_dir; returns their file names (relative, for report.md)."""
    import matplotlib

    matplotlib.use("Agg")  # no display on servers; set before pyplot is imported
    import matplotlib.pyplot as plt

    out_dir.mkdir(parents=True, exist_ok=True)
    names = []

    def save(fig: Any, name: str) -> None:
        fig.tight_layout()
        tmp = out_dir / f".{name}.tmp.png"
        fig.savefig(tmp, dpi=100)
        plt.close(fig)
        tmp.replace(out_dir / name)
        names.append(name)

    repos = report["per_repo"]
    fig, ax = plt.subplots(figsize=(max(4.0, 1.2 * len(repos) + 2), 3.2))
    ax.bar([r or "(none)" for r in repos], [v["resolve_rate"] for v in repos.values()], color="#4c78a8")
    ax.set_ylim(0, 1)
    ax.set_ylabel("resolve rate")
    ax.set_title("Resolve rate by repository")
    ax.tick_params(axis="x", rotation=30)
    save(fig, "resolve_rate_by_repo.png")

    for field, title in (("steps", "Steps per episode"), ("tokens", "Tokens per episode")):
        fig, ax = plt.subplots(figsize=(5, 3.2))
        values = [getattr(e, field) for e in episodes]
        ax.hist(values, bins=min(30, max(1, len(set(values)))), color="#72b7b2")
        ax.set_xlabel(field)
        ax.set_ylabel("episodes")
        ax.set_title(title)
        save(fig, f"{field}_per_episode.png")

    exits = report["exit_status_counts"]
    fig, ax = plt.subplots(figsize=(5, 3.2))
    ax.barh(list(exits), list(exits.values()), color="#f58518")
    ax.set_xlabel("episodes")
    ax.set_title("Exit reasons")
    save(fig, "exit_reasons.png")
    return names
