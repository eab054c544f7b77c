"""Warm pool bench (sandboxes/pool.py); every number next to its baseline from the same run.

1. ask-to-ready: time from `start()` to a sandbox whose shell answers, from a warm pool vs a cold start
   (goal <= 50 ms p50 warm), and the same including a first command;
2. reuse: the time to give a used sandbox back restored and verified, against a cold start;
3. a sandbox-bound evaluation (scripted gold policy over micro-suite instances: no model time, every second is
   sandboxes and tests) through the real harness: episodes/min without the pool and with it.

Usage: .venv/bin/python bench/sandbox_pool.py [N_ASKS] [N_INSTANCES] [CONCURRENCY]
"""

from __future__ import annotations

import asyncio
import statistics
import sys
import tempfile
import time

from sandboxes.config import DockerSandboxConfig, make_sandbox
from sandboxes.pool import WarmPool


async def ready_latency(n: int) -> dict[str, float]:
    cfg = DockerSandboxConfig(ttl=600, warm_pool={"size": 2})
    cold, cold_cmd, warm, warm_cmd = [], [], [], []
    for _ in range(n):
        t0 = time.perf_counter()
        async with make_sandbox(cfg, run_id="bench-pool") as sb:
            cold.append(time.perf_counter() - t0)
            await sb.exec("true")
            cold_cmd.append(time.perf_counter() - t0)
    pool = WarmPool(cfg, run_id="bench-pool")
    try:
        for _ in range(n):
            await pool.warm([cfg.image])  # refilled between asks, as it is between episodes
            t0 = time.perf_counter()
            async with pool.sandbox() as sb:
                warm.append(time.perf_counter() - t0)
                await sb.exec("true")
                warm_cmd.append(time.perf_counter() - t0)
    finally:
        await pool.close()
    p50 = statistics.median
    return {"cold": p50(cold), "cold_cmd": p50(cold_cmd), "warm": p50(warm), "warm_cmd": p50(warm_cmd)}


# a small episode's footprint: a repo with a commit, files outside it, an exported variable, a background process
_EPISODE = (
    "mkdir -p /work/r && cd /work/r && git init -q && echo a > f && git add f && git commit -qm a && echo b > f"
    " && pip_cache=/root/.cache && mkdir -p $pip_cache && echo x > $pip_cache/y && export E=1"
    " && (setsid sleep 600 >/dev/null 2>&1 &)"
)


async def restore_cost(n: int) -> tuple[float, int]:
    """p50 seconds of restoring a used sandbox (kill, put back, verify, new shell), and how many of the n
    restores verified (the pool closes the others instead of reusing them)."""
    from sandboxes.restore import restore

    cfg = DockerSandboxConfig(ttl=600, warm_pool={"size": 1, "reuse": True, "refill": "expected"})
    pool = WarmPool(cfg, run_id="bench-pool")
    out, ok = [], 0
    try:
        for _ in range(n):
            async with pool.sandbox() as sb:
                await sb.exec(_EPISODE)
                t0 = time.perf_counter()
                ok += await restore(sb.inner)
                out.append(time.perf_counter() - t0)
    finally:
        await pool.close()
    return statistics.median(out), ok


def eval_rate(n_instances: int, concurrency: int, warm: int | None, reuse: bool | None) -> tuple[float, int]:
    from swe_rl.config import load_config
    from swe_rl.evaluation.config import EvalConfig
    from swe_rl.evaluation.harness import ensure_images, load_eval_tasks, run_eval

    with tempfile.TemporaryDirectory() as out:
        overrides = [f"output_dir={out}", "name=bench-pool", f"dataset.limit={n_instances}", "agent.max_steps=10",
                     "pool.backend=local", "pool.num_actors=1", f"pool.episodes_per_actor={concurrency}",
                     "pool.progress=false"]  # fmt: skip
        if warm is not None:
            overrides.append(f"pool.warm_sandboxes={warm}")
        if reuse is not None:
            overrides.append(f"pool.reuse_sandboxes={str(reuse).lower()}")
        cfg = load_config(EvalConfig, overrides=overrides)
        ensure_images(load_eval_tasks(cfg.dataset))  # image builds are not part of the rate
        t0 = time.perf_counter()
        report = run_eval(cfg)
        wall = time.perf_counter() - t0
    return report["episodes"] / wall * 60, report["counts"]["resolved"]


def main(n_asks: int = 10, n_instances: int = 8, concurrency: int = 4) -> dict[str, float]:
    lat = asyncio.run(ready_latency(n_asks))
    print(
        f"ask-to-ready p50: warm pool {lat['warm'] * 1e3:.2f} ms (goal <= 50 ms) | cold start {lat['cold']:.3f} s"
        f" | ratio warm/cold {lat['warm'] / lat['cold']:.4f}"
    )
    print(
        f"ask-to-first-command p50: warm pool {lat['warm_cmd'] * 1e3:.1f} ms | cold {lat['cold_cmd']:.3f} s"
        f" | ratio {lat['warm_cmd'] / lat['cold_cmd']:.3f}"
    )
    restore_s, reused = asyncio.run(restore_cost(max(3, n_asks // 2)))
    print(
        f"reuse: restore+verify p50 {restore_s:.3f} s vs cold start {lat['cold']:.3f} s"
        f" (ratio {restore_s / lat['cold']:.2f}); {reused} of {max(3, n_asks // 2)} verified"
    )
    eval_rate(1, 1, None, None)  # untimed warm-up: first imports (agent, swebench) and page cache
    rates: dict[bool, list[float]] = {False: [], True: []}
    resolved = []
    for _ in range(2):  # alternated, so a change of the machine's load hits both arms alike
        for pool_on in (False, True):
            rate, ok = eval_rate(n_instances, concurrency, concurrency if pool_on else None, None)
            rates[pool_on].append(rate)
            resolved.append(ok)
    base, pooled = statistics.mean(rates[False]), statistics.mean(rates[True])
    print(
        f"sandbox-bound eval ({n_instances} gold episodes, {concurrency} at once, 2 runs each): {base:.1f}"
        f" episodes/min without the pool | {pooled:.1f} with it (ratio {pooled / base:.2f}); resolved"
        f" {'/'.join(map(str, resolved))} of {n_instances}"
    )
    return lat | {"restore": restore_s, "eval_cold": base, "eval_pool": pooled}


if __name__ == "__main__":
    args = [int(a) for a in sys.argv[1:4]]
    main(*args)
