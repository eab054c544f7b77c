"""`swe-rl grade` (registered in swe_rl/cli.py): grade a predictions file, building missing task-repo images first.

Heavy imports (swebench, docker, sandboxes) happen inside the command so `swe-rl --help` stays fast.
"""

from __future__ import annotations

from pathlib import Path

import typer

from swe_rl.images.cli import TASKS_HELP, load_or_exit


def grade_command(
    tasks: str = typer.Option("micro", "--tasks", help=TASKS_HELP),
    predictions: str = typer.Option(..., "--predictions", help="predictions .json/.jsonl, or 'gold'"),
    out: Path = typer.Option(..., "--out", help="output directory (reruns skip finished instances)"),
    workers: int = typer.Option(2, help="instances graded in parallel"),
    split: str = typer.Option("test"),
    timeout: float = typer.Option(1800.0, help="seconds for one instance's eval script"),
    ids: list[str] = typer.Option(None, "--id", help="only these instance ids (repeatable)"),
) -> None:
    """Grade predictions in fresh Docker sandboxes with swebench's parsers and report functions. Missing task-repo
    images (the bundled micro suite included) are built first; any other missing image is named with its fix."""
    import asyncio

    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    from sandboxes.lifecycle import reap_at_start
    from swe_rl.grading.grade_run import load_predictions
    from swe_rl.grading.grader import docker_factory

    reap_at_start("grade")  # this host's sandboxes of dead runs go first
    task_list = load_or_exit(tasks, split, ids)
    try:
        preds = load_predictions(predictions, task_list)
    except ValueError as e:
        typer.echo(f"error: {e}", err=True)
        raise typer.Exit(2) from None
    if ids:
        preds = {k: v for k, v in preds.items() if k in set(ids)}
    _engine_or_exit()  # every grading needs it: one error now, not an infrastructure failure per instance
    done = _prepare(task_list, preds, out, tasks)
    cols = (
        TextColumn("grading"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        TextColumn("{task.fields[last]}"),
    )
    with Progress(*cols) as bar:
        job = bar.add_task("grade", total=len(preds), completed=done, last="")

        def on_done(iid, result):
            status = (
                "empty"
                if result is None
                else (result.failure or ("resolved" if result.resolved else "unresolved"))
            ) + (" (suspicious)" if result is not None and result.suspicious else "")
            bar.update(job, advance=1, last=f"{iid}: {status}")

        from swe_rl.grading.grade_run import grade_predictions

        summary = asyncio.run(
            grade_predictions(
                task_list, preds, docker_factory(), out, workers=workers, timeout=timeout, on_done=on_done
            )
        )
    typer.echo(
        f"resolved {summary['resolved_instances']}/{summary['total_instances']}  "
        f"unresolved {summary['unresolved_instances']}  empty {summary['empty_patch_instances']}  "
        f"errors {summary['error_instances']} (infra {summary['infra_failure_instances']})  "
        f"suspicious {summary['suspicious_instances']}  -> {out / 'summary.json'}"
    )
    for iid, line in summary["validation"].items():  # what each verdict measured where validation changed it
        typer.echo(f"{iid}: {line}")
    for iid, label in summary[
        "patch_caused"
    ].items():  # unresolved by what the patch caused (not infrastructure)
        typer.echo(f"{iid}: unresolved, the patch caused {label} (gold's grading here was clean)")
    cost = summary["grading_cost"]
    if cost["gradings"]:  # where the time went (swe_rl.grading.cost), mean seconds per grading
        phases = "  ".join(f"{k} {v:.1f}" for k, v in cost["mean_s"].items() if k != "total" and v)
        typer.echo(f"cost: {cost['gradings']} gradings, {cost['mean_s']['total']:.1f} s each: {phases}")


def _engine_or_exit() -> None:
    """This host's Docker engine answers, or one error naming it (exit 1)."""
    from sandboxes.base import EngineUnreachableError
    from sandboxes.engine import docker_client

    try:
        docker_client().close()
    except EngineUnreachableError as e:
        typer.echo(
            f"error: {e} (gradings run in Docker sandboxes on this host: start the engine first)", err=True
        )
        raise typer.Exit(1) from None


def _prepare(task_list: list, preds: dict, out: Path, source: str) -> int:
    """Build or name the images of the instances still to grade; returns how many are graded already (reruns
    skip them)."""
    from swe_rl.images.task_images import prepare_images

    graded = {t.instance_id for t in task_list if (out / t.instance_id / "report.json").is_file()}
    prepare_images([t for t in task_list if t.instance_id in preds and t.instance_id not in graded], source)
    return len(graded & set(preds))


def validate_command(
    tasks: str = typer.Option("micro", "--tasks", help=TASKS_HELP),
    split: str = typer.Option("test"),
    ids: list[str] = typer.Option(None, "--id", help="only these instance ids (repeatable)"),
    out: Path = typer.Option(None, "-o", "--out", help="write the validated task rows here (JSONL)"),
    workers: int = typer.Option(2, help="gold gradings in parallel"),
) -> None:
    """Validate each task on its image (swe_rl.grading.validate: the gold patch graded as any patch, once per image,
    cached): one line per task saying what its verdicts will measure; `-o` writes the rows with the record in
    metadata.validation. Tasks whose image is missing are named and left unvalidated."""
    from swe_rl.grading.grader import docker_factory, validation_shown
    from swe_rl.grading.validate import validate_tasks_sync

    task_list = load_or_exit(tasks, split, ids)
    _engine_or_exit()
    checked = validate_tasks_sync(task_list, docker_factory(run_id="validate"), workers=workers)
    for t in checked:
        shown = validation_shown(t)
        line = shown["summary"] if shown else "not validated (image missing, no gold patch, or infra failure)"
        typer.echo(f"{t.instance_id}\t{shown['status'] if shown else 'none'}\t{line}")
    if out is not None:
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text("".join(t.model_dump_json() + "\n" for t in checked))
        typer.echo(f"task rows: {out}")
