"""`RolloutPool`: episodes (task × sample) spread over Ray actors, streamed back as they finish.

    with RolloutPool(PoolConfig(num_actors=2, episodes_per_actor=4), context_factory) as pool:
        for traj in pool.run(tasks, n_samples=8):      # Iterator[Trajectory], completion order
            ...
        pool.set_policy_state(model.state_dict())      # between steps: every actor loads the new weights

Each actor holds at most `episodes_per_actor` episodes (sandbox concurrency is the limit that matters). When an
actor dies (OOM, node lost, killed), each of its in-flight episodes is put back at the head of the queue and run
by another actor, and a replacement actor is started: every (task, sample) yields exactly one trajectory.
Episodes go only to actors that are placed and running: a replacement that no node can take (its node lost, no CPU
or `sandbox` left) gets none, and after `placement_timeout` it is given up; episodes then wait for a running actor,
or, when none is left, end as infrastructure failures labelled `actor_unplaceable` (reward None, masked) instead
of waiting for ever. Where the cluster has nodes advertising `sandbox`, actors that run their own containers
(docker/local sandbox backend) are placed only there (docs/cluster.md "Which node runs what").
Episode failures never reach here as exceptions: rollout_one turns them into error trajectories.
"""

from __future__ import annotations

import contextlib
import os
import sys
import time
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
    """Join `cfg.ray_address` (or RAY_ADDRESS), else start a private local Ray advertising `sandbox_slots` of the
    `sandbox` resource (sandboxes/raystart.connect_ray: one rule for every command). True if this call did."""
    from sandboxes.raystart import connect_ray

    # at least what the actors ask (actor_resources below): a local Ray never leaves an actor unplaceable
    slots = max(cfg.sandbox_slots, float(cfg.num_actors * cfg.episodes_per_actor))
    local = {"num_cpus": cfg.ray_num_cpus or os.cpu_count() or 1, "resources": {"sandbox": slots}}
    return connect_ray(
        cfg.ray_address, purpose="rollout pool", local=local, log_to_driver=False, configure_logging=False
    )


class RolloutPool:
    """Ray actors running episodes. Safe to iterate `run` many times (one training step each)."""

    def __init__(
        self,
        cfg: PoolConfig,
        context_factory: Callable[[], EpisodeContext],
        cleanup: Callable[[], object] | None = None,
        sandbox_in_actor: bool = False,
    ):
        """cleanup: called after an actor died and at close, e.g. RolloutSpec.reap_orphans (its containers).
        sandbox_in_actor: the actors start their own containers (make_pool says so for docker/local sandboxes)."""
        import ray

        self.cfg = cfg
        self._context_factory = context_factory
        self._cleanup = cleanup
        self._started_ray = ensure_ray(cfg)
        self._resources = actor_resources(cfg, sandbox_in_actor, ray.cluster_resources())
        self._policy_state: Any = (
            None  # ObjectRef of the last set_policy_state: replacement actors load it too
        )
        self._placing: dict[Any, tuple[float, Any]] = {}  # actor -> (created at, its pid() ref) until it runs
        self._restarts = 0
        self._last_death = ""
        self.lost: dict[str, int] = {"actors_died": 0, "actors_unplaceable": 0, "episodes_rerun": 0}
        self._actors: list[Any] = [self._new_actor() for _ in range(cfg.num_actors)]

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
            resources=self._resources or None,
            max_concurrency=self.cfg.episodes_per_actor,
            max_restarts=0,  # we replace dead actors ourselves and re-run their episodes exactly once
            max_task_retries=0,
            scheduling_strategy="SPREAD" if self.cfg.scheduling == "spread" else "DEFAULT",
        ).remote(self._context_factory)
        # It gets episodes once this answers (the pool's _check_placement): with weights set, once they are
        # loaded (an async actor does not order calls: no episode may start before); else its pid.
        ready = (
            actor.pid.remote()
            if self._policy_state is None
            else actor.set_policy_state.remote(self._policy_state)
        )
        self._placing[actor] = (time.monotonic(), ready)
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
                    self._check_placement(load)
                    if pending and not self._actors and self.lost["actors_unplaceable"]:
                        # no actor runs and none can be placed: these end here, labelled, instead of waiting
                        traj = self._unplaceable(pending.popleft())
                        done.add((traj.task_id, traj.sample_idx))
                        bar.advance(traj)
                        yield traj
                        continue
                    self._fill(pending, inflight, load)
                    if not inflight:
                        time.sleep(0.5)  # episodes wait for an actor being placed
                        continue
                    ready, _ = ray.wait(list(inflight), num_returns=1, timeout=2.0)
                    for ref in ready:
                        actor, item = inflight.pop(ref)
                        try:
                            traj = ray.get(ref)
                        except (RayActorError, TaskCancelledError) as e:
                            pending.appendleft(item)  # the actor is gone: run this episode elsewhere
                            self.lost["episodes_rerun"] += 1
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
                if any(self.lost.values()):  # what node or process losses cost this run, in one line
                    print("rollout pool: " + ", ".join(f"{k.replace('_', ' ')} {v}" for k, v in self.lost.items()),
                          file=sys.stderr, flush=True)  # fmt: skip

    def _fill(
        self, pending: deque[Item], inflight: dict[Any, tuple[Any, Item]], load: dict[Any, int]
    ) -> None:
        if not self._actors:
            raise RuntimeError(
                f"all rollout actors died and the restart budget (max_actor_restarts={self.cfg.max_actor_restarts}) "
                f"is spent; last death: {self._last_death[-2000:]}"
            )
        running = self._running()
        while pending and running:
            actor = min(running, key=lambda a: load.get(a, 0))
            if load.get(actor, 0) >= self.cfg.episodes_per_actor:
                return
            task, idx = pending.popleft()
            inflight[actor.run.remote(task, idx)] = (actor, (task, idx))
            load[actor] = load.get(actor, 0) + 1

    def _check_placement(self, load: dict[Any, int]) -> None:
        """Actors whose pid() answered are running; a stillborn one is replaced; one still waiting for a node
        after placement_timeout is given up (killed, not replaced: its episodes go to the running actors)."""
        import ray
        from ray.exceptions import RayActorError

        for actor, (born, ref) in list(self._placing.items()):
            if ray.wait([ref], timeout=0)[0]:
                del self._placing[actor]
                try:
                    ray.get(ref)
                except RayActorError as e:  # its constructor failed, or its node died before it ran
                    self._last_death = f"{type(e).__name__}: {e}"
                    self._replace(actor, load)
            elif time.monotonic() - born > self.cfg.placement_timeout:
                del self._placing[actor]
                self._actors.remove(actor)
                load.pop(actor, None)
                self.lost["actors_unplaceable"] += 1
                with contextlib.suppress(Exception):
                    ray.kill(actor, no_restart=True)
                print(f"rollout pool: an actor needing {self._needs()} was not placed within "
                      f"{self.cfg.placement_timeout:.0f} s (pool.placement_timeout); {len(self._actors)} actors "
                      f"left{'' if self._actors else ': the remaining episodes end as actor_unplaceable'}",
                      file=sys.stderr, flush=True)  # fmt: skip

    def _needs(self) -> dict[str, float]:
        return {"CPU": self.cfg.actor_num_cpus, **self._resources}

    def _unplaceable(self, item: Item) -> Trajectory:
        task, idx = item
        why = f"no rollout actor could be placed within {self.cfg.placement_timeout:.0f} s (needs {self._needs()})"
        return error_trajectory(
            task.instance_id, idx, f"{why}; last actor death: {self._last_death[-500:]}",
            infra_failure="actor_unplaceable",
        )  # fmt: skip

    def _replace(self, actor: Any, load: dict[Any, int]) -> None:
        if actor not in self._actors:
            return  # already replaced (several of its episodes surface one by one)
        self._actors.remove(actor)
        self._placing.pop(actor, None)
        self.lost["actors_died"] += 1
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
        from ray.exceptions import RayActorError

        self._policy_state = ray.put(state_dict)
        for a, (born, _) in list(self._placing.items()):  # runs once placed, and only then gets episodes
            self._placing[a] = (born, a.set_policy_state.remote(self._policy_state))
        for ref in [a.set_policy_state.remote(self._policy_state) for a in self._running()]:
            with contextlib.suppress(RayActorError):  # died meanwhile: its next episode is re-run elsewhere
                ray.get(ref)

    def _running(self) -> list[Any]:
        return [a for a in self._actors if a not in self._placing]

    def _cancel_all(self) -> None:
        import ray

        from swe_rl.rollout.worker import CONTROL

        with contextlib.suppress(Exception):
            ray.get(
                [a.shutdown.options(concurrency_group=CONTROL).remote() for a in self._running()], timeout=60
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
    in_actor = isinstance(context_factory, RolloutSpec) and context_factory.sandbox.get("backend") != "ray"
    return RolloutPool(cfg, context_factory, cleanup, sandbox_in_actor=in_actor)


def actor_resources(cfg: PoolConfig, sandbox_in_actor: bool, cluster: dict[str, float]) -> dict[str, float]:
    """What each rollout actor asks of Ray beside its CPUs: pool.actor_resources, else the `sandbox` slots of
    its episodes when it starts containers itself and some node advertises `sandbox` (then only such nodes run
    containers, never a head or GPU node without it); RaySandboxes are placed on their own."""
    if cfg.actor_resources is not None:
        return dict(cfg.actor_resources)
    if sandbox_in_actor and cluster.get("sandbox", 0) > 0:
        return {"sandbox": float(cfg.episodes_per_actor)}
    return {}
