"""`swe-rl view` on a 2,000-episode evaluation run (500 instances x 4 runs): the site's build time as a ratio against
reading and parsing the run's trajectories JSONL alone (the least any viewer must do), measured in the same run,
and the index's load time in headless Chromium (when installed: `make test-view` installs it).

The run is generated (swe_rl.view.synthetic: the micro suite's tasks and the scripted gold policy's replies, made-up
observations and outcomes, sizes of a real micro-suite trajectory). Timed:
- baseline: every line of trajectories/run_NN.jsonl read and json-parsed, in this process;
- cold build: `swe-rl view RUN` in a fresh process (imports included), no view/ yet: every page written;
- warm rebuild: the same command again, nothing changed (what refreshing a finished run costs);
- one run's episode file changed (an in-progress run's refresh): that page and the index written again;
- browser: index.html opened from disk, navigation start to the table's first page drawn (the page's own
  performance.now(), best of 3 fresh loads), and the largest episode page's load event.

Usage: .venv/bin/python bench/view_build.py [--instances 500] [--runs 4] [--keep DIR]
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def parse_jsonl(run: Path) -> tuple[float, int]:
    t0 = time.perf_counter()
    n = 0
    for f in sorted((run / "trajectories").glob("run_*.jsonl")):
        with f.open() as fh:
            for line in fh:
                json.loads(line)
                n += 1
    return time.perf_counter() - t0, n


def cli_view(run: Path) -> tuple[float, str]:
    t0 = time.perf_counter()
    p = subprocess.run(
        [sys.executable, "-m", "swe_rl.cli", "view", str(run)], cwd=REPO, capture_output=True, text=True
    )
    if p.returncode:
        raise SystemExit(f"swe-rl view failed:\n{p.stderr}")
    return time.perf_counter() - t0, p.stdout.splitlines()[0]


def browser(view: Path) -> dict[str, float] | None:
    from swe_rl.view.browser import Chromium, find_chromium

    if not find_chromium():
        print("browser: skipped (no chromium; `make test-view` installs Debian's)")
        return None
    out = {}
    ready = []
    for _ in range(3):
        with Chromium() as b:  # a fresh profile each time: nothing cached
            b.open((view / "index.html").as_uri())
            ready.append(float(b.eval("document.documentElement.dataset.ready")))
            rows = b.eval("document.querySelectorAll('#table tbody tr').length")
    out["index_ready_ms"] = min(ready)
    out["index_rows_drawn"] = rows
    biggest = max((view / "episodes").rglob("*.html"), key=lambda p: p.stat().st_size)
    with Chromium() as b:
        b.open(biggest.as_uri())
        out["episode_load_ms"] = float(b.eval("performance.getEntriesByType('navigation')[0].loadEventEnd"))
    out["episode_kib"] = biggest.stat().st_size / 1024
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--instances", type=int, default=500)
    ap.add_argument("--runs", type=int, default=4)
    ap.add_argument("--keep", type=Path, help="generate the run here (reused when it is there) and keep it")
    args = ap.parse_args()
    from swe_rl.view.synthetic import make_eval_run

    tmp = Path(tempfile.mkdtemp(prefix="view-bench-"))
    run = args.keep or tmp / "eval-2000"
    try:
        if not (run / "trajectories").is_dir():
            t0 = time.perf_counter()
            make_eval_run(run, args.instances, args.runs)
            print(f"generated {args.instances} x {args.runs} episodes in {time.perf_counter() - t0:.1f}s")
        shutil.rmtree(run / "view", ignore_errors=True)
        size = sum(f.stat().st_size for f in (run / "trajectories").rglob("*.json")) / 2**20
        base, n = parse_jsonl(run)
        cold, line = cli_view(run)
        warm, _ = cli_view(run)
        touched = next((run / "trajectories" / "run_00").glob("*.json"))
        touched.touch()
        one, _ = cli_view(run)
        site = sum(f.stat().st_size for f in (run / "view").rglob("*") if f.is_file()) / 2**20
        print(f"run: {n} episodes, {size:.0f} MiB of trajectory JSON; site {site:.0f} MiB")
        print(f"  {line}")
        print(f"{'':32}{'seconds':>9}{'ratio':>9}")
        print(f"{'baseline: parse the JSONL':32}{base:9.2f}{1:9.2f}")
        for name, t in (("cold build (swe-rl view)", cold), ("warm rebuild, nothing changed", warm),
                        ("rebuild, one episode changed", one)):  # fmt: skip
            print(f"{name:32}{t:9.2f}{t / base:9.2f}")
        b = browser(run / "view")
        if b:
            print(f"browser: index ready {b['index_ready_ms']:.0f} ms after navigation start "
                  f"({b['index_rows_drawn']} rows drawn of {n}); largest episode page "
                  f"({b['episode_kib']:.0f} KiB) loaded in {b['episode_load_ms']:.0f} ms")  # fmt: skip
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
