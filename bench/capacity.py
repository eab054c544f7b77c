"""Capacity per concurrent sandbox on real SWE-bench instances (issue 59, docs/cluster.md "Capacity plan").

For each instance image and each concurrency N: N DockerSandboxes (the production limits: 1 CPU, 2 GiB) run the
instance's own test command at once (the eval script's test step: its environment activation, then the lines
between its `Start Test Output` / `End Test Output` markers; no test patch, no reinstall). Sampled every 0.5 s from
each container's cgroup (v1: cpuacct.usage, memory.usage_in_bytes / memory.stat rss): CPU-seconds, mean and
peak cores, peak memory (usage and rss); after the run the writable layer (`SizeRw`). The N=1 run is the baseline:
the ratio columns are wall time and CPU-seconds per sandbox against it (the slowdown that concurrency costs on
this machine). `--full` runs the whole eval script instead (what grading runs: test patch applied and, for
compiled repositories such as scikit-learn, the reinstall that rebuilds the extensions). `--layers` prints each image's own bytes over its parent (instance over env over base image).

    .venv/bin/python bench/capacity.py        # make bench: the first micro task at N = 1, 2, 4
    .venv/bin/python bench/capacity.py --tasks /tmp/tasks.jsonl --id django__django-16595 -n 1 2 4 8
    .venv/bin/python bench/capacity.py --layers sweb.eval.x86_64.django__django-16595 ...
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

from sandboxes import DockerSandboxConfig, make_sandbox
from sandboxes.engine import docker_client

CG = "/sys/fs/cgroup"
MiB = 1 << 20


def test_command(eval_script: str) -> str:
    """The eval script's activation lines (up to its first `git`) and its test step, nothing that changes files."""
    lines = eval_script.splitlines()
    head = []
    for line in lines[1:]:
        if line.startswith("git "):
            break
        head.append(line)
    start = next(i for i, ln in enumerate(lines) if "Start Test Output" in ln)
    end = next(i for i, ln in enumerate(lines) if "End Test Output" in ln)
    return "\n".join([*head, *lines[start + 1 : end]])


def _read(path: str) -> int | None:
    try:
        return int(Path(path).read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return None


def _rss(cid: str) -> int:
    try:
        stat = dict(
            ln.split() for ln in Path(f"{CG}/memory/docker/{cid}/memory.stat").read_text().splitlines()
        )
        return int(stat.get("total_rss", stat.get("rss", 0)))
    except (OSError, ValueError):
        return 0


@dataclass
class Sample:
    cpu_ns: int = 0  # last cpuacct.usage
    cpu_first: int | None = None  # first cpuacct.usage seen
    peak_usage: int = 0  # bytes, memory.usage_in_bytes (rss + page cache)
    peak_rss: int = 0  # bytes
    peak_cores: float = 0.0  # highest CPU rate over one sampling interval
    _last: tuple[float, int] | None = field(default=None, repr=False)


def sample_loop(cids: list[str], stop: threading.Event, out: dict[str, Sample], every: float = 0.5) -> None:
    while not stop.is_set():
        now = time.monotonic()
        for cid in cids:
            s = out.setdefault(cid, Sample())
            cpu = _read(f"{CG}/cpuacct/docker/{cid}/cpuacct.usage")
            if cpu is not None:
                s.cpu_first = cpu if s.cpu_first is None else s.cpu_first
                if s._last is not None and now > s._last[0]:
                    s.peak_cores = max(s.peak_cores, (cpu - s._last[1]) / 1e9 / (now - s._last[0]))
                s._last, s.cpu_ns = (now, cpu), cpu
            s.peak_usage = max(s.peak_usage, _read(f"{CG}/memory/docker/{cid}/memory.usage_in_bytes") or 0)
            s.peak_rss = max(s.peak_rss, _rss(cid))
        stop.wait(every)


async def run_level(image: str, command: str, n: int, timeout: float) -> dict:
    cfg = DockerSandboxConfig(image=image, ttl=timeout + 600, exec_timeout=timeout)
    boxes = [make_sandbox(cfg, run_id=f"capacity-{os.getpid()}") for _ in range(n)]
    client = docker_client()
    try:
        await asyncio.gather(*(b.start() for b in boxes))
        await asyncio.gather(*(b.write_file("/tmp/capacity.sh", command) for b in boxes))
        cids = [b.id for b in boxes]
        idle = [
            _read(f"{CG}/memory/docker/{c}/memory.usage_in_bytes") or 0 for c in cids
        ]  # started, shell only
        samples: dict[str, Sample] = {}
        stop = threading.Event()
        sampler = threading.Thread(target=sample_loop, args=(cids, stop, samples), daemon=True)
        sampler.start()
        t0 = time.monotonic()

        async def one(b) -> float:
            r = await b.exec_once("bash /tmp/capacity.sh > /tmp/capacity.log 2>&1", timeout=timeout)
            codes.append(r.exit_code)
            return time.monotonic() - t0 if not r.timed_out else float("nan")

        codes: list[int] = []
        walls = await asyncio.gather(*(one(b) for b in boxes))
        stop.set()
        sampler.join()
        disk = [
            client.api.containers(all=True, filters={"id": c}, size=True)[0].get("SizeRw", 0) for c in cids
        ]
    finally:
        await asyncio.gather(*(b.close() for b in boxes), return_exceptions=True)
        client.close()
    cpu = [(s.cpu_ns - (s.cpu_first or 0)) / 1e9 for s in samples.values()]
    return {
        "n": n,
        "wall_s": max(walls),
        "cpu_s_per_sandbox": sum(cpu) / n,
        "mean_cores_per_sandbox": sum(cpu) / n / max(walls),
        "peak_cores": max(s.peak_cores for s in samples.values()),
        "idle_mem_mib": max(idle) / MiB,
        "peak_mem_mib": max(s.peak_usage for s in samples.values()) / MiB,
        "peak_rss_mib": max(s.peak_rss for s in samples.values()) / MiB,
        "disk_rw_mib": max(disk) / MiB,
        "load1": os.getloadavg()[0],
        "exit_codes": sorted(set(codes)),  # the test command's (tests failing at the base commit are fine)
    }


def layers(images: list[str]) -> list[dict]:
    """Each image's total size and its own bytes over the longest other local image whose layers it starts with."""
    client = docker_client()
    every = {}
    for img in client.api.images():
        for tag in img.get("RepoTags") or []:
            if tag != "<none>:<none>":
                every[tag] = client.api.inspect_image(img["Id"])
    rows = []
    for name in images:
        info = client.api.inspect_image(name)
        chain = [name]
        while True:
            mine = info["RootFS"]["Layers"]
            parents = [(t, i) for t, i in every.items()
                       if len(i["RootFS"]["Layers"]) < len(mine) and mine[: len(i["RootFS"]["Layers"])] == i["RootFS"]["Layers"]]  # fmt: skip
            if not parents:
                break
            tag, parent = max(parents, key=lambda p: len(p[1]["RootFS"]["Layers"]))
            rows.append({"image": chain[-1], "size_mib": info["Size"] / MiB, "parent": tag,
                         "own_mib": (info["Size"] - parent["Size"]) / MiB})  # fmt: skip
            chain.append(tag)
            info = parent
        rows.append(
            {
                "image": chain[-1],
                "size_mib": info["Size"] / MiB,
                "parent": None,
                "own_mib": info["Size"] / MiB,
            }
        )
    client.close()
    return rows


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--tasks", default="micro", help="task source: rows of `swe-rl images build`, or micro")
    ap.add_argument(
        "--id", action="append", default=[], help="instance id (repeatable; default: the first task)"
    )
    ap.add_argument("-n", type=int, nargs="+", default=[1, 2, 4], help="concurrency levels")
    ap.add_argument("--timeout", type=float, default=900.0, help="seconds per test command")
    ap.add_argument("--layers", nargs="*", help="print layer sizes of these images instead")
    ap.add_argument(
        "--full", action="store_true", help="the whole eval script (test patch, reinstall: grading)"
    )
    args = ap.parse_args()
    if args.layers is not None:
        for row in layers(args.layers):
            print(json.dumps(row))
        return
    from swe_rl.images import prepare_images
    from swe_rl.tasks.loaders import load_tasks

    tasks = {t.instance_id: t for t in load_tasks(args.tasks)}
    ids = args.id or [next(iter(tasks))]
    prepare_images([tasks[i] for i in ids], args.tasks)  # the micro suite's images are built when missing
    for iid in ids:
        task = tasks[iid]
        base = None
        for n in args.n:
            command = task.eval_script if args.full else test_command(task.eval_script)
            res = asyncio.run(run_level(task.image, command, n, args.timeout))
            res["workload"] = "eval script" if args.full else "test command"
            base = base or res
            res["wall_ratio"] = res["wall_s"] / base["wall_s"]
            res["cpu_ratio"] = res["cpu_s_per_sandbox"] / base["cpu_s_per_sandbox"]
            print(json.dumps({"instance": iid, "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()), **res}),
                  flush=True)  # fmt: skip


if __name__ == "__main__":
    main()
