"""Grading throughput: instances graded per minute by `swe-rl grade` with 1 and 2 workers (goal: 2 workers
>= 1.8x one), and against swebench's official run_evaluation (2 workers) on the same gold predictions and the
same local images; and the integrity guards' cost per grading (issue 25): each gold patch graded with no guards,
with the tree/log guards (swe_rl.integrity.guard) and with those plus the detection layer (trusted check + tripwire),
interleaved per instance, as ratios to the unguarded grading. Baselines are measured in the same run.

`--only cost` (issue 36, bench/grading_cost.py): the reward's cost on real instances (SWE_RL_REAL_INPUTS, else
the micro suite): gold, empty and no-op patches graded by ours (full, and fail-fast) and by the official
run_evaluation, interleaved per instance, one at a time; ratios, per-phase breakdown, the integrity layer's
share, and the gradings deduplication saved in a demo run.
Usage: python bench/grading.py [--n 8] [--only throughput|guards|cost] [--rounds 1]
"""

from __future__ import annotations

import argparse
import asyncio
import tempfile
import time
from pathlib import Path


def _ours(tasks, preds, workers: int, out: Path) -> float:
    from swe_rl.grading.grade_run import grade_predictions
    from swe_rl.grading.grader import docker_factory

    t0 = time.perf_counter()
    summary = asyncio.run(
        grade_predictions(tasks, preds, docker_factory(run_id="bench"), out, workers=workers)
    )
    dt = time.perf_counter() - t0
    assert summary["resolved_instances"] == len(tasks), summary  # gold must resolve, or the timing is moot
    return dt


GUARD_MODES = {
    "none": (False, False),
    "tree+log guards": (True, False),
    "all (+ trusted check, tripwire)": (True, True),
}


def _guard_costs(tasks, rounds: int) -> dict[str, float]:
    """Mean seconds per grading for each GUARD_MODES entry (one worker; modes interleaved per instance so that
    load drift hits them alike); every gold patch must resolve with no suspicious label in every mode."""
    from swe_rl.grading.grader import docker_factory, grade

    factory = docker_factory(run_id="bench-guards")
    spent = dict.fromkeys(GUARD_MODES, 0.0)

    async def run() -> None:
        for _ in range(rounds):
            for task in tasks:
                for mode, (guards, detect) in GUARD_MODES.items():
                    t0 = time.perf_counter()
                    r = await grade(task, task.patch, factory, guards=guards, detect=detect)
                    spent[mode] += time.perf_counter() - t0
                    assert r.resolved and not r.suspicious, (task.instance_id, mode, r.failure, r.suspicious)

    asyncio.run(run())
    return {m: v / (rounds * len(tasks)) for m, v in spent.items()}


def _tripwire_cost(tasks) -> float:
    """Seconds per scan of a gold patch by the static tripwire (host CPU only)."""
    from swe_rl.integrity.tripwire import scan_patch

    t0 = time.perf_counter()
    for _ in range(100):
        for task in tasks:
            scan_patch(task.patch)
    return (time.perf_counter() - t0) / (100 * len(tasks))


def guards_report(tasks, rounds: int) -> None:
    costs = _guard_costs(tasks, rounds)
    base = costs["none"]
    print(f"guards' cost per grading ({len(tasks)} gold patches x {rounds} round(s), 1 worker):")
    for mode, sec in costs.items():
        print(f"  {mode:32s}: {sec:6.2f} s/grading  ratio {sec / base:.2f}x of no guards")
    print(f"  tripwire alone: {_tripwire_cost(tasks) * 1e3:.2f} ms per patch scan")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--n", type=int, default=15, help="micro-suite instances to grade per configuration")
    ap.add_argument(
        "--only", choices=["throughput", "guards", "cost"], default=None, help="run one part only"
    )
    ap.add_argument(
        "--demo-steps", type=int, default=2, help="cost part: demo training steps for deduplication"
    )
    ap.add_argument("--rounds", type=int, default=1, help="guards part: passes over the instances")
    args = ap.parse_args()
    if args.only in ("cost", None):
        import sys

        sys.path.insert(0, str(Path(__file__).parent))
        from grading_cost import cost_report

        cost_report(args.rounds, args.demo_steps)
        if args.only == "cost":
            return

    from swe_rl.grading.grade_run import load_predictions
    from swe_rl.grading.official import run_official
    from swe_rl.images.task_images import build_task_images
    from swe_rl.tasks.loaders import MICRO_SUITE, load_tasks

    build_task_images(MICRO_SUITE, workers=2)
    tasks = load_tasks("micro")[: args.n]
    if args.only != "throughput":
        guards_report(tasks, args.rounds)
        if args.only == "guards":
            return
    preds = load_predictions("gold", tasks)
    n = len(tasks)
    with tempfile.TemporaryDirectory(prefix="bench-grading-") as tmp:
        root = Path(tmp)
        one = _ours(tasks, preds, 1, root / "w1")
        two = _ours(tasks, preds, 2, root / "w2")
        t0 = time.perf_counter()
        summary, _ = run_official(
            tasks, {i: p["model_patch"] for i, p in preds.items()}, root / "official", workers=2
        )
        official = time.perf_counter() - t0
        assert summary["resolved_instances"] == n, summary

    def rate(seconds: float) -> float:
        return 60.0 * n / seconds

    import os

    print(
        f"instances: {n} (micro suite, gold predictions); load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs"
    )
    print(f"swe-rl grade, 1 worker : {rate(one):6.1f} instances/min  ({one:.1f}s)")
    print(f"swe-rl grade, 2 workers: {rate(two):6.1f} instances/min  ({two:.1f}s)")
    print(
        f"official run_evaluation, 2 workers: {rate(official):6.1f} instances/min  ({official:.1f}s, incl. startup)"
    )
    print(f"ratio 2 workers / 1 worker: {one / two:.2f}x (goal >= 1.8x)")
    print(f"ratio swe-rl (2 workers) / official (2 workers): {official / two:.2f}x")


if __name__ == "__main__":
    main()
