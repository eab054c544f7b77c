"""Whether the fail-fast pre-run pays for itself, task by task, learned from the gradings' own cost (issue 36).

The F2P-only pre-run (swe_rl.tasks.failfast) saves a failing patch the full run's tests minus its own; a patch
whose F2P tests pass pays for the pre-run and then for the full run in a fresh sandbox. With set-up S (start,
apply, tree guard), pre-run c, full test run F and a resolve rate p, a grading costs on average
S + c + p (S + F) with the pre-run and S + F without: the pre-run pays only while c < (1 - p) F - p S, so
never once c >= F / 2 at any resolve rate up to one half (RL resolve rates: 10-40%). On small suites (the real
django and sympy instances: one test module, a run that is mostly the runner starting) c is about F: the pre-run
saved nothing on a failing patch and cost a resolved one 1.5-1.7x (swe_rl/tasks/README.md, cost table).

`FailFastPolicy` keeps, per task, the mean seconds of its pre-runs (`tests["cost"]["failfast"]`) and of its full
test runs (`test_run`), both read from every grading it sees, and stops pre-running a task once both are known
and the pre-run's mean is at least `max_share` (0.5) of the full run's. Until then, and for a task whose runner
cannot select (pre-run "skipped", ~0 s), fail-fast stays on. Only which run comes first changes: a verdict is
the full run's either way (the fail-fast rule: swe_rl/tasks/README.md "Fail fast").
"""

from __future__ import annotations

import dataclasses
from typing import Any

MAX_SHARE = 0.5  # c >= F/2: no gain at any resolve rate <= 1/2 (module docstring), not tuned on any task


@dataclasses.dataclass
class _Mean:
    total: float = 0.0
    n: int = 0

    def add(self, seconds: float) -> None:
        self.total += seconds
        self.n += 1

    @property
    def value(self) -> float:
        return self.total / self.n


@dataclasses.dataclass
class _TaskCost:
    pre: _Mean = dataclasses.field(default_factory=_Mean)
    full: _Mean = dataclasses.field(default_factory=_Mean)


class FailFastPolicy:
    """`worth(task_id)`: whether to pre-run; `observe(task_id, result)` after each grading (a RewardResult);
    `mark(result)`: a result graded without the pre-run because it does not pay says so in `tests["fail_fast"]`.
    One per reward function (a trainer's lifetime): memory is one entry per task seen."""

    def __init__(self, max_share: float = MAX_SHARE):
        if not max_share > 0.0:  # also NaN
            raise ValueError(f"max_share: expected a positive share of the full run, got {max_share}")
        self.max_share = max_share
        self._tasks: dict[str, _TaskCost] = {}

    def worth(self, task_id: str) -> bool:
        seen = self._tasks.get(task_id)
        if seen is None or not seen.pre.n or not seen.full.n:
            return True
        return seen.pre.value < self.max_share * seen.full.value

    def observe(self, task_id: str, result: Any) -> None:
        """Learn from a grading that ran (an infrastructure failure or a shared result teaches nothing)."""
        cost = (result.tests or {}).get("cost") or {}
        if result.reward is None or cost.get("dedup_hit"):
            return
        seen = self._tasks.setdefault(task_id, _TaskCost())
        if "failfast" in cost:
            seen.pre.add(float(cost["failfast"]))
        if "test_run" in cost:
            seen.full.add(float(cost["test_run"]))

    def mark(self, task_id: str, result: Any) -> Any:
        seen = self._tasks[task_id]
        why = f"pre-run {seen.pre.value:.2f} s >= {self.max_share:g} x full test run {seen.full.value:.2f} s"
        tests = {**result.tests, "fail_fast": {"pre_run": "not_worth", "why": why}}
        return dataclasses.replace(result, tests=tests)
