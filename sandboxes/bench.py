"""Sandbox benchmark: every number is printed next to its baseline, measured in the same run.

1. start-to-first-command p50 from a cached image (goal <= 0.5 s);
2. command round trip p50: persistent shell vs the SDK's exec_run vs the `docker exec` CLI (goal <= 1/4 exec_run);
3. N concurrent sandboxes each running a command loop: failures (goal 0) and throughput (commands/s).
"""

from __future__ import annotations

import asyncio
import shutil
import statistics
import subprocess
import time
from dataclasses import dataclass

from sandboxes.config import DockerSandboxConfig, Limits, make_sandbox


@dataclass
class BenchResult:
    start_p50: float  # seconds, create+start+shell+first `true`
    bare_start_p50: (
        float  # seconds, bare engine create+start of the same image (no limits, no shell): the floor
    )
    shell_p50: float  # seconds per `true` over the persistent shell
    exec_run_p50: float  # seconds per `true` via docker SDK exec_run
    cli_p50: float | None  # seconds per `true` via `docker exec` (None without the CLI)
    concurrent: int  # sandboxes run at once
    commands: int  # commands run across them
    failures: int  # commands whose output or exit code was wrong, or sandboxes that failed
    throughput: float  # commands per second across all concurrent sandboxes


def _p50(xs: list[float]) -> float:
    return statistics.median(xs)


async def _start_latency(cfg: DockerSandboxConfig, n: int) -> list[float]:
    out = []
    for _ in range(n):
        t0 = time.perf_counter()
        async with make_sandbox(cfg, run_id="bench") as sb:
            await sb.exec("true")
            out.append(time.perf_counter() - t0)
    return out


def _bare_start(image: str, n: int) -> list[float]:
    from sandboxes.docker_sandbox import docker_client

    api, out = docker_client().api, []
    for _ in range(n):
        t0 = time.perf_counter()
        hc = api.create_host_config(auto_remove=True)
        cid = api.create_container(image, command=["sleep", "60"], host_config=hc)["Id"]
        try:
            api.start(cid)
            out.append(time.perf_counter() - t0)
        finally:
            api.remove_container(cid, force=True)
    return out


async def _round_trips(cfg: DockerSandboxConfig, n: int) -> tuple[list[float], list[float], list[float]]:
    shell, sdk, cli = [], [], []
    async with make_sandbox(cfg, run_id="bench") as sb:
        for _ in range(n):
            t0 = time.perf_counter()
            await sb.exec("true")
            shell.append(time.perf_counter() - t0)
        container = sb._client.containers.get(sb.id)  # type: ignore[attr-defined]
        for _ in range(max(3, n // 4)):
            t0 = time.perf_counter()
            await asyncio.to_thread(container.exec_run, ["true"])
            sdk.append(time.perf_counter() - t0)
        if shutil.which("docker"):
            for _ in range(max(3, n // 8)):
                t0 = time.perf_counter()
                await asyncio.to_thread(subprocess.run, ["docker", "exec", sb.id, "true"], check=True)
                cli.append(time.perf_counter() - t0)
    return shell, sdk, cli


async def _concurrent(cfg: DockerSandboxConfig, n: int, loops: int) -> tuple[int, int, float]:
    boxes = [make_sandbox(cfg, run_id="bench-concurrent") for _ in range(n)]
    failures = 0
    try:
        started = await asyncio.gather(*(b.start() for b in boxes), return_exceptions=True)
        failures += sum(isinstance(s, BaseException) for s in started)
        live = [b for b, s in zip(boxes, started, strict=True) if not isinstance(s, BaseException)]

        async def loop(sb) -> int:
            bad = 0
            for i in range(loops):
                r = await sb.exec(f"echo {i}; cd /tmp")
                bad += r.exit_code != 0 or r.output != f"{i}\n"
            return bad

        t0 = time.perf_counter()
        bads = await asyncio.gather(*(loop(b) for b in live), return_exceptions=True)
        wall = time.perf_counter() - t0
        failures += sum(b if isinstance(b, int) else loops for b in bads)
        return failures, len(live) * loops, len(live) * loops / wall
    finally:
        await asyncio.gather(*(b.close() for b in boxes), return_exceptions=True)


async def run_bench(
    image: str = "swe-rl/base:bookworm",
    *,
    starts: int = 10,
    trips: int = 200,
    concurrent: int = 32,
    loops: int = 20,
) -> BenchResult:
    cfg = DockerSandboxConfig(image=image, ttl=900, limits=Limits(memory="256m", pids=256, cpus=1.0))
    async with make_sandbox(cfg, run_id="bench") as warm:  # load the image and the SDK before timing
        await warm.exec("true")
    start = await _start_latency(cfg, starts)
    bare = await asyncio.to_thread(_bare_start, image, starts)
    shell, sdk, cli = await _round_trips(cfg, trips)
    failures, commands, throughput = await _concurrent(cfg, concurrent, loops)
    return BenchResult(
        _p50(start),
        _p50(bare),
        _p50(shell),
        _p50(sdk),
        _p50(cli) if cli else None,
        concurrent,
        commands,
        failures,
        throughput,
    )


def report(r: BenchResult) -> str:
    cli = f"{r.cli_p50 * 1e3:.1f} ms" if r.cli_p50 is not None else "n/a"
    cli_ratio = f"{r.shell_p50 / r.cli_p50:.3f}" if r.cli_p50 else "n/a"
    return "\n".join(
        [
            f"start-to-first-command p50: {r.start_p50:.3f} s (goal <= 0.5 s) | bare engine create+start p50: "
            f"{r.bare_start_p50:.3f} s | ratio {r.start_p50 / r.bare_start_p50:.2f}",
            f"round trip p50: persistent shell {r.shell_p50 * 1e3:.1f} ms | SDK exec_run {r.exec_run_p50 * 1e3:.1f} ms"
            f" | docker exec CLI {cli}",
            f"ratio shell/exec_run: {r.shell_p50 / r.exec_run_p50:.3f} (goal <= 0.25); shell/CLI: {cli_ratio}",
            f"{r.concurrent} concurrent sandboxes: {r.commands} commands, {r.failures} failures, "
            f"{r.throughput:.1f} commands/s",
        ]
    )


def main(image: str = "swe-rl/base:bookworm", concurrent: int = 32) -> BenchResult:
    result = asyncio.run(run_bench(image, concurrent=concurrent))
    print(report(result))
    return result
