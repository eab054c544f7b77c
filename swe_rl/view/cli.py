"""`swe-rl view RUN_DIR` (registered in swe_rl/cli.py): build the run's static site into RUN_DIR/view/ and say how
to open it; `--serve` serves the run folder on 127.0.0.1 (the pages' raw-file links then work too)."""

from __future__ import annotations

import sys
from pathlib import Path

import typer


def view_command(
    run_dir: Path = typer.Argument(
        ..., help="a run folder: swe-rl eval's or train's runs/<name>, or a swe-rl grade --out"
    ),
    out: Path = typer.Option(
        None, "--out", help="write the site here instead of RUN_DIR/view (a read-only run)"
    ),
    serve: bool = typer.Option(False, "--serve", help="then serve it on http://127.0.0.1:PORT until Ctrl-C"),
    port: int = typer.Option(8765, "--port", help="port for --serve (0: any free one)"),
    tasks: str = typer.Option(
        None, "--tasks", help="task source for problem statements a run keeps none of (a swe-rl grade output)"
    ),
    split: str = typer.Option("test", "--split", help="split of --tasks"),
) -> None:
    """Write a static HTML viewer of a run (index with filters, one page per episode); opens from disk, no network."""
    from swe_rl.view.build import build_site
    from swe_rl.view.load import NotARun

    problems = None
    if tasks:
        from swe_rl.images.cli import load_or_exit

        problems = {t.instance_id: t.problem_statement for t in load_or_exit(tasks, split, None)}
    try:
        res = build_site(run_dir, out, problems=problems)
    except NotARun as e:
        typer.echo(f"error: {e}", err=True)
        raise typer.Exit(2) from None
    except OSError as e:  # e.g. a run folder we may read but not write (someone else's results)
        typer.echo(f"error: {e.filename}: {e.strerror} (the site goes to RUN_DIR/view; --out DIR writes it "
                   "elsewhere)", err=True)  # fmt: skip
        raise typer.Exit(1) from None
    for w in res.warnings:
        typer.echo(f"warning: {w}", err=True)
    c = res.report["counts"]
    typer.echo(
        f"{res.episodes} episodes ({res.rendered} pages written, the rest up to date) in {res.seconds:.1f}s: "
        f"resolved {c['resolved']}, unresolved {c['unresolved']}, empty {c['empty_patch']}, infra {c['infra_failure']}"
    )
    index = (res.view / "index.html").resolve()
    typer.echo(f"open file://{index}")
    if serve:
        from swe_rl.view.serve import serve_forever

        serve_forever(run_dir if out is None else res.view, index, port, out=sys.stdout)
