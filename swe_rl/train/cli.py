"""Typer commands of the built-in trainer: `swe-rl train` and `swe-rl sft` (registered in swe_rl/cli.py).

Each takes YAML config files (merged in order) and dotted overrides (`-o optim.lr=1e-4`); heavy imports happen
inside the commands so `swe-rl --help` stays fast. The experiments built on the trainer (`demo`, `compare`, the
`toy` / `decisions` data sources) live in swe_rl/experiments/cli.py: this package never imports them.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from pathlib import Path

import typer

CONFIGS = typer.Option([], "--config", "-c", help="YAML config file(s), merged in order")
OVERRIDES = typer.Option([], "--override", "-o", help="dotted KEY=VALUE override, e.g. optim.lr=1e-4")


@contextlib.contextmanager
def one_line_errors() -> Iterator[None]:
    """The training commands' (train, sft, demo, compare) way to end: bad input is one `error:` line and exit 2
    (naming the field), an environment that fails every episode one line and exit 1; no traceback."""
    from swe_rl.config import ConfigError
    from swe_rl.policy.model_dir import ModelPathError
    from swe_rl.train.env import SlotsUnavailable
    from swe_rl.train.loop import UnscoredSteps

    try:
        yield
    except (ConfigError, ModelPathError) as e:
        typer.echo(f"error: {e}", err=True)
        raise typer.Exit(2) from None
    except (SlotsUnavailable, UnscoredSteps) as e:
        typer.echo(f"error: {e}", err=True)
        raise typer.Exit(1) from None


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
    ray_address: str | None = typer.Option(
        None,
        "--ray-address",
        help="join this Ray cluster: openrlhf's cluster.ray_address, builtin's RaySandboxes",
    ),
) -> None:
    """RL training: the built-in trainer (GRPO / RLOO + AEM / EMPG / EPO) or, with --backend openrlhf, a cluster run."""
    from sandboxes.lifecycle import reap_at_start

    if (
        ray_address
    ):  # the one Ray of the run (sandboxes/raystart.connect_ray); builtin: only its RaySandboxes use Ray
        key = "cluster.ray_address" if backend == "openrlhf" else "sandbox.ray_address"
        override = [*override, f"{key}={ray_address}"]
        if backend != "openrlhf":
            _builtin_uses_ray(list(config), override)
    if backend == "openrlhf":  # run_from_files reaps this host's dead runs' sandboxes unless a dry run
        from swe_rl.train.openrlhf.cli import run_from_files

        raise typer.Exit(run_from_files([Path(c) for c in config], list(override), dry_run))
    if backend != "builtin":
        raise typer.BadParameter(f"expected 'builtin' or 'openrlhf', got {backend!r}", param_hint="--backend")
    if dry_run:
        raise typer.BadParameter("--dry-run applies to --backend openrlhf only", param_hint="--dry-run")
    reap_at_start("train")  # this host's sandboxes of dead runs go first
    from swe_rl.train.run import train_command as run

    with one_line_errors():
        run(list[str | Path](config), override, resume)


def _builtin_uses_ray(config: list[str], override: list[str]) -> None:
    """--ray-address with the built-in trainer: its sandbox slots must be RaySandboxes, or one error says why not."""
    from swe_rl.config import load_config
    from swe_rl.train.config import TrainConfig

    with one_line_errors():
        backend = load_config(TrainConfig, files=list[str | Path](config), overrides=override).sandbox.get(
            "backend"
        )
    if backend != "ray":
        raise typer.BadParameter(
            f"the built-in trainer starts no Ray with sandbox.backend {backend or 'docker'}: its sandboxes run on this "
            "host; add -o sandbox.backend=ray to run them on the cluster's sandbox nodes",
            param_hint="--ray-address",
        )


def sft_command(config: list[str] = CONFIGS, override: list[str] = OVERRIDES) -> None:
    """Supervised warm start on expert trajectories of generated micro tasks (loss on policy tokens only)."""
    from swe_rl.config import load_config
    from swe_rl.train.sft import SFTConfig, run_sft

    files: list[str | Path] = list(config)
    with one_line_errors():
        run_sft(load_config(SFTConfig, files=files, overrides=override))
