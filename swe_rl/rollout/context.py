"""`RolloutSpec`: a picklable recipe for an EpisodeContext, built once inside each worker (Ray actor).

Ray ships the spec (plain configs), never live models or sockets; each actor builds its own policy (or a client
of a served one), its sandbox factory and its grader. Calling the spec returns the context.
"""

from __future__ import annotations

import uuid
from typing import Any

from pydantic import Field

from swe_rl.agent.config import AgentConfig
from swe_rl.config import StrictModel
from swe_rl.rollout.episode import EpisodeContext, RewardFn, SandboxFactory
from swe_rl.rollout.policies import PolicySpec, ScriptedPolicySpec
from swe_rl.tasks.task import Task


def task_sandbox_factory(sandbox_cfg: dict[str, Any], run_id: str | None = None) -> SandboxFactory:
    """Sandbox at the task's image (the config's image when the task names none)."""
    from sandboxes.config import make_sandbox, parse_sandbox_config

    cfg = parse_sandbox_config(sandbox_cfg)

    def factory(task: Task) -> Any:
        return make_sandbox(
            cfg, image=task.image or None, run_id=run_id, labels={"swe-rl.task": task.instance_id}
        )

    return factory


def grading_reward_fn(sandbox_factory: SandboxFactory) -> RewardFn:
    """Our grader (swe_rl.tasks.grading) with sandboxes from `sandbox_factory`."""
    from swe_rl.tasks.grading import grade

    async def reward(task: Task, patch: str) -> Any:
        return await grade(task, patch, sandbox_factory)

    return reward


class RolloutSpec(StrictModel):
    policy: PolicySpec = Field(default_factory=ScriptedPolicySpec)  # built per worker
    agent: AgentConfig = Field(default_factory=lambda: AgentConfig.model_validate({}))  # agent loop settings
    sandbox: dict[str, Any] = Field(
        default_factory=lambda: {"backend": "docker"}
    )  # sandboxes config (backend union)
    grade: bool = (
        True  # grade each patch in the worker (reward); False: trajectories come back with reward None
    )
    run_id: str = Field(
        default_factory=lambda: uuid.uuid4().hex[:12]
    )  # sandbox label grouping this pool's containers

    def reap_orphans(self) -> int:
        """Remove this run's containers whose owner process is gone (a killed actor cannot close its own).

        Only containers labelled with this spec's run_id and owned by a dead process on this host are touched;
        returns how many. A no-op without a reachable Docker engine (local backend, or containers on other nodes).
        """
        try:
            from sandboxes.docker_sandbox import docker_client
            from sandboxes.lifecycle import LABEL_RUN, list_managed, owner_alive, remove_all

            client = docker_client()
        except Exception:
            return 0
        doomed = [
            c.id
            for c in list_managed(client)
            if c.labels.get(LABEL_RUN) == self.run_id and owner_alive(c.labels) is False
        ]
        remove_all(client, doomed)
        return len(doomed)

    def __call__(self) -> EpisodeContext:
        factory = task_sandbox_factory(self.sandbox, self.run_id)
        return EpisodeContext(
            policy=self.policy.build(),
            sandbox_factory=factory,
            agent_cfg=self.agent,
            reward_fn=grading_reward_fn(factory) if self.grade else None,
        )
