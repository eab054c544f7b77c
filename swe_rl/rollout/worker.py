"""`RolloutWorker`: the body of one Ray rollout actor (a plain class; the pool wraps it with `ray.remote`).

It builds its EpisodeContext once (policy, sandbox factory, grader) from a picklable zero-argument factory and
runs up to `max_concurrency` episodes at once on its event loop (Ray async actor). `shutdown` cancels the running
episodes so their sandboxes close before the process is killed: no container outlives a pool. The pool calls it in
a concurrency group of its own (CONTROL), so it is served while every episode slot is taken.
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import Callable
from typing import Any

from swe_rl.agent.trajectory import Trajectory
from swe_rl.rollout.episode import EpisodeContext
from swe_rl.tasks.task import Task

CONTROL = "control"  # the actor's concurrency group for calls that must not wait for an episode slot


def _node_name() -> str | None:
    """This actor's node as "<ip> <node id, 8 hex>" (the id tells apart nodes that share an address); None
    outside Ray."""
    import ray

    if not ray.is_initialized():
        return None
    return f"{ray.util.get_node_ip_address()} {ray.get_runtime_context().get_node_id()[:8]}"


class RolloutWorker:
    def __init__(self, context_factory: Callable[[], EpisodeContext]):
        self._ctx = context_factory()
        self._node = _node_name()
        self._running: set[asyncio.Task[Any]] = set()
        self._loop: asyncio.AbstractEventLoop | None = None  # the episodes' loop

    async def run(self, task: Task, sample_idx: int) -> Trajectory:
        self._loop = asyncio.get_running_loop()
        current = asyncio.current_task()
        if current is not None:
            self._running.add(current)
        try:
            traj = await self._ctx.run(task, sample_idx)
        finally:
            self._running.discard(current)  # type: ignore[arg-type]
        traj.metrics["worker_pid"] = os.getpid()
        if self._node is not None:  # report.json's per_node: which node's episodes failed or resolved
            traj.metrics["worker_node"] = self._node
        return traj

    def pid(self) -> int:
        return os.getpid()

    def set_policy_state(self, state_dict: Any) -> None:
        self._ctx.policy.set_state(state_dict)

    async def shutdown(self) -> int:
        """Cancel running episodes, wait until their sandboxes are closed, drain the context's warm pool; returns
        how many episodes were cancelled. Called in a concurrency group of its own (the pool's CONTROL), whose
        event loop is not the episodes': the work is done on theirs."""
        loop = self._loop
        if loop is None or loop is asyncio.get_running_loop() or loop.is_closed():
            return await self._shutdown_here()
        return await asyncio.wrap_future(asyncio.run_coroutine_threadsafe(self._shutdown_here(), loop))

    async def _shutdown_here(self) -> int:
        tasks = [t for t in self._running if t is not asyncio.current_task()]
        for t in tasks:
            t.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        await self._ctx.close()  # drain the warm sandbox pool, if any
        return len(tasks)
