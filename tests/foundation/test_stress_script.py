"""scripts/stress.py (`make test-stress`), run as the Makefile runs it: the busy loops really spin while the
command runs, the command's exit status comes back, and no loop outlives the wrapper, even when it is killed."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
SCRIPT = "scripts/stress.py"


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().split(")")[-1].split()[0] != "Z"  # a zombie has exited
    except FileNotFoundError:
        return False


def _pids(line: str) -> list[int]:
    m = re.search(r"\(pids ([\d ]+)\)", line)
    assert m, line
    return [int(x) for x in m.group(1).split()]


def _wait_gone(pids: list[int], within: float = 30.0) -> list[int]:
    end = time.monotonic() + within  # an upper bound only: returns as soon as they are gone
    while any(_alive(p) for p in pids) and time.monotonic() < end:
        time.sleep(0.05)
    return [p for p in pids if _alive(p)]


def test_loops_spin_during_the_command_and_stop_after_it_with_its_status() -> None:
    r = subprocess.run([sys.executable, SCRIPT, "--loops", "2", "--", sys.executable, "-c", "exit(3)"], cwd=REPO,
                       capture_output=True, text=True, timeout=120)  # fmt: skip
    assert r.returncode == 3, r.stdout + r.stderr
    first, last = r.stdout.splitlines()[0], r.stdout.splitlines()[-1]
    pids = _pids(first)
    assert len(pids) == 2 and "load" in first and "command ran" in last
    assert _wait_gone(pids) == []


def _utime(pid: int) -> int:
    with open(f"/proc/{pid}/stat") as f:
        return int(f.read().split(")")[-1].split()[11])


def test_a_killed_wrapper_leaves_no_loop_behind() -> None:
    cmd = "import os, time; print(os.getpid(), flush=True); time.sleep(600)"
    p = subprocess.Popen([sys.executable, SCRIPT, "--loops", "2", "--", sys.executable, "-c", cmd], cwd=REPO,
                         stdout=subprocess.PIPE, text=True)  # fmt: skip
    assert p.stdout is not None
    pids, child = _pids(p.stdout.readline()), int(p.stdout.readline())
    try:
        ticks = [_utime(x) for x in pids]
        while not all(
            _utime(x) > t for x, t in zip(pids, ticks, strict=True)
        ):  # they spin (an order, no duration)
            time.sleep(0.05)
        os.kill(p.pid, signal.SIGKILL)  # no finally runs: only PR_SET_PDEATHSIG can stop the loops
        p.wait()
        assert _wait_gone(pids) == []
    finally:
        os.kill(
            child, signal.SIGKILL
        )  # the command itself is the test's to stop (a real kill would reach it too)


def test_bad_arguments_name_what_was_expected() -> None:
    r = subprocess.run([sys.executable, SCRIPT, "--loops", "2"], cwd=REPO, capture_output=True, text=True,
                       timeout=60)  # fmt: skip
    assert r.returncode == 2 and "-- COMMAND" in r.stderr
