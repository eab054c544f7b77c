"""`RolloutPool`: episodes (task × sample) spread over Ray actors, streamed back as they finish.

    with RolloutPool(PoolConfig(num_actors=2, episodes_per_actor=4), context_factory) as pool:
        for traj in pool.run(tasks, n_samples=8):      # Iterator[Trajectory], completion order
            ...
        pool.set_policy_state(model.state_dict())      # between steps: every actor loads the new weights

Each actor holds at most `episodes_per_actor` episodes (sandbox concurrency is the limit that matters). When an
actor dies (OOM, node lost, killed), each of its in-flight episodes is put back at the head of the queue and run
by another actor, and a replacement actor is started: every (task, sample) yields exactly one trajectory.
Episode failures never reach here as exceptions: rollout_one turns them into error trajectories.
"""

from __future__ import annotations

import contextlib
import os
import traceback
from collections import deque
from collections.abc import Callable, Iterable, Iterator
from typing import Any

from swe_rl.agent.trajectory import Trajectory
from swe_rl.rollout.config import PoolConfig
from swe_rl.rollout.episode import EpisodeContext, error_trajectory
from swe_rl.rollout.progress import EpisodeProgress
from swe_rl.tasks.task import Task

Item = tuple[Task, int]  # (task, sample_idx)


def ensure_ray(cfg: PoolConfig) -> bool:
    """Connect to `cfg.ray_address`, or start a local Ray without dashboard. True if this call started Ray."""
    import ray

    if ray.is_initialized():
        return False
    # Opt in to Ray's future behaviour (leave CUDA_VISIBLE_DEVICES alone for 0-GPU actors); silences its warning.
    os.environ.setdefault("RAY_ACCEL_ENV_VAR_OVERRIDE_ON_ZERO", "0")
    if cfg.ray_address:
        ray.init(address=cfg.ray_address, log_to_driver=False, configure_logging=False)
    else:
        from sandboxes.raystart import init_local_ray

        init_local_ray(
            num_cpus=cfg.ray_num_cpus or os.cpu_count() or 1,
            resources={"sandbox": cfg.sandbox_slots},
            include_dashboard=False,
            log_to_driver=False,
            configure_logging=False,
        )
    return True


class RolloutPool:
    """Ray actors running episodes. Safe to iterate `run` many times (one training step each)."""

    def __init__(
        self,
        cfg: PoolConfig,
        context_factory: Callable[[], EpisodeContext],
        cleanup: Callable[[], object] | None = None,
    ):
        """cleanup: called after an actor died and at close, e.g. RolloutSpec.reap_orphans (its containers)."""
        self.cfg = cfg
        self._context_factory = context_factory
        self._cleanup = cleanup
        self._started_ray = ensure_ray(cfg)
        self._policy_state: Any = (
            None  # ObjectRef of the last set_policy_state: replacement actors load it too
        )
        self._actors: list[Any] = [self._new_actor() for _ in range(cfg.num_actors)]
        self._restarts = 0
        self._last_death = ""

    @property
    def actors(self) -> list[Any]:
        """Live actor handles (for fault tests and diagnostics)."""
        return list(self._actors)

    def _new_actor(self) -> Any:
        import ray

        from swe_rl.rollout.worker import CONTROL, RolloutWorker

        # Control calls (shutdown) get a group of their own: in the default group they would queue behind the
        # episodes that fill every slot, and an episode that never returns (a hung model server, a stuck tool)
        # would hold Ctrl-C's shutdown until the pool gave up and killed the actor with its containers alive.
        remote: Any = ray.remote  # its typed overloads omit the documented concurrency_groups keyword
        remote_cls = remote(concurrency_groups={CONTROL: 2})(RolloutWorker)
        actor: Any = remote_cls.options(
            num_cpus=self.cfg.actor_num_cpus,
            max_concurrency=self.cfg.episodes_per_actor,
            max_restarts=0,  # we replace dead actors ourselves and re-run their episodes exactly once
            max_task_retries=0,
        ).remote(self._context_factory)
        if self._policy_state is not None:
            # Waited for: an async actor does not order calls, so no episode may start before the weights load.
            from ray.exceptions import RayActorError

            with contextlib.suppress(RayActorError):  # a stillborn actor: its episodes fail and are re-run
                ray.get(actor.set_policy_state.remote(self._policy_state))
        return actor

    def run(self, tasks: Iterable[Task], n_samples: int = 1) -> Iterator[Trajectory]:
        """n_samples episodes per task, sample_idx 0..n-1, yielded as they finish."""
        return self.run_items([(t, i) for t in tasks for i in range(n_samples)])

    def run_items(self, items: Iterable[Item]) -> Iterator[Trajectory]:
        import ray
        from ray.exceptions import RayActorError, TaskCancelledError

        pending: deque[Item] = deque(items)
        inflight: dict[Any, tuple[Any, Item]] = {}
        load: dict[Any, int] = {a: 0 for a in self._actors}
        done: set[tuple[str, int]] = set()
        with EpisodeProgress(len(pending), self.cfg.progress) as bar:
            try:
                while pending or inflight:
                    self._fill(pending, inflight, load)
                    ready, _ = ray.wait(list(inflight), num_returns=1, timeout=5.0)
                    for ref in ready:
                        actor, item = inflight.pop(ref)
                        try:
                            traj = ray.get(ref)
                        except (RayActorError, TaskCancelledError) as e:
                            pending.appendleft(item)  # the actor is gone: run this episode elsewhere
                            self._last_death = f"{type(e).__name__}: {e}"
                            self._replace(actor, load)
                            continue
                        except Exception:
                            traj = error_trajectory(item[0].instance_id, item[1], traceback.format_exc())
                        load[actor] = load.get(actor, 1) - 1
                        key = (item[0].instance_id, item[1])
                        if key in done:
                            continue  # defensive: never hand the same episode out twice
                        done.add(key)
                        bar.advance(traj)
                        yield traj
            finally:
                if inflight:  # abandoned (Ctrl-C, consumer stopped): close every running episode's sandbox
                    self._cancel_all()

    def _fill(
        self, pending: deque[Item], inflight: dict[Any, tuple[Any, Item]], load: dict[Any, int]
    ) -> None:
        if not self._actors:
            raise RuntimeError(
                f"all rollout actors died and the restart budget (max_actor_restarts={self.cfg.max_actor_restarts}) "
                f"is spent; last death: {self._last_death[-2000:]}"
            )
        while pending:
            actor = min(self._actors, key=lambda a: load.get(a, 0))
            if load.get(actor, 0) >= self.cfg.episodes_per_actor:
                return
            task, idx = pending.popleft()
            inflight[actor.run.remote(task, idx)] = (actor, (task, idx))
            load[actor] = load.get(actor, 0) + 1

    def _replace(self, actor: Any, load: dict[Any, int]) -> None:
        if actor not in self._actors:
            return  # already replaced (several of its episodes surface one by one)
        self._actors.remove(actor)
        load.pop(actor, None)
        self._run_cleanup()
        if self._restarts < self.cfg.max_actor_restarts:
            self._restarts += 1
            new = self._new_actor()
            self._actors.append(new)
            load[new] = 0

    def _run_cleanup(self) -> None:
        if self._cleanup is not None:
            with contextlib.suppress(Exception):
                self._cleanup()

    def set_policy_state(self, state_dict: Any) -> None:
        """Ship new weights once (object store) and load them in every actor; call between `run`s."""
        import ray

        self._policy_state = ray.put(state_dict)
        ray.get([a.set_policy_state.remote(self._policy_state) for a in self._actors])

    def _cancel_all(self) -> None:
        import ray

        from swe_rl.rollout.worker import CONTROL

        with contextlib.suppress(Exception):
            ray.get(
                [a.shutdown.options(concurrency_group=CONTROL).remote() for a in self._actors], timeout=60
            )

    def close(self) -> None:
        import ray

        self._cancel_all()
        for a in self._actors:
            ray.kill(a, no_restart=True)
        self._actors = []
        self._run_cleanup()
        if self._started_ray:
            ray.shutdown()

    def __enter__(self) -> RolloutPool:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def make_pool(
    cfg: PoolConfig,
    context_factory: Callable[[], EpisodeContext],
    cleanup: Callable[[], object] | None = None,
) -> Any:
    """RolloutPool (backend "ray") or LocalRolloutPool (backend "local"); both: run, run_items, set_policy_state.

    A RolloutSpec gets the pool config's warm-pool settings (warm_sandboxes, reuse_sandboxes) merged in."""
    from swe_rl.rollout.context import RolloutSpec

    if isinstance(context_factory, RolloutSpec):
        context_factory = context_factory.with_warm_pool(cfg.warm_sandboxes, cfg.reuse_sandboxes)
    if cfg.backend == "local":
        from swe_rl.rollout.local import LocalRolloutPool

        return LocalRolloutPool(context_factory, cfg.episodes_per_actor * cfg.num_actors, cfg.progress)
    return RolloutPool(cfg, context_factory, cleanup)
