"""`sandboxes` command line (standalone: no swe_rl, torch or ray imports)."""

from __future__ import annotations

import typer

app = typer.Typer(
    name="sandboxes",
    help="Hardened Docker sandboxes for coding agents: build images without a registry, run, list, reap.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)


@app.callback()
def main() -> None:
    """sandboxes: a standalone sandbox runner."""


if __name__ == "__main__":
    app()
