"""`swe-rl tasks list|generate|show|build-images` and `swe-rl images build` (registered in swe_rl/cli.py): the
tasks of a source and their images. `swe-rl grade` is swe_rl/grading/cli.py.

Heavy imports (swebench, docker, sandboxes) happen inside the commands so `swe-rl --help` stays fast.
"""

from __future__ import annotations

import json
from pathlib import Path

import typer

tasks_app = typer.Typer(help="SWE-bench 5.x tasks: list, show, build images.", no_args_is_help=True)

TASKS_HELP = "'micro' (bundled suite), a task repo dir, a .json/.jsonl/.parquet file, or an HF dataset name"


def load_or_exit(src: str, split: str, ids: list[str] | None = None):
    """The tasks of a source; a source that does not load ends the command (exit 2) with its reason."""
    from swe_rl.tasks.loaders import TaskLoadError, load_tasks

    try:
        return load_tasks(src, split=split, instance_ids=ids or None)
    except TaskLoadError as e:
        typer.echo(f"error: {e}", err=True)
        raise typer.Exit(2) from None


@tasks_app.command("list")
def list_tasks(
    tasks: str = typer.Option("micro", "--tasks", help=TASKS_HELP),
    split: str = typer.Option("test", help="dataset split (HF datasets, task repos)"),
    images: bool = typer.Option(
        False, "--images", help="only the distinct images, one per line (IMAGES_FILE)"
    ),
) -> None:
    """One line per task: id, repo, #FAIL_TO_PASS, #PASS_TO_PASS, image (and whether it exists locally)."""
    from swe_rl.images.task_images import image_exists

    if images:  # the list scripts/cluster/prepull_images.sh and env_check.sh read
        typer.echo("\n".join(sorted({t.image for t in load_or_exit(tasks, split) if t.image})))
        return
    for t in load_or_exit(tasks, split):
        mark = "present" if image_exists(t.image) else "missing"
        typer.echo(
            f"{t.instance_id}\t{t.repo}\tF2P={len(t.FAIL_TO_PASS)}\tP2P={len(t.PASS_TO_PASS)}\t{t.image} ({mark})"
        )


@tasks_app.command("generate")
def generate_command(
    n: int = typer.Option(..., "-n", min=1, help="number of tasks"),
    out: Path = typer.Option(
        ..., "-o", "--out", help="JSONL file to write (one SWE-bench-style Task per line)"
    ),
    split: str = typer.Option("held_out", help="'train' or 'held_out' (disjoint bug families)"),
    seed: int = typer.Option(0, help="generator seed (the same seed gives the same tasks)"),
) -> None:
    """Generated micro tasks (swe_rl.tasks.generator) as JSONL, for `swe-rl eval --dataset FILE`."""
    from swe_rl.tasks.generator import generate_tasks

    try:
        tasks = generate_tasks(n, split=split, seed=seed)
    except ValueError as e:
        typer.echo(f"error: {e}", err=True)
        raise typer.Exit(2) from None
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text("".join(t.model_dump_json() + "\n" for t in tasks))
    typer.echo(f"wrote {len(tasks)} {split} tasks to {out}")


@tasks_app.command("show")
def show_task(
    instance_id: str = typer.Argument(..., help="the task's instance_id"),
    tasks: str = typer.Option("micro", "--tasks", help=TASKS_HELP),
    split: str = typer.Option("test"),
    as_json: bool = typer.Option(False, "--json", help="print the whole Task as JSON"),
) -> None:
    """Print one task: fields, problem statement, tests, gold patch."""
    (t,) = load_or_exit(tasks, split, [instance_id])
    if as_json:
        typer.echo(t.model_dump_json(indent=2))
        return
    for key in ("instance_id", "repo", "base_commit", "version", "image", "log_parser", "eval_type"):
        typer.echo(f"{key}: {getattr(t, key)}")
    typer.echo(f"FAIL_TO_PASS: {json.dumps(t.FAIL_TO_PASS)}\nPASS_TO_PASS: {len(t.PASS_TO_PASS)} tests")
    typer.echo(f"\n--- problem statement ---\n{t.problem_statement}\n--- gold patch ---\n{t.patch}")


@tasks_app.command("build-images")
def build_images(
    tasks: str = typer.Option("micro", "--tasks", help=TASKS_HELP),
    split: str = typer.Option("test"),
    force: bool = typer.Option(False, help="rebuild images that already exist"),
    workers: int = typer.Option(2, help="parallel builds"),
    ids: list[str] = typer.Option(None, "--id", help="only these instance ids (repeatable)"),
) -> None:
    """Task repos: build each task's Dockerfile locally (--network none). Other sources: pull missing images
    where their registry answers, else report them missing."""
    from swe_rl.images.task_images import build_task_images, ensure_images
    from swe_rl.tasks.loaders import MICRO_NAMES, MICRO_SUITE

    repo = MICRO_SUITE if tasks in MICRO_NAMES else Path(tasks)
    if repo.is_dir():
        results = build_task_images(repo, ids or None, force=force, workers=workers)
    else:
        results = ensure_images(load_or_exit(tasks, split, ids))
    for r in results:
        typer.echo(f"{r.status:8s} {r.image}  {r.instance_id}" + (f"\n  {r.error}" if r.error else ""))
    if any(r.status == "failed" for r in results):
        raise typer.Exit(1)


images_app = typer.Typer(
    help="Task images built offline (SWE-bench instances from an inputs dir).", no_args_is_help=True
)


@images_app.command("build")
def images_build_command(
    inputs: Path = typer.Option(
        ..., "--inputs", help="rows.jsonl + src/<id>.tar + wheels/ (swe_rl/images/swebench_images.py)"
    ),
    out: Path = typer.Option(None, "-o", "--out", help="task rows to write (default INPUTS/tasks.jsonl)"),
    ids: list[str] = typer.Option([], "--id", help="only these instance ids (repeatable)"),
    force: bool = typer.Option(False, help="rebuild even when an image with the same inputs hash exists"),
) -> None:
    """Build sweb.eval.x86_64.<id> images offline (--network none) and write their task rows (JSONL)."""
    from swe_rl.images.swebench_build import build_inputs
    from swe_rl.images.swebench_images import ImageInputError

    if not inputs.is_dir():
        typer.echo(f"error: --inputs {inputs}: no such folder (expected rows.jsonl, src/<id>.tar and wheels/; "
                   "the layout is in tests/real/README.md)", err=True)  # fmt: skip
        raise typer.Exit(2)
    # the Debian base image each row's Python needs is debootstrapped by the builder when missing; a row whose
    # base cannot be built fails with the `sandboxes build-base` command that makes it
    try:
        results = build_inputs(inputs, out, ids=ids or None, force=force)
    except ImageInputError as e:
        typer.echo(f"error: {e}", err=True)
        raise typer.Exit(2) from None
    for r in results:
        typer.echo(
            f"{r.instance_id}\t{r.status}\t{r.seconds:.0f}s\t{r.image}" + (f"\t{r.error}" if r.error else "")
        )
    typer.echo(f"task rows: {out or inputs / 'tasks.jsonl'}")
    if any(r.status == "failed" for r in results):
        raise typer.Exit(1)


@images_app.command("wheelhouse")
def images_wheelhouse_command(
    inputs: Path = typer.Option(
        ..., "--inputs", help="rows.jsonl + src/<id>.tar + wheels/ (as `images build`)"
    ),
    ids: list[str] = typer.Option([], "--id", help="only these instance ids (repeatable)"),
    check: bool = typer.Option(
        False, "--check", help="verify the cache without network; exit 1 if anything is missing"
    ),
) -> None:
    """Fill the PyPI wheels every instance needs, for its Python, into ~/.cache/swe-rl (SWE_RL_CACHE): run on a
    machine that reaches PyPI, then `images build` needs no network (copy the cache to an air-gapped cluster)."""
    from swe_rl.images.swebench_images import ImageInputError
    from swe_rl.images.swebench_wheelhouse import fill_wheelhouse
    from swe_rl.images.swebench_wheels import cache_dir

    if not inputs.is_dir():
        typer.echo(
            f"error: --inputs {inputs}: no such folder (the layout is in tests/real/README.md)", err=True
        )
        raise typer.Exit(2)
    try:
        results = fill_wheelhouse(inputs, ids or None, check=check)
    except ImageInputError as e:
        typer.echo(f"error: {e}", err=True)
        raise typer.Exit(2) from None
    for r in results:
        typer.echo(f"{r.instance_id}\t{r.status}\t{r.seconds:.0f}s\t{r.wheels_from}\t{r.files} files\t"
                   f"{r.downloaded} downloaded" + (f"\t{r.error}" if r.error else ""))  # fmt: skip
    total = sum(r.downloaded for r in results)
    mib = sum(r.downloaded_bytes for r in results) / 2**20
    typer.echo(f"{'checked' if check else 'filled'} {cache_dir()}: {total} downloaded ({mib:.1f} MiB), "
               f"{sum(r.status == 'failed' for r in results)} of {len(results)} failed")  # fmt: skip
    if any(r.status == "failed" for r in results):
        raise typer.Exit(1)


@images_app.command("plan")
def images_plan_command(
    all_specs: bool = typer.Option(
        False, "--all-specs", help="every (repository, version) of swebench 4.1.0's spec table"
    ),
    wheels: Path = typer.Option(
        ..., "--wheels", help="a folder holding swebench-4.1.0's wheel (the spec table)"
    ),
    out: Path = typer.Option(
        Path("plan.jsonl"), "-o", "--out", help="one JSON line per (repository, version)"
    ),
) -> None:
    """Environment-planning dry run, no image built: each spec's Python and its requirement lock resolved from
    PyPI by the rules (needs PyPI); a markdown table on stdout."""
    from swe_rl.images.swebench_images import ImageInputError, load_spec_table
    from swe_rl.images.swebench_plan import plan_all, table_markdown

    if not all_specs:
        typer.echo("error: say --all-specs (planning per instance is `swe-rl images wheelhouse`)", err=True)
        raise typer.Exit(2)
    try:
        table = load_spec_table(wheels)
    except ImageInputError as e:
        typer.echo(f"error: --wheels {wheels}: {e}", err=True)
        raise typer.Exit(2) from None
    results = plan_all(table.specs, out)
    typer.echo(table_markdown(results))
    counts = {s: sum(r.status == s for r in results) for s in ("plans", "needs the source", "fails")}
    typer.echo(f"{len(results)} specs: " + ", ".join(f"{n} {s}" for s, n in counts.items()) + f" ({out})")
