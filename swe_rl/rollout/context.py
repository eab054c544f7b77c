"""`RolloutSpec`: a picklable recipe for an EpisodeContext, built once inside each worker (Ray actor).

Ray ships the spec (plain configs), never live models or sockets; each actor builds its own policy (or a client
of a served one), its sandbox factory and its grader. Calling the spec returns the context.
"""

from __future__ import annotations

import copy
import uuid
from typing import Any

from pydantic import Field

from swe_rl.agent.config import AgentConfig
from swe_rl.config import ConfigError, StrictModel
from swe_rl.rollout.episode import EpisodeContext, RewardFn, SandboxFactory
from swe_rl.rollout.policies import PolicySpec, ScriptedPolicySpec
from swe_rl.tasks.task import Task

# Seconds a sandbox lives beyond its episode's own budget (start, slow engine calls, the grader's apply chain).
TTL_MARGIN_S = 600.0


def episode_ttl(agent: AgentConfig, grade_timeout_s: float, margin_s: float = TTL_MARGIN_S) -> float:
    """The TTL a sandbox of one episode needs: the agent's wall clock and its setup steps (tool install, base
    commit, patch), the grader's test run, and a margin. The agent's and the grader's sandboxes both get it."""
    return agent.max_wall_s + 3 * agent.setup_timeout_s + grade_timeout_s + margin_s


def _sized(cfg: Any, ttl: float | None) -> Any:
    """`cfg` with its Docker TTL set to `ttl` (when the config does not set one); a shorter explicit ttl fails."""
    from sandboxes.config import DockerSandboxConfig, RaySandboxConfig

    if ttl is None:
        return cfg
    if isinstance(cfg, RaySandboxConfig):
        return cfg.model_copy(update={"inner": _sized(cfg.inner, ttl)})
    if not isinstance(cfg, DockerSandboxConfig):
        return cfg
    if "ttl" in cfg.model_fields_set:
        if cfg.ttl < ttl:
            raise ConfigError(
                f"sandbox.ttl={cfg.ttl:g}s is shorter than one episode's budget ({ttl:g}s: agent.max_wall_s + "
                "3 x agent.setup_timeout_s + grading timeout + margin); raise it or leave it unset"
            )
        return cfg
    return cfg.model_copy(update={"ttl": ttl})


class TaskSandboxFactory:
    """SandboxFactory: a sandbox at the task's image (the config's image when the task names none), from the warm
    pool when `warm_pool.size` > 0 (Docker). With `expect_grading`, taking an episode's sandbox announces its
    grading sandbox to the pool, which starts it while the agent works; `grading()` is the grader's factory."""

    def __init__(
        self,
        sandbox_cfg: Any,
        run_id: str | None = None,
        *,
        ttl: float | None = None,
        expect_grading: bool = False,
    ):
        from sandboxes.config import DockerSandboxConfig, parse_sandbox_config

        self.cfg = _sized(parse_sandbox_config(sandbox_cfg), ttl)
        self.run_id = run_id
        self.pool: Any = None
        self._then_expect = int(expect_grading)
        if isinstance(self.cfg, DockerSandboxConfig) and self.cfg.warm_pool.size > 0:
            from sandboxes.pool import WarmPool

            self.pool = WarmPool(self.cfg, run_id=run_id)

    def __call__(self, task: Task) -> Any:
        from sandboxes.config import make_sandbox

        if self.pool is not None:
            return self.pool.sandbox(task.image or None, then_expect=self._then_expect)
        labels = {"swe-rl.task": task.instance_id}
        return make_sandbox(self.cfg, image=task.image or None, run_id=self.run_id, labels=labels)

    def grading(self) -> TaskSandboxFactory:
        """The same sandboxes and pool, without announcing further hand-outs."""
        view = copy.copy(self)
        view._then_expect = 0
        return view

    async def aclose(self) -> None:
        if self.pool is not None:
            await self.pool.close()


def task_sandbox_factory(
    sandbox_cfg: dict[str, Any], run_id: str | None = None, *, ttl: float | None = None
) -> TaskSandboxFactory:
    """Sandbox at the task's image; `ttl`: the episode budget its containers must outlive (episode_ttl)."""
    return TaskSandboxFactory(sandbox_cfg, run_id, ttl=ttl)


def grading_reward_fn(
    sandbox_factory: SandboxFactory,
    timeout_s: float | None = None,
    *,
    fail_fast: bool = False,
    gold_factor: float | None = None,
    timeout_floor_s: float | None = None,
) -> RewardFn:
    """Our grader (swe_rl.grading.grader) with sandboxes from `sandbox_factory`; `fail_fast` (training only:
    evaluation reports keep every test's result) stops at a failing FAIL_TO_PASS test (swe_rl.grading.failfast),
    for each task whose pre-run pays for itself (swe_rl.grading.failfast_policy, learned from these gradings).
    `gold_factor` (training only): each task's test-run limit is that many times gold's own test time, at least
    `timeout_floor_s` (default 60 s), at most `timeout_s` (swe_rl.grading.task_timeout)."""
    from swe_rl.grading import EVAL_TIMEOUT, FailFastPolicy, grade, task_timeout

    policy = FailFastPolicy() if fail_fast else None
    floor = {} if timeout_floor_s is None else {"floor": timeout_floor_s}

    async def reward(task: Task, patch: str) -> Any:
        first = policy is not None and policy.worth(task.instance_id)
        limit = task_timeout(task, timeout_s or EVAL_TIMEOUT, gold_factor, **floor)
        result = await grade(task, patch, sandbox_factory, timeout=limit, fail_fast=first)
        if policy is not None:
            policy.observe(task.instance_id, result)
            result = result if first else policy.mark(task.instance_id, result)
        return result

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
    grade_timeout_s: float = Field(default=1800.0, gt=0)  # the grader's test-run timeout (swebench's default)
    size_ttl: bool = True  # sandbox TTL from the episode's budget (episode_ttl) unless sandbox.ttl is set
    ttl_margin_s: float = Field(
        default=TTL_MARGIN_S, ge=0
    )  # seconds of that TTL beyond the agent's and grader's budgets

    def with_warm_pool(self, size: int | None, reuse: bool | None) -> RolloutSpec:
        """This spec with the rollout config's warm-pool settings merged into its sandbox config (None: keep)."""
        if size is None and reuse is None:
            return self
        if self.sandbox.get("backend", "docker") != "docker":
            raise ConfigError(
                f"pool.warm_sandboxes needs the docker sandbox backend, not {self.sandbox['backend']!r}"
            )
        # refill "expected": one image per task, so only the announced grading sandboxes are worth pre-starting
        warm = {"refill": "expected", **(self.sandbox.get("warm_pool") or {})}
        warm |= {k: v for k, v in (("size", size), ("reuse", reuse)) if v is not None}
        return self.model_copy(update={"sandbox": {**self.sandbox, "warm_pool": warm}})

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
        ttl = episode_ttl(self.agent, self.grade_timeout_s, self.ttl_margin_s) if self.size_ttl else None
        factory = TaskSandboxFactory(self.sandbox, self.run_id, ttl=ttl, expect_grading=self.grade)
        return EpisodeContext(
            policy=self.policy.build(),
            sandbox_factory=factory,
            agent_cfg=self.agent,
            reward_fn=grading_reward_fn(factory.grading(), self.grade_timeout_s) if self.grade else None,
            aclose=factory.aclose,
        )
