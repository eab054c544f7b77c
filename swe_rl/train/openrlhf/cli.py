"""CLI commands of the OpenRLHF backend (registered in swe_rl/cli.py): `train-openrlhf` and `openrlhf-data`.

`swe-rl train --backend openrlhf ...` (the built-in trainer's command) forwards to `run_from_files` below.
"""

from __future__ import annotations

from pathlib import Path

import typer


def run_from_files(
    config: list[Path],
    overrides: list[str],
    dry_run: bool,
    runs_dir: str = "runs",
    preflight: bool = False,
    disk_gb: float = 200.0,
) -> int:
    """Load the recipe YAMLs + dotted overrides and launch (or print, with dry_run; or check, with preflight)."""
    from swe_rl.config import load_config
    from swe_rl.policy.model_dir import ModelPathError, check_model_dir
    from swe_rl.train.openrlhf.config import OpenRLHFTrainConfig
    from swe_rl.train.openrlhf.launch import run_openrlhf

    if not (dry_run or preflight):  # this host's sandboxes of dead runs (other nodes: cleanup_sandboxes.sh)
        from sandboxes.lifecycle import reap_at_start

        reap_at_start("train-openrlhf")
    cfg = load_config(OpenRLHFTrainConfig, files=list(config), overrides=list(overrides))
    try:
        check_model_dir(cfg.model.path, "model.path")  # a hub id passes; a local folder must be usable
    except ModelPathError as e:
        typer.echo(f"error: {e}", err=True)
        return 2
    if preflight:
        from swe_rl.train.openrlhf.preflight import run_preflight

        return run_preflight(cfg, disk_gb=disk_gb, echo=typer.echo)
    return run_openrlhf(cfg, dry_run, runs_dir=runs_dir, echo=typer.echo)


def train_openrlhf_command(
    config: list[Path] = typer.Option(
        ..., "--config", "-c", help="recipe YAML(s), e.g. configs/train/*.yaml"
    ),
    overrides: list[str] = typer.Option(
        [], "--override", "-o", "--set", "-s", help="dotted KEY=VALUE override, e.g. rollout.max_len=16384"
    ),
    dry_run: bool = typer.Option(
        False,
        "--dry-run",
        help="print the OpenRLHF command and config, start no training; with a cluster to join "
        "(cluster.ray_address / RAY_ADDRESS), also each sandbox node that lacks an image",
    ),
    runs_dir: str = typer.Option("runs", help="where runs/<name>/ goes"),
    preflight: bool = typer.Option(
        False,
        "--preflight",
        help="check actors, logger, images, Docker on every node, disk, versions; exit 1 on any problem",
    ),
    disk_gb: float = typer.Option(200.0, help="--preflight: free GiB needed at ckpt.path on every node"),
    ray_address: str | None = typer.Option(
        None,
        "--ray-address",
        help="join this Ray cluster (= -o cluster.ray_address=...); none: a private local Ray",
    ),
) -> None:
    """Train with OpenRLHF 0.11.2 (Ray + vLLM + DeepSpeed) on a GPU cluster, with our agent, sandboxes and AEM."""
    from swe_rl.config import ConfigError
    from swe_rl.train.openrlhf.loggers import MissingKeyError

    if ray_address:
        overrides = [*overrides, f"cluster.ray_address={ray_address}"]
    try:
        code = run_from_files(config, overrides, dry_run, runs_dir, preflight, disk_gb)
    except (ConfigError, FileNotFoundError, MissingKeyError, ImportError) as e:
        typer.echo(f"error: {e}", err=True)
        raise typer.Exit(2) from e
    raise typer.Exit(code)


def data_command(
    source: str = typer.Argument(
        ..., help="task source: JSON/JSONL/parquet file, task repo dir or HF dataset"
    ),
    out: Path = typer.Option(..., "--out", "-o", help="JSONL for data.prompt_dataset"),
    split: str = typer.Option("test", help="split for HF datasets / task repos"),
    validate: bool = typer.Option(
        True,
        help="validate each task whose image is here (gold graded once per "
        "image, cached): the label then carries what its rewards leave out",
    ),
) -> None:
    """Write tasks as OpenRLHF prompt rows (prompt = instance id, label = the Task JSON)."""
    from swe_rl.tasks.loaders import load_tasks
    from swe_rl.train.openrlhf.data import write_prompt_dataset

    tasks = load_tasks(source, split=split)
    if validate:  # tasks whose image is not on this machine go unvalidated (graded on every test)
        from swe_rl.grading import docker_factory, validate_tasks_sync

        tasks = validate_tasks_sync(tasks, docker_factory(run_id="openrlhf-data"))
    n = write_prompt_dataset(tasks, out)
    if not validate:
        typer.echo(f"wrote {n} rows to {out} (not validated)")
        return
    from swe_rl.grading import validation_of

    have = sum(validation_of(t) is not None for t in tasks)
    typer.echo(
        f"wrote {n} rows to {out}; {have} validated"
        + ("" if have == n else f", {n - have} graded on every test (no image here, or no gold patch)")
    )
