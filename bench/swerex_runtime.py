"""SWE-ReX runtime over our sandboxes (sandboxes/adapters/swerex_*.py): what one SWE-ReX call costs on top of the
sandbox call it makes, measured in the same run, same container.

1. run_in_session (syntax check + session state in and out + loop-thread hop, each call in its own asyncio.run as
   SWE-agent makes it) vs a bare persistent-shell `exec` of the same command;
2. execute (one-shot process, stdout/stderr split) vs a bare `exec_once`.

Usage: .venv/bin/python bench/swerex_runtime.py [N]
"""

from __future__ import annotations

import asyncio
import statistics
import sys
import time

from swerex.runtime.abstract import BashAction, Command, CreateBashSessionRequest

from sandboxes.adapters.swerex_deployment import SandboxDeployment

CMD = "echo hello && ls / > /dev/null"


def paired_p50(a, b, n: int) -> tuple[float, float]:
    """Median times of `a` and `b`, run alternately so load changes hit both alike."""
    ta, tb = [], []
    for _ in range(n):
        for fn, times in ((a, ta), (b, tb)):
            t0 = time.perf_counter()
            fn()
            times.append(time.perf_counter() - t0)
    return statistics.median(ta), statistics.median(tb)


def main(n: int) -> None:
    dep = SandboxDeployment(run_id="bench-swerex")
    asyncio.run(dep.start())
    try:
        rt, loop = dep.runtime, dep._loop
        assert loop is not None
        asyncio.run(rt.create_session(CreateBashSessionRequest()))
        sb = dep.sandbox

        def bare(coro_fn):  # the sandbox call on its own loop, as the runtime makes it, minus the runtime
            return lambda: asyncio.run_coroutine_threadsafe(coro_fn(), loop.loop).result()

        session, shell = paired_p50(
            lambda: asyncio.run(rt.run_in_session(BashAction(command=CMD, check="silent"))),
            bare(lambda: sb.exec(CMD)),
            n,
        )
        execute, once = paired_p50(
            lambda: asyncio.run(rt.execute(Command(command=CMD, shell=True))),
            bare(lambda: sb.exec_once(CMD)),  # type: ignore[attr-defined]
            n,
        )
    finally:
        asyncio.run(dep.stop())
    print(f"run_in_session p50: {session * 1e3:.1f} ms | bare shell exec p50: {shell * 1e3:.1f} ms")
    print(f"ratio run_in_session/exec: {session / shell:.2f}")
    print(f"execute p50: {execute * 1e3:.1f} ms | bare exec_once p50: {once * 1e3:.1f} ms")
    print(f"ratio execute/exec_once: {execute / once:.2f}")


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 30)
