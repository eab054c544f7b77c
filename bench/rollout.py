"""Rollout pool throughput, measured against baselines in the same run (scripted gold policy, real Docker sandboxes).

1. Overhead: RolloutPool with 1 Ray actor × C concurrent episodes vs an in-process asyncio loop with the same C
   over the same episodes (goal: ≤ 5% slower). The pool is warmed up first (Ray start and actor creation are a
   one-off cost per pool, reported apart).
2. Scaling: 2 actors × C vs 1 actor × C (goal ≥ 1.8× on sandbox-bound episodes, given cores to spare).
The in-process baseline runs before and after the pool runs; their mean is the baseline (load drifts on a shared
machine). Two episode kinds: the plain gold replay (CPU-bound on a small machine) and the same with a test
suite that waits --test-wait seconds in the sandbox (sandbox-bound, like real SWE-bench test runs).
Usage: python bench/rollout.py [--tasks 4] [--samples 2] [--concurrency 2] [--test-wait 6]
"""

from __future__ import annotations

import argparse
import time


def timed(pool, items) -> tuple[float, int]:
    """Seconds to stream all items, and how many episodes ended in an error."""
    t0 = time.perf_counter()
    out = list(pool.run_items(items))
    return time.perf_counter() - t0, sum(t.exit_status == "error" for t in out)


def measure(name: str, spec, items: list, c: int) -> None:
    from swe_rl.rollout.config import PoolConfig
    from swe_rl.rollout.local import LocalRolloutPool
    from swe_rl.rollout.pool import RolloutPool, ensure_ray

    local = LocalRolloutPool(spec, max_concurrency=c, progress=False)
    timed(local, items[:1])  # warm-up: tokenizer, docker client, page cache of the image
    t_local_a, errors = timed(local, items)
    cfg = PoolConfig(num_actors=1, episodes_per_actor=c, progress=False)
    t0 = time.perf_counter()
    ensure_ray(cfg)
    times = {}
    for n in (1, 2):
        pool = RolloutPool(cfg.model_copy(update={"num_actors": n}), spec, spec.reap_orphans)
        timed(pool, items[:n])  # warm-up: actor processes started, policy built
        if n == 1:
            t_start = time.perf_counter() - t0
        times[n], e = timed(pool, items)
        errors += e
        pool.close()
    t_local_b, e = timed(local, items)
    errors += e
    t_local = (t_local_a + t_local_b) / 2
    print(f"== {name}: {len(items)} episodes, {c} concurrent per worker")
    print(f"in-process asyncio loop: {t_local_a:.1f} s, {t_local_b:.1f} s (mean {t_local:.1f} s)")
    print(
        f"Ray pool, 1 actor:       {times[1]:.1f} s   (first Ray start + actor + warm-up: {t_start:.1f} s, one-off)"
    )
    print(f"Ray pool, 2 actors:      {times[2]:.1f} s")
    print(f"episode errors: {errors}")
    print(
        f"RATIO {name}.pool_overhead = {times[1] / t_local - 1:+.1%}  (1 actor vs in-process loop; goal <= +5%)"
    )
    print(
        f"RATIO {name}.actors_2_vs_1 = {times[1] / times[2]:.2f}x  (throughput; goal >= 1.8x, sandbox-bound)"
    )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--tasks", type=int, default=4, help="micro-suite tasks (first N by id)")
    ap.add_argument(
        "--samples", type=int, default=2, help="episodes per task (8 in all: a multiple of 2 actors × 2)"
    )
    ap.add_argument(
        "--concurrency", type=int, default=2, help="concurrent episodes per actor / in the local loop"
    )
    ap.add_argument(
        "--test-wait", type=float, default=6.0, help="seconds the slow test suite sleeps in the sandbox"
    )
    args = ap.parse_args()

    from swe_rl.agent.config import AgentConfig
    from swe_rl.evaluation.harness import ensure_images
    from swe_rl.rollout.context import RolloutSpec
    from swe_rl.rollout.policies import ScriptedPolicySpec
    from swe_rl.tasks.loaders import load_tasks

    tasks = sorted(load_tasks("micro"), key=lambda t: t.instance_id)[: args.tasks]
    ensure_images(tasks)
    items = [(t, i) for t in tasks for i in range(args.samples)]
    agent = AgentConfig(max_steps=10)
    gold = RolloutSpec(policy=ScriptedPolicySpec(), agent=agent, grade=False, run_id="bench-rollout")
    measure("gold", gold, items, args.concurrency)
    # Real SWE-bench test suites run for tens of seconds: the episode then waits on its sandbox, which is the
    # regime where more actors (more sandboxes in flight) pay off even on few cores.
    slow = ScriptedPolicySpec(test_command=f"sleep {args.test_wait:g} && python3 -m pytest -q")
    bound = RolloutSpec(policy=slow, agent=agent, grade=False, run_id="bench-rollout")
    measure("sandbox_bound", bound, items, args.concurrency)


if __name__ == "__main__":
    main()
