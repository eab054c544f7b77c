"""`sandboxes` command line (standalone: no swe_rl, torch or ray imports).

build-base / build make images without a registry; run executes one command in a fresh hardened sandbox;
ls lists our containers; reap removes those whose owner is gone or whose TTL passed; bench measures.
"""

from __future__ import annotations

import asyncio
import time
from typing import Annotated

import typer

app = typer.Typer(
    name="sandboxes",
    help="Hardened Docker sandboxes for coding agents: build images without a registry, run, list, reap.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)

DEFAULT_IMAGE = "swe-rl/base:bookworm"


@app.callback()
def main() -> None:
    """sandboxes: a standalone sandbox runner."""


def _client():
    from sandboxes.base import EngineUnreachableError
    from sandboxes.docker_sandbox import docker_client

    try:
        return docker_client()
    except EngineUnreachableError as e:
        typer.echo(f"error: {e}", err=True)
        raise typer.Exit(2) from None


@app.command("build-base")
def build_base(
    tag: Annotated[str, typer.Option(help="image tag to create")] = DEFAULT_IMAGE,
    suite: Annotated[str, typer.Option(help="Debian suite for debootstrap")] = "bookworm",
    mirror: Annotated[str, typer.Option(help="Debian mirror URL")] = "http://deb.debian.org/debian",
    force: Annotated[bool, typer.Option(help="rebuild even when the tag exists")] = False,
    disk_floor_gb: Annotated[float, typer.Option(help="warn when free disk is below this")] = 10.0,
) -> None:
    """Build the base image with debootstrap + docker import (no registry). Idempotent."""
    from sandboxes.images import build_base_image

    t0 = time.monotonic()
    try:
        built = build_base_image(
            _client(), tag, suite=suite, mirror=mirror, force=force, disk_floor_gb=disk_floor_gb
        )
    except (RuntimeError, OSError) as e:
        typer.echo(f"error: {e}", err=True)
        raise typer.Exit(1) from None
    typer.echo(f"built {tag} in {time.monotonic() - t0:.0f}s" if built else f"base image {tag} present")


@app.command()
def build(
    context: Annotated[str, typer.Argument(help="a directory with a Dockerfile, or a Dockerfile path")],
    tag: Annotated[str, typer.Option(help="image tag to create")],
    network: Annotated[
        str, typer.Option(help="build network (none: no downloads during the build)")
    ] = "none",
    disk_floor_gb: Annotated[float, typer.Option(help="warn when free disk is below this")] = 10.0,
) -> None:
    """Build a derived image from a Dockerfile, with no network by default."""
    import os

    from sandboxes.images import build_image

    if os.path.isdir(context):  # a context directory with its Dockerfile
        kwargs = {"context_dir": context}
    elif os.path.isfile(context):  # a Dockerfile: its directory is the context (like `docker build -f`)
        kwargs = {
            "context_dir": os.path.dirname(os.path.abspath(context)),
            "dockerfile_name": os.path.basename(context),
        }
    else:
        typer.echo(f"error: {context}: no such Dockerfile or directory", err=True)
        raise typer.Exit(1)
    try:
        build_image(_client(), tag, network=network, disk_floor_gb=disk_floor_gb, **kwargs)
    except (RuntimeError, OSError, ValueError) as e:
        typer.echo(f"error: {e}", err=True)
        raise typer.Exit(1) from None
    typer.echo(f"built {tag}")


@app.command(context_settings={"allow_extra_args": True, "ignore_unknown_options": True})
def run(
    ctx: typer.Context,
    image: Annotated[str, typer.Argument(help="image to run; the command follows after --")],
    timeout: Annotated[float, typer.Option(help="command timeout, seconds")] = 300.0,
    network: Annotated[str, typer.Option(help="network mode (none = loopback only)")] = "none",
    memory: Annotated[str, typer.Option(help="memory limit")] = "2g",
    cpus: Annotated[float, typer.Option(help="CPU quota in cores")] = 1.0,
    pids: Annotated[int, typer.Option(help="max processes")] = 512,
    workdir: Annotated[str | None, typer.Option(help="working directory")] = None,
    output_limit: Annotated[int, typer.Option(help="bytes of output kept (head + tail)")] = 100_000,
    env: Annotated[
        list[str] | None, typer.Option("--env", "-e", help="KEY=VALUE for the command (repeatable)")
    ] = None,
) -> None:
    """Run one command in a fresh sandbox: `sandboxes run IMAGE -- CMD ...`. Exits with the command's code."""
    import shlex

    from sandboxes.base import SandboxError
    from sandboxes.config import DockerSandboxConfig, Limits, make_sandbox

    if not ctx.args:
        typer.echo("error: no command given; usage: sandboxes run IMAGE -- CMD ...", err=True)
        raise typer.Exit(2)
    cmd = ctx.args[0] if len(ctx.args) == 1 else shlex.join(ctx.args)
    pairs = [item.partition("=") for item in env or []]
    if any(not sep or not key for key, sep, _ in pairs):
        typer.echo("error: --env expects KEY=VALUE", err=True)
        raise typer.Exit(2)
    cfg = DockerSandboxConfig(
        env={key: value for key, _, value in pairs},
        image=image,
        workdir=workdir,
        output_limit=output_limit,
        ttl=timeout + 600,
        limits=Limits(network=network, memory=memory, cpus=cpus, pids=pids),
    )

    async def go():
        async with make_sandbox(cfg, run_id="cli") as sb:
            return await sb.exec(cmd, timeout=timeout)

    try:
        result = asyncio.run(go())
    except SandboxError as e:
        typer.echo(f"error: {e}", err=True)
        raise typer.Exit(125) from None
    typer.echo(result.output, nl=False)
    if result.timed_out:
        typer.echo(f"[timed out after {timeout:g}s]", err=True)
    raise typer.Exit(result.exit_code if result.exit_code >= 0 else 124)


@app.command("ls")
def ls(run_id: Annotated[str | None, typer.Option(help="only this run's sandboxes")] = None) -> None:
    """List containers created by sandboxes (any owner), with owner liveness and time to expiry."""
    from sandboxes.lifecycle import LABEL_PID, LABEL_RUN, list_managed, owner_alive

    rows = list_managed(_client(), run_id=run_id)
    typer.echo(f"{'NAME':<34} {'STATUS':<9} {'RUN':<20} {'OWNER':<8} {'ALIVE':<6} EXPIRES_IN")
    now = time.time()
    for c in rows:
        alive = {True: "yes", False: "no", None: "?"}[owner_alive(c.labels)]
        left = f"{(c.expires_at - now) / 60:.0f}m" if c.expires_at != float("inf") else "-"
        typer.echo(
            f"{c.name:<34} {c.status:<9} {c.labels.get(LABEL_RUN, ''):<20} "
            f"{c.labels.get(LABEL_PID, ''):<8} {alive:<6} {left}"
        )
    typer.echo(f"{len(rows)} sandbox container(s)")


@app.command()
def reap(
    run_id: Annotated[str | None, typer.Option(help="only this run's sandboxes")] = None,
    dry_run: Annotated[bool, typer.Option(help="only show what would be removed")] = False,
) -> None:
    """Remove sandbox containers whose owner process is gone or whose TTL passed."""
    from sandboxes.lifecycle import reap as do_reap

    doomed = do_reap(_client(), run_id=run_id, dry_run=dry_run)
    for c, reason in doomed:
        typer.echo(f"{'would remove' if dry_run else 'removed'} {c.name} ({reason})")
    typer.echo(f"{len(doomed)} container(s) {'to reap' if dry_run else 'reaped'}")


@app.command()
def bench(
    image: Annotated[str, typer.Option(help="cached image to benchmark with")] = DEFAULT_IMAGE,
    concurrent: Annotated[int, typer.Option(help="sandboxes run at once")] = 32,
) -> None:
    """Start latency, round trip vs exec_run/CLI, N concurrent sandboxes (ratios measured in one run)."""
    from sandboxes.bench import main as bench_main

    result = bench_main(image, concurrent)
    raise typer.Exit(1 if result.failures else 0)


if __name__ == "__main__":
    app()
