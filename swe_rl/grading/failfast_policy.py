"""Whether the fail-fast pre-run pays for itself, task by task, learned from the gradings themselves.

The F2P-only pre-run (swe_rl.grading.failfast) saves a failing patch the full run's tests minus its own; a patch
whose F2P tests pass pays for the pre-run and then for the full run in a fresh sandbox. With set-up S (start,
apply, tree guard), pre-run c, full test run F and resolve rate p, a grading costs on average
S + c + p (S + F) with the pre-run and S + F without: the pre-run pays only while c < (1 - p) F - p S. On small
suites (the real django and sympy instances after the install guard: one test module, a run that is mostly the
runner starting) c is most of F: the pre-run saves little on a failing patch and costs a resolved one 1.5-1.7x.

`FailFastPolicy` keeps, per task, the mean seconds of its pre-runs (`tests["cost"]["failfast"]`) and of its full
test runs (`test_run`) and its resolve rate, all read from the gradings it sees, and pre-runs a task only while
c < (1 - p) F, with p = (resolved + 1) / (graded + 2) (Laplace's rule: 1/2 before anything is known) and S left
out (it errs towards the pre-run by at most p S a grading). Until both costs are known, and for a task whose
runner cannot select (pre-run "skipped", ~0 s), fail-fast stays on. Only which run comes first changes: a verdict
is the full run's either way (the fail-fast rule: docs/grading.md "Fail fast").
"""

from __future__ import annotations

import dataclasses
from typing import Any


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
    resolved: _Mean = dataclasses.field(default_factory=_Mean)  # 1 per resolved grading, 0 per other

    @property
    def resolve_rate(self) -> float:
        return (self.resolved.total + 1.0) / (self.resolved.n + 2.0)

    @property
    def share(self) -> float:
        """The largest pre-run, as a share of the full run, that still pays: 1 - p."""
        return 1.0 - self.resolve_rate


class FailFastPolicy:
    """`worth(task_id)`: whether to pre-run; `observe(task_id, result)` after each grading (a RewardResult);
    `mark(result)`: a result graded without the pre-run because it does not pay says so in `tests["fail_fast"]`.
    One per reward function (a trainer's lifetime): memory is one entry per task seen."""

    def __init__(self) -> None:
        self._tasks: dict[str, _TaskCost] = {}

    def worth(self, task_id: str) -> bool:
        seen = self._tasks.get(task_id)
        if seen is None or not seen.pre.n or not seen.full.n:
            return True
        return seen.pre.value < seen.share * seen.full.value

    def observe(self, task_id: str, result: Any) -> None:
        """Learn from a grading that ran (an infrastructure failure or a shared result teaches nothing)."""
        cost = (result.tests or {}).get("cost") or {}
        if result.reward is None or cost.get("dedup_hit"):
            return
        seen = self._tasks.setdefault(task_id, _TaskCost())
        seen.resolved.add(1.0 if result.resolved else 0.0)
        if "failfast" in cost:
            seen.pre.add(float(cost["failfast"]))
        if "test_run" in cost:
            seen.full.add(float(cost["test_run"]))

    def mark(self, task_id: str, result: Any) -> Any:
        seen = self._tasks[task_id]
        why = (
            f"pre-run {seen.pre.value:.2f} s >= (1 - resolve rate {seen.resolve_rate:.2f}) x full test run "
            f"{seen.full.value:.2f} s"
        )
        tests = {**result.tests, "fail_fast": {"pre_run": "not_worth", "why": why}}
        return dataclasses.replace(result, tests=tests)
