"""No false positives: every gold patch must resolve with no `suspicious` label through the guarded grader.

    problems = await gold_false_positives(tasks, docker_factory())   # {instance_id: [what went wrong]}

A task's entry is empty when its gold patch resolved and nothing flagged it; otherwise it names the failure (an
unresolved gold, an infrastructure failure) or the suspicious reasons. The micro suite's test runs it over all 15
tasks; the real-instance suite calls it with its own tasks and factory.
"""

from __future__ import annotations

import asyncio

from swe_rl.tasks.grading import EVAL_TIMEOUT, SandboxFactory, grade
from swe_rl.tasks.reward import RewardResult
from swe_rl.tasks.task import Task


def gold_problems(result: RewardResult) -> list[str]:
    """What is wrong with a gold patch's grading result ([] = resolved, not suspicious)."""
    out = [] if result.resolved else [f"not resolved (failure: {result.failure})"]
    return out + list(result.suspicious)


async def gold_false_positives(
    tasks: list[Task], factory: SandboxFactory, *, workers: int = 2, timeout: float = EVAL_TIMEOUT
) -> dict[str, list[str]]:
    """Grade each task's gold patch, `workers` at a time; instance_id -> gold_problems (every task listed)."""
    sem = asyncio.Semaphore(max(1, workers))

    async def one(task: Task) -> list[str]:
        async with sem:
            return gold_problems(await grade(task, task.patch, factory, timeout=timeout))

    found = await asyncio.gather(*(one(t) for t in tasks))
    return {t.instance_id: f for t, f in zip(tasks, found, strict=True)}
