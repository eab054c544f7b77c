"""What a process's start costs without bytecode on disk, as ratios against the venv as `make setup` leaves it.

`make setup` compiles every installed module and ours once (Makefile, `.venv/.compiled`): where
PYTHONDONTWRITEBYTECODE is set (many CI containers; this project's machines) Python writes no .pyc itself, so every
fresh process (each CLI call, Ray worker, vLLM engine, test subprocess) would compile its imports from source again.
For each import set a process of ours starts with, a fresh interpreter is timed:
- as set up: the .pyc files `make setup` wrote (PYTHONDONTWRITEBYTECODE=1, so the run writes nothing new);
- from source: PYTHONPYCACHEPREFIX pointing at an empty folder (Python then looks for bytecode only there) with
  PYTHONDONTWRITEBYTECODE=1, i.e. what each process paid before.
Each timing is the best of --repeats runs, the two interleaved (the machine is shared; the best is the least
disturbed). A ratio near 1 means the venv has no bytecode: run `make setup` (or `make venv`) first.

Usage: .venv/bin/python bench/startup.py [--repeats 3] [--only NAME]
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
# (name, the imports that process starts with)
CASES = [
    ("swe-rl CLI (--help)", "import swe_rl.cli"),
    ("swe-rl eval's driver", "import swe_rl.cli, swe_rl.evaluation.harness"),
    ("a rollout worker (Ray, episode, grader)", "import ray, swe_rl.rollout.episode, swe_rl.grading.grader"),
    ("the built-in trainer (swe-rl train)", "import swe_rl.train.loop, swe_rl.train.run"),
    ("vLLM's engine side", "import vllm"),
]


def time_import(code: str, env: dict[str, str]) -> float:
    t0 = time.perf_counter()
    subprocess.run([sys.executable, "-c", code], cwd=REPO, env=env, check=True, capture_output=True)
    return time.perf_counter() - t0


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--only", default=None, help="run the cases whose name contains this")
    args = ap.parse_args()
    base = {**os.environ, "PYTHONDONTWRITEBYTECODE": "1"}
    base.pop("PYTHONPYCACHEPREFIX", None)
    stamp = Path(sys.prefix) / ".compiled"
    print(f"python {sys.executable}; {stamp}: {'present' if stamp.exists() else 'MISSING (run make setup)'}")
    print(f"{'process':42s} {'as set up':>10s} {'from source':>12s} {'ratio':>6s}")
    for name, code in CASES:
        if args.only and args.only not in name:
            continue
        warm, cold = [], []
        for _ in range(args.repeats):
            with tempfile.TemporaryDirectory() as empty:
                cold.append(time_import(code, {**base, "PYTHONPYCACHEPREFIX": empty}))
            warm.append(time_import(code, base))
        w, c = min(warm), min(cold)
        print(f"{name:42s} {w:9.2f}s {c:11.2f}s {c / w:5.1f}x", flush=True)


if __name__ == "__main__":
    main()
