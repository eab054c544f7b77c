"""Identical patches graded once: a reward function wrapper that shares one grading among identical patches.

In GRPO a task's n samples often end with the same patch (and many with the empty one). Grading is a function
of (task, image, patch): the same normalised diff against the same task image is graded once per scope, and
every other sample of it gets that result, marked `tests["cost"]["dedup_hit"]` (its own grading cost nothing).
Concurrent duplicates wait for the one grading in flight instead of starting their own. A result without a
reward (infrastructure failure) is never reused: the next identical patch is graded afresh.

Scope: `DedupGrader.new_scope()` forgets every result; trainers call it once per step (a flaky test is then
re-drawn next step, and memory stays bounded). `max_entries` bounds a scope that is never renewed.
"""

from __future__ import annotations

import asyncio
import dataclasses
import hashlib
import inspect
import re
from collections import OrderedDict
from collections.abc import Callable
from typing import Any

from swe_rl.tasks.task import Task

_INDEX = re.compile(r"^index [0-9a-f]+\.\.[0-9a-f]+(?: \d+)?\n", re.M)


def normalize_patch(patch: str | None) -> str:
    """The patch without what cannot change its effect: `index <blob>..<blob>` lines (the blob ids follow from
    the base file and the hunks, whatever their abbreviation) and blank lines after the last hunk (the hunk
    headers' counts end each hunk). Whitespace-only is the empty patch (the grader applies nothing)."""
    if not (patch or "").strip():
        return ""
    return _INDEX.sub("", patch or "").rstrip("\n") + "\n"


def patch_key(task: Task, patch: str | None) -> tuple[str, str, str]:
    """(task, image, digest of the normalised patch): what decides a grading's result."""
    digest = hashlib.sha256(normalize_patch(patch).encode("utf-8", "surrogateescape")).hexdigest()
    return task.instance_id, task.image, digest


def mark_shared(result: Any) -> Any:
    """A copy of a RewardResult reused for an identical patch: its cost entry says the grading was shared."""
    cost = {**(result.tests.get("cost") or {}), "dedup_hit": True}
    return dataclasses.replace(result, tests={**result.tests, "cost": cost})


class DedupGrader:
    """Reward function (`await grader(task, patch)`) grading each identical patch once per scope; `reward_fn`
    is a rollout RewardFn (async, or sync: then run in a thread)."""

    def __init__(self, reward_fn: Callable[[Task, str], Any], max_entries: int = 1024):
        self.reward_fn = reward_fn
        self.max_entries = max_entries
        self._done: OrderedDict[tuple[str, str, str], Any] = OrderedDict()
        self._running: dict[tuple[str, str, str], asyncio.Future[Any]] = {}
        self.graded = 0  # gradings run
        self.saved = 0  # gradings an identical patch made unnecessary

    def new_scope(self) -> None:
        """Forget the results so far (a new step); gradings in flight finish for their own callers."""
        self._done.clear()

    def stats(self) -> dict[str, float]:
        return {"gradings_run": float(self.graded), "gradings_saved": float(self.saved)}

    async def __call__(self, task: Task, patch: str) -> Any:
        key = patch_key(task, patch)
        if key in self._done:
            self._done.move_to_end(key)
            self.saved += 1
            return mark_shared(self._done[key])
        running = self._running.get(key)
        if running is not None:
            result = await asyncio.shield(running)
            if result.reward is not None:
                self.saved += 1
                return mark_shared(result)
            return await self._grade(key, task, patch)  # an infrastructure failure is not shared
        return await self._grade(key, task, patch)

    async def _grade(self, key: tuple[str, str, str], task: Task, patch: str) -> Any:
        future: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        self._running[key] = future
        self.graded += 1
        try:
            result = await asyncio.to_thread(
                self.reward_fn, task, patch
            )  # a sync grader must not block the loop
            if inspect.isawaitable(result):
                result = await result
        except BaseException as e:
            future.set_exception(e)
            future.exception()  # retrieved: waiters re-raise it, nobody else has to
            raise
        finally:
            if self._running.get(key) is future:
                del self._running[key]
        future.set_result(result)
        if result.reward is not None:
            self._done[key] = result
            while len(self._done) > self.max_entries:
                self._done.popitem(last=False)
        return result
