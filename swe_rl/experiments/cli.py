"""`swe-rl demo` and `swe-rl compare`, added to the top-level CLI (swe_rl/cli.py) by `register`. Importing this
module imports the package, whose __init__ registers the experiment data sources (toy, decisions) with
`swe-rl train`. The trainer (swe_rl.train) never imports this package: the experiments are built on top of it, and
the swe-rl CLI is where the two meet.

Imports stay inside the commands so `swe-rl --help` does not pay for them.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import typer

OVERRIDES = typer.Option([], "--override", "-o", help="dotted KEY=VALUE override, e.g. optim.lr=1e-4")


def demo_command(
    config: list[str] = typer.Option(["configs/demo.yaml"], "--config", "-c", help="YAML config file(s)"),
    override: list[str] = OVERRIDES,
) -> None:
    """SFT warm start (or the shipped checkpoint) -> short GRPO+AEM run -> held-out + micro-suite eval -> report."""
    from sandboxes.lifecycle import reap_at_start
    from swe_rl.config import load_config
    from swe_rl.experiments.demo import DemoConfig, run_demo

    reap_at_start("demo")  # this host's sandboxes of dead runs go first
    files: list[str | Path] = [c for c in config if Path(c).is_file() or c != "configs/demo.yaml"]
    from swe_rl.train.cli import one_line_errors

    with one_line_errors():
        run_demo(load_config(DemoConfig, files=files, overrides=override))


def compare_command(
    config: list[str] = typer.Option(
        ["configs/demo.yaml"], "--config", "-c", help="demo config (SFT init, RL)"
    ),
    methods: list[str] = typer.Option(
        ["grpo", "grpo_aem", "grpo_empg"],
        "--method",
        "-m",
        help="recipe names in configs/train/ (their `algo` block is used)",
    ),
    seeds: list[int] = typer.Option([0, 1, 2], "--seed", "-s", help="RL seeds"),
    override: list[str] = OVERRIDES,
    out: str = typer.Option("runs/compare", "--out", help="folder for the runs and the plots"),
    plot_only: bool = typer.Option(False, "--plot-only", help="only redraw plots from existing runs"),
    jobs: int = typer.Option(
        1, "--jobs", "-j", min=1, help="worker processes for the (method, seed) runs (spawned; resumable)"
    ),
    baseline: str = typer.Option(
        "", "--baseline", help="method the paired differences are taken against (default: the first method)"
    ),
    last_k: int = typer.Option(
        3, "--last-k", min=1, help="primary metric: mean sampled success over the last K held-out evaluations"
    ),
) -> None:
    """GRPO vs GRPO+AEM vs GRPO+EMPG over seeds from one SFT start; PNG plots of held-out success, entropy
    and mixed-group fraction per step; summary.json / summary.md with the primary metric's paired differences
    against the baseline and their two-level (seeds, tasks) bootstrap intervals."""
    from swe_rl.experiments.compare import run_compare
    from swe_rl.train.cli import one_line_errors

    with one_line_errors():
        run_compare(config, methods, seeds, override, out, plot_only, jobs=jobs, baseline=baseline or None,
                    last_k=last_k)  # fmt: skip


def register(app: Any) -> None:
    """Add `demo` and `compare` to the swe-rl app."""
    app.command("demo")(demo_command)
    app.command("compare")(compare_command)
