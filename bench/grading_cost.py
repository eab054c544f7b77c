"""The reward's cost (issue 36), run by `python bench/grading.py --only cost` (this file has no entry point).

On the real instances of SWE_RL_REAL_INPUTS (narrowed by SWE_RL_REAL_IDS; the micro suite without them), every
instance's gold, no-op (a comment appended to the first file the gold edits: the bug stays) and empty patch is
graded, one at a time and interleaved per instance so that load drift hits every harness alike, by:
- ours, full (what `swe-rl eval` / `swe-rl grade` run), with its per-phase cost (tests["cost"]);
- ours with fail-fast (what training runs);
- swebench's official run_evaluation (not for the empty patch: it does not run those), timed by its own
  run_instance.log (container created -> removed: the same span as ours) and as a whole process.
Printed: ours/official on gold (goal <= 0.5), fail-fast/full on no-op (goal <= 0.33), the integrity layer's
share (probe run / graded run, per instance, goal <= 25%), the phase breakdown, and the gradings that
deduplication saved in a short demo training run (configs/demo.yaml's train block).
"""

from __future__ import annotations

import asyncio
import datetime as dt
import json
import os
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
_STAMP = re.compile(r"^(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3})", re.M)


def load_tasks_for_bench(tmp: Path) -> tuple[list, str]:
    from swe_rl.tasks.loaders import load_tasks

    inputs = os.environ.get("SWE_RL_REAL_INPUTS")
    if not inputs or not (Path(inputs) / "rows.jsonl").is_file():
        from swe_rl.images.task_images import build_task_images
        from swe_rl.tasks.loaders import MICRO_SUITE

        build_task_images(MICRO_SUITE, workers=2)
        return load_tasks("micro"), "micro suite"
    from swe_rl.images.swebench_build import build_inputs

    ids = re.split(r"[\s,]+", os.environ.get("SWE_RL_REAL_IDS", "").strip())
    results = build_inputs(inputs, tmp / "real.jsonl", ids=[i for i in ids if i] or None)
    failed = [f"{r.instance_id}: {r.error}" for r in results if r.status == "failed"]
    if failed:
        print("not built (left out):", *failed, sep="\n  ")
    return load_tasks(tmp / "real.jsonl"), f"real instances from {inputs}"


async def noop_patch(task) -> str:
    """A comment appended to the first file the gold patch edits (read from the task image): the bug stays."""
    from sandboxes import make_sandbox

    path = task.patch.split("diff --git a/", 1)[1].split(" ", 1)[0]
    async with make_sandbox({"backend": "docker", "image": task.image}) as sb:
        res = await sb.exec(f"wc -l < {path} && tail -n 1 {path}", cwd="/testbed")
    count, last = res.output.split("\n", 1)
    n = int(count.strip())
    return f"diff --git a/{path} b/{path}\n--- a/{path}\n+++ b/{path}\n@@ -{n},1 +{n},2 @@\n {last.rstrip(chr(10))}\n+# swe-rl no-op\n"


def official(task, patch: str, work: Path) -> tuple[float, float, dict]:
    """(run_instance's own span from its log, the whole process, its report) of swebench's run_evaluation."""
    from swe_rl.grading.official import run_official

    t0 = time.perf_counter()
    _, reports = run_official([task], {task.instance_id: patch}, work, run_id="bench", workers=1)
    proc = time.perf_counter() - t0
    log = next(work.glob(f"logs/run_evaluation/bench/*/{task.instance_id}/run_instance.log"))
    stamps = [dt.datetime.strptime(s, "%Y-%m-%d %H:%M:%S,%f") for s in _STAMP.findall(log.read_text())]
    return (stamps[-1] - stamps[0]).total_seconds(), proc, reports[task.instance_id]


async def ours(task, patch: str, fail_fast: bool):
    from swe_rl.grading.grader import docker_factory, grade

    t0 = time.perf_counter()
    r = await grade(task, patch, docker_factory(run_id="bench-cost"), fail_fast=fail_fast)
    return time.perf_counter() - t0, r


def _how(ff: dict) -> str:
    """What fail-fast did: stopped by the pre-run, or the full run after it; whether the install ran."""
    what = "stopped" if "failed" in ff else f"pre-run {ff.get('pre_run', 'none')}"
    return what + (
        ", install " + ("skipped" if ff.get("install", "").startswith("skipped") else ff["install"])
        if ff.get("install")
        else ""
    )


def measure(tasks, rounds: int, tmp: Path) -> list[dict]:
    rows = []
    patches = {t.instance_id: asyncio.run(noop_patch(t)) for t in tasks}
    for rnd in range(rounds):
        for task in tasks:
            for kind, patch in (("gold", task.patch), ("noop", patches[task.instance_id]), ("empty", "")):
                row = {"id": task.instance_id, "kind": kind}
                if kind != "empty":
                    work = tmp / f"off-{rnd}-{task.instance_id}-{kind}"
                    row["official"], row["official_proc"], off = official(task, patch, work)
                    row["official_resolved"] = off.get("resolved")
                row["full"], full = asyncio.run(ours(task, patch, False))
                if kind != "empty":  # ours full lists every test as the official harness does
                    row["same_tests"] = full.tests.get("tests_status") == off.get("tests_status")
                row["install"] = full.tests.get("integrity", {}).get("install", "")
                row["ff"], fast = asyncio.run(ours(task, patch, True))
                row["resolved"], row["ff_resolved"] = full.resolved, fast.resolved
                row["cost"], row["ff_cost"] = full.tests.get("cost", {}), fast.tests.get("cost", {})
                row["ff_how"] = fast.tests.get("fail_fast", {})
                row["load"] = Path("/proc/loadavg").read_text().split()[:3]
                rows.append(row)
                if os.environ.get("SWE_RL_BENCH_ROWS"):  # partial results stay on disk
                    Path(os.environ["SWE_RL_BENCH_ROWS"]).write_text(json.dumps(rows, indent=1))
                print(f"  {task.instance_id:28s} {kind:5s} ours {row['full']:6.1f}s  fail-fast {row['ff']:6.1f}s"
                      + (f"  official {row['official']:6.1f}s ({row['official_proc']:.1f}s process)" if "official" in row else "")
                      + f"  resolved {full.resolved}/{fast.resolved}/{row.get('official_resolved', '-')}"
                      + f"  [{_how(row['ff_how'])}]  load {' '.join(row['load'])}", flush=True)  # fmt: skip
    return rows


def report(rows: list[dict], label: str) -> None:
    def tot(kind: str, key: str) -> float:
        return sum(r[key] for r in rows if r["kind"] == kind and key in r)

    print(f"\n{label}; load average now {os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs")
    bad = [(r["id"], r["kind"]) for r in rows if r["resolved"] != r["ff_resolved"]
           or r["resolved"] != (r["kind"] == "gold") or r.get("official_resolved", r["resolved"]) != r["resolved"]]  # fmt: skip
    print(
        f"verdicts: ours full = fail-fast = official on every patch: {not bad}"
        + (f" (differ: {bad})" if bad else "")
    )
    differ = [(r["id"], r["kind"]) for r in rows if r.get("same_tests") is False]
    print(f"per-test results: ours full = official on every gold and no-op: {not differ}"
          + (f" (differ: {differ})" if differ else ""))  # fmt: skip
    print(f"gold:  ours/official = {tot('gold', 'full') / tot('gold', 'official'):.2f}  (goal <= 0.5; official incl. "
          f"process start: {tot('gold', 'full') / tot('gold', 'official_proc'):.2f})")  # fmt: skip
    print(
        f"gold:  fail-fast/full = {tot('gold', 'ff') / tot('gold', 'full'):.2f}  (the pre-run a resolved patch pays)"
    )
    for kind in ("noop", "empty"):
        print(f"{kind}: fail-fast/full = {tot(kind, 'ff') / tot(kind, 'full'):.2f}  (goal <= 0.33)")
    print(f"noop:  ours full/official = {tot('noop', 'full') / tot('noop', 'official'):.2f}")
    gold = [r for r in rows if r["kind"] == "gold"]
    # on top of the plain grading: the same grading less its probe run (the detection layer's only sandbox work)
    probe = {r["id"]: r["cost"].get("probe", 0.0) for r in gold}
    shares = {r["id"]: probe[r["id"]] / (r["cost"]["total"] - probe[r["id"]]) for r in gold}
    print("integrity layer (probe run / the rest of the grading), gold, per instance: "
          + ", ".join(f"{i} {s:.0%} ({probe[i]:.1f} s)" for i, s in shares.items())
          + f"  (max {max(shares.values()):.0%}, goal <= 25%)")  # fmt: skip
    runs = {r["id"]: r["cost"].get("probe", 0.0) / r["cost"]["test_run"] for r in gold}
    print("  probe run / graded run alone: " + ", ".join(f"{i} {s:.0%}" for i, s in runs.items()))
    from swe_rl.grading.cost import summary

    for kind, key in (("gold", "cost"), ("noop", "cost"), ("noop", "ff_cost"), ("empty", "ff_cost")):
        s = summary(r[key] for r in rows if r["kind"] == kind)
        phases = "  ".join(f"{p} {v:.1f}" for p, v in s["mean_s"].items() if v and p != "total")
        print(
            f"breakdown {kind} {'fail-fast' if key == 'ff_cost' else 'full'}: {s['mean_s']['total']:.1f} s = {phases}"
        )


def dedup_demo(steps: int, tmp: Path) -> None:
    """Gradings saved by deduplication in a short run of the CPU demo's training (generated tasks)."""
    import yaml

    cfg = yaml.safe_load((REPO / "configs" / "demo.yaml").read_text())["train"]
    cfg |= {
        "name": "dedup",
        "steps": steps,
        "save_every": 0,
        "out_dir": str(tmp),
        "eval": {"every": 0, "n_tasks": 1},
    }
    (tmp / "demo_train.yaml").write_text(yaml.safe_dump(cfg))
    swe_rl = str(Path(sys.executable).with_name("swe-rl"))
    args = [
        swe_rl,
        "train",
        "-c",
        str(tmp / "demo_train.yaml"),
        "-o",
        "model.init=swe_rl/train/assets/demo_sft",
    ]
    proc = subprocess.run(args, cwd=REPO, capture_output=True, text=True)
    if proc.returncode != 0:
        print("dedup demo failed:", proc.stderr[-2000:])
        return
    steps_m = [json.loads(x) for x in (tmp / "dedup" / "metrics.jsonl").read_text().splitlines()]
    runs = sum(m.get("grading/runs", 0) for m in steps_m if "grading/runs" in m)
    shared = sum(m.get("grading/shared", 0) for m in steps_m if "grading/shared" in m)
    episodes = sum(m.get("cost/grading_runs", 0) + m.get("cost/grading_cache_hits", 0) for m in steps_m)
    print(f"dedup (demo training, {steps} steps, {cfg['rollout']['tasks_per_step']} tasks x "
          f"{cfg['rollout']['n_samples']} samples): {int(runs)} gradings run, {int(shared)} shared with an identical "
          f"patch ({shared / max(runs + shared, 1):.0%} saved; the grader's counters: {int(episodes)} graded patches)")  # fmt: skip


def cost_report(rounds: int, demo_steps: int) -> None:
    print(f"load average before: {os.getloadavg()}")
    with tempfile.TemporaryDirectory(prefix="bench-cost-") as d:
        tmp = Path(d)
        tasks, label = load_tasks_for_bench(tmp)
        rows = measure(tasks, rounds, tmp)
        report(rows, f"{len(tasks)} {label} x {rounds} round(s), one grading at a time")
        if demo_steps:
            dedup_demo(demo_steps, tmp)
