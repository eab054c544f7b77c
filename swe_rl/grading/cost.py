"""What one grading costs, phase by phase: `tests["cost"]` of every grading report, so that a change to the grader is measured.

Phases (wall-clock seconds, exclusive: a nested phase's time is not counted in the one around it):
- `start`: the sandbox started and prepared (generated repos, setup scripts);
- `apply`: the patch written and swebench's apply chain;
- `harness_reset`: the tree guard (snapshot before the patch, what it touched, harness files reset);
- `failfast`: the FAIL_TO_PASS-only pre-run (swe_rl.grading.failfast), when fail-fast is on;
- `test_run`: the graded run (the official eval script; twice when the junit record was dropped);
- `integrity`: swebench's report on the log and the log guards (host side);
- `probe`: the probe run of a result that would be resolved (swe_rl.integrity.probe);
- `copy_back`: files read back out of the sandbox (the guard's records: a log is the exec's stream), any phase's;
- `close`: the sandbox stopped and removed.
`total` is the grading's wall clock (all attempts: a transient failure graded again adds to the same phases).
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from typing import Any

PHASES = (
    "start", "apply", "harness_reset", "failfast", "test_run", "integrity", "probe", "copy_back", "close",
)  # fmt: skip


class Cost:
    """Seconds per phase of one grading (one instance per grading: nothing shared)."""

    def __init__(self) -> None:
        self.seconds: dict[str, float] = {}
        self._stack: list[list[Any]] = []  # [phase, since]: the innermost phase is the one being charged
        self._t0 = time.perf_counter()

    @contextmanager
    def phase(self, name: str) -> Iterator[None]:
        now = time.perf_counter()
        if self._stack:  # the outer phase pauses
            self._charge(self._stack[-1], now)
        self._stack.append([name, now])
        try:
            yield
        finally:
            now = time.perf_counter()
            self._charge(self._stack.pop(), now)
            if self._stack:
                self._stack[-1][1] = now

    def _charge(self, entry: list[Any], now: float) -> None:
        self.seconds[entry[0]] = self.seconds.get(entry[0], 0.0) + now - entry[1]
        entry[1] = now

    def as_dict(self) -> dict[str, float]:
        out = {p: round(self.seconds[p], 3) for p in PHASES if p in self.seconds}
        return out | {"total": round(time.perf_counter() - self._t0, 3)}


class TimedSandbox:
    """A sandbox whose start and close are the `start`/`close` phases and whose file reads are `copy_back`;
    everything else is the wrapped sandbox's own (`async with TimedSandbox(factory(task), cost) as sb`)."""

    def __init__(self, box: Any, cost: Cost):
        self._box = self._inner = box
        self._cost = cost

    async def __aenter__(self) -> TimedSandbox:
        with self._cost.phase("start"):
            self._inner = await self._box.__aenter__()
        return self

    async def __aexit__(self, *exc: Any) -> Any:
        with self._cost.phase("close"):
            return await self._box.__aexit__(*exc)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)

    async def read_file(self, path: str, *args: Any, **kw: Any) -> bytes:
        with self._cost.phase("copy_back"):
            return bytes(await self._inner.read_file(path, *args, **kw))


def with_cost(result: Any, cost: Cost, pre: Any = None) -> Any:
    """The RewardResult with `tests["cost"]` (and, when a fail-fast pre-run handed the patch to the full run,
    `tests["fail_fast"]` saying what it found)."""
    import dataclasses

    tests = {**result.tests, "cost": cost.as_dict()}
    if pre is not None:
        tests["fail_fast"] = {"pre_run": pre.outcome, "install": pre.install} | (
            {"why": pre.why} if pre.why else {}
        )
    return dataclasses.replace(result, tests=tests)


def summary(costs: Iterable[dict[str, Any] | None]) -> dict[str, Any]:
    """Over the gradings that ran (a report without `cost`, or one an identical patch's grading served, did not
    run): their count, total seconds and mean seconds per phase; and how many were served (`shared`). For
    `swe-rl grade`'s summary, the trainers' metrics and bench/grading.py."""
    listed = [c for c in costs if c]
    ran = [c for c in listed if not c.get("dedup_hit") and "total" in c]
    n = len(ran)
    means = {p: round(sum(c.get(p, 0.0) for c in ran) / n, 3) for p in (*PHASES, "total")} if n else {}
    shared = sum(1 for c in listed if c.get("dedup_hit"))
    return {
        "gradings": n,
        "shared": shared,
        "seconds": round(sum(c["total"] for c in ran), 3),
        "mean_s": means,
    }


def step_metrics(reports: Iterable[dict[str, Any] | None], prefix: str = "grading/") -> dict[str, float]:
    """A training step's grading metrics from its episodes' grading reports (`tests`): gradings run and shared
    with an identical patch, mean seconds per phase, and fail-fast stops (an F2P test failed in the pre-run)."""
    tests = [t or {} for t in reports]
    s = summary(t.get("cost") for t in tests)
    out = {f"{prefix}runs": float(s["gradings"]), f"{prefix}shared": float(s["shared"])}
    out[f"{prefix}fail_fast_stops"] = float(sum(1 for t in tests if "failed" in (t.get("fail_fast") or {})))
    return out | {f"{prefix}{p}_s": float(v) for p, v in s["mean_s"].items()}
