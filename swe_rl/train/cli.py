"""Typer commands of the built-in trainer: `swe-rl train`, `swe-rl sft`, `swe-rl demo`, `swe-rl compare`.

Each takes YAML config files (merged in order) and dotted overrides (`-o optim.lr=1e-4`); heavy imports happen
inside the commands so `swe-rl --help` stays fast.
"""

from __future__ import annotations

from pathlib import Path

import typer

CONFIGS = typer.Option([], "--config", "-c", help="YAML config file(s), merged in order")
OVERRIDES = typer.Option([], "--override", "-o", help="dotted KEY=VALUE override, e.g. optim.lr=1e-4")


def train_command(
    config: list[str] = CONFIGS,
    override: list[str] = OVERRIDES,
    resume: bool = typer.Option(False, "--resume", help="continue from the run's newest checkpoint, exactly"),
    backend: str = typer.Option(
        "builtin",
        "--backend",
        help="builtin (single process, CPU or one GPU) or openrlhf (Ray + vLLM + DeepSpeed)",
    ),
    dry_run: bool = typer.Option(
        False, "--dry-run", help="openrlhf: print the command line and config, start nothing"
    ),
) -> None:
    """RL training: the built-in trainer (GRPO / RLOO + AEM / EMPG / EPO) or, with --backend openrlhf, a cluster run."""
    if backend == "openrlhf":
        from swe_rl.train.openrlhf.cli import run_from_files

        raise typer.Exit(run_from_files([Path(c) for c in config], list(override), dry_run))
    if backend != "builtin":
        raise typer.BadParameter(f"expected 'builtin' or 'openrlhf', got {backend!r}", param_hint="--backend")
    if dry_run:
        raise typer.BadParameter("--dry-run applies to --backend openrlhf only", param_hint="--dry-run")
    import swe_rl.experiments  # noqa: F401  (the CLI registers the experiment data sources: toy, decisions)
    from swe_rl.config import ConfigError
    from swe_rl.policy.model_dir import ModelPathError
    from swe_rl.train.run import train_command as run

    try:
        run(list[str | Path](config), override, resume)
    except (ConfigError, ModelPathError) as e:  # bad input: one message naming the field, no traceback
        typer.echo(f"error: {e}", err=True)
        raise typer.Exit(2) from None


def sft_command(config: list[str] = CONFIGS, override: list[str] = OVERRIDES) -> None:
    """Supervised warm start on expert trajectories of generated micro tasks (loss on policy tokens only)."""
    from swe_rl.config import load_config
    from swe_rl.train.sft import SFTConfig, run_sft

    files: list[str | Path] = list(config)
    run_sft(load_config(SFTConfig, files=files, overrides=override))


def demo_command(
    config: list[str] = typer.Option(["configs/demo.yaml"], "--config", "-c", help="YAML config file(s)"),
    override: list[str] = OVERRIDES,
) -> None:
    """SFT warm start (or the shipped checkpoint) -> short GRPO+AEM run -> held-out + micro-suite eval -> report."""
    from swe_rl.config import load_config
    from swe_rl.experiments.demo import DemoConfig, run_demo

    files: list[str | Path] = [c for c in config if Path(c).is_file() or c != "configs/demo.yaml"]
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

    run_compare(config, methods, seeds, override, out, plot_only, jobs=jobs, baseline=baseline or None,
                last_k=last_k)  # fmt: skip
