"""`LocalRolloutPool`: the same API as RolloutPool, one asyncio loop in this process (no Ray).

For the single-process trainer (the policy object is shared with the learner, so weights need no copying) and as
the baseline the bench measures the Ray pool against. The loop runs in a background thread so `run` can be a
plain iterator; interrupting the iteration (Ctrl-C, break) cancels the running episodes, whose sandboxes close.
"""

from __future__ import annotations

import asyncio
import queue
import threading
from collections.abc import Callable, Iterable, Iterator
from typing import Any

from swe_rl.agent.trajectory import Trajectory
from swe_rl.rollout.episode import EpisodeContext
from swe_rl.rollout.pool import Item
from swe_rl.rollout.progress import EpisodeProgress
from swe_rl.tasks.task import Task

_DONE = object()


class LocalRolloutPool:
    def __init__(
        self,
        context: EpisodeContext | Callable[[], EpisodeContext],
        max_concurrency: int = 4,
        progress: bool = True,
    ):
        self._ctx = context if isinstance(context, EpisodeContext) else context()
        self.max_concurrency = max_concurrency
        self.progress = progress

    def run(self, tasks: Iterable[Task], n_samples: int = 1) -> Iterator[Trajectory]:
        return self.run_items([(t, i) for t in tasks for i in range(n_samples)])

    def run_items(self, items: Iterable[Item]) -> Iterator[Trajectory]:
        todo = list(items)
        out: queue.Queue[Any] = queue.Queue()
        loop = asyncio.new_event_loop()
        stop = asyncio.Event()
        thread = threading.Thread(
            target=self._loop_main, args=(loop, self._drive(todo, out, stop)), daemon=True
        )
        thread.start()
        try:
            with EpisodeProgress(len(todo), self.progress) as bar:
                while True:
                    got = out.get()
                    if got is _DONE:
                        break
                    if isinstance(got, BaseException):
                        raise got
                    bar.advance(got)
                    yield got
        finally:
            if thread.is_alive():
                loop.call_soon_threadsafe(
                    stop.set
                )  # cancel running episodes; their `async with` closes sandboxes
            thread.join()
            loop.close()

    @staticmethod
    def _loop_main(loop: asyncio.AbstractEventLoop, main: Any) -> None:
        asyncio.set_event_loop(loop)
        loop.run_until_complete(main)
        # Background tasks the episodes started (e.g. a batching policy's worker) end with this loop.
        leftover = asyncio.all_tasks(loop)
        for t in leftover:
            t.cancel()
        if leftover:
            loop.run_until_complete(asyncio.gather(*leftover, return_exceptions=True))

    async def _drive(self, todo: list[Item], out: queue.Queue[Any], stop: asyncio.Event) -> None:
        sem = asyncio.Semaphore(self.max_concurrency)

        async def one(task: Task, idx: int) -> None:
            async with sem:
                out.put(await self._ctx.run(task, idx))

        jobs: list[asyncio.Future[Any]] = [asyncio.ensure_future(one(t, i)) for t, i in todo]
        stopper: asyncio.Future[Any] = asyncio.ensure_future(stop.wait())
        try:
            while not stop.is_set():
                remaining = [j for j in jobs if not j.done()]
                if not remaining:
                    break
                await asyncio.wait([*remaining, stopper], return_when=asyncio.FIRST_COMPLETED)
            for j in jobs:
                if j.done() and not j.cancelled() and j.exception() is not None:
                    out.put(j.exception())  # a bug outside rollout_one's boundary: surface it, don't hide it
                    return
        finally:
            for j in [*jobs, stopper]:
                j.cancel()
            await asyncio.gather(*jobs, stopper, return_exceptions=True)
            await self._ctx.close()  # a warm sandbox pool lives on this loop: drain it before the loop ends
            out.put(_DONE)

    def set_policy_state(self, state_dict: Any) -> None:
        self._ctx.policy.set_state(state_dict)

    def close(self) -> None:
        pass

    def __enter__(self) -> LocalRolloutPool:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
