"""Run a command with the CPUs oversubscribed (`make test-stress`): N busy loops for the command's whole life.

    python scripts/stress.py --loops 4 -- .venv/bin/python -m pytest -m "not slow" tests/sandboxes

The loops stop when the command ends, on Ctrl-C / SIGTERM, and (PR_SET_PDEATHSIG) when this process is killed
outright, so a stressed run never leaves spinning processes behind. Prints the load average before and after,
and the command's wall time; exits with the command's status.
"""

from __future__ import annotations

import argparse
import ctypes
import multiprocessing as mp
import os
import signal
import subprocess
import sys
import time

PR_SET_PDEATHSIG = 1  # <linux/prctl.h>


def _busy(parent: int) -> None:
    # Die with the parent even when it is SIGKILLed (no finally runs then); re-check in case it already died.
    ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGKILL)
    if os.getppid() != parent:
        os._exit(0)
    while True:
        pass


def _interrupt(signum: int, frame: object) -> None:
    raise KeyboardInterrupt


def _load() -> str:
    return " ".join(f"{x:.1f}" for x in os.getloadavg())


def main(argv: list[str]) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--loops", type=int, default=4, help="busy loops to run beside the command")
    p.add_argument("cmd", nargs=argparse.REMAINDER, help="-- then the command")
    a = p.parse_args(argv)
    cmd = a.cmd[1:] if a.cmd[:1] == ["--"] else a.cmd
    if not cmd or a.loops < 0:
        p.error("expected --loops N (N >= 0) then -- COMMAND ...")
    # SIGTERM (make killed, CI timeout) goes through the same cleanup as Ctrl-C.
    signal.signal(signal.SIGTERM, _interrupt)
    ctx = mp.get_context("fork")
    loops = [ctx.Process(target=_busy, args=(os.getpid(),), daemon=True) for _ in range(a.loops)]
    for lp in loops:
        lp.start()
    print(f"stress: {a.loops} busy loops (pids {' '.join(str(lp.pid) for lp in loops)}) on {os.cpu_count()} CPUs,"
          f" load {_load()}", flush=True)  # fmt: skip
    t0, proc = time.monotonic(), None
    try:
        proc = subprocess.Popen(cmd)
        return proc.wait()
    except KeyboardInterrupt:
        return 130
    finally:
        if proc is not None and proc.poll() is None:
            proc.terminate()
            proc.wait()
        for lp in loops:
            lp.kill()
            lp.join()
        print(f"stress: command ran {time.monotonic() - t0:.0f} s, load now {_load()}", flush=True)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
