"""`rollout_one`: one episode plus its reward, and the single boundary where exceptions become data.

Everything below this function (sandbox start, agent turns, policy calls, grading) may raise; nothing above it
(the pools, the trainer, the evaluation harness) ever sees an exception from an episode. A failure is recorded
in the trajectory as exit_status="error", the traceback in `error`, and reward None (masked, never scored 0).
"""

from __future__ import annotations

import asyncio
import inspect
import time
import traceback
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any, Protocol

from sandboxes.base import Sandbox
from swe_rl.agent.trajectory import Trajectory
from swe_rl.grading import RewardResult, prepare_sandbox
from swe_rl.policy.base import Policy
from swe_rl.tasks.task import Task

# A fresh, not yet started sandbox for one task (at the task's image); rollout_one enters it with `async with`.
SandboxFactory = Callable[[Task], Sandbox]
# Grades a patch for a task; sync or async. Infrastructure failures are RewardResult(reward=None, failure=...).
RewardFn = Callable[[Task, str], "RewardResult | Awaitable[RewardResult]"]


class EpisodeFn(Protocol):
    """The agent loop's signature (swe_rl.agent's run_episode): one episode in a started sandbox."""

    async def __call__(
        self, task: Task, sandbox: Sandbox, policy: Policy, tokenizer: Any, cfg: Any, *, sample_idx: int = 0
    ) -> Trajectory: ...


class PolicyProvider(Protocol):
    """What a rollout worker holds: a tokenizer, a policy per episode, and a way to load new weights."""

    tokenizer: Any

    def policy_for(self, task: Task, sample_idx: int) -> Policy: ...

    def set_state(self, state_dict: Any) -> None: ...


def default_episode_fn() -> EpisodeFn:
    # Imported here so the rollout package imports without the agent (and its tools) until an episode runs.
    from swe_rl.agent.loop import run_episode

    return run_episode


@dataclass
class EpisodeContext:
    """Everything one worker needs to run episodes; built once per worker (per Ray actor, or in-process)."""

    policy: PolicyProvider
    sandbox_factory: SandboxFactory
    agent_cfg: Any
    reward_fn: RewardFn | None = None  # None: trajectories come back ungraded (reward None, graded later)
    episode_fn: EpisodeFn | None = None  # None: swe_rl.agent.loop.run_episode
    aclose: Callable[[], Awaitable[None]] | None = (
        None  # releases what the context holds (a warm sandbox pool)
    )
    prepare: bool = True  # False when the factory's sandboxes hold the task's repo already (trainer slots)

    async def close(self) -> None:
        if self.aclose is not None:
            await self.aclose()

    async def run(self, task: Task, sample_idx: int) -> Trajectory:
        return await rollout_one(
            task,
            sample_idx,
            self.policy.policy_for(task, sample_idx),
            self.sandbox_factory,
            self.agent_cfg,
            self.reward_fn,
            tokenizer=self.policy.tokenizer,
            episode_fn=self.episode_fn,
            prepare=self.prepare,
        )


def error_trajectory(task_id: str, sample_idx: int, error: str, **metrics: Any) -> Trajectory:
    """The record of an episode that failed for infrastructure reasons: no reward, never scored 0."""
    return Trajectory(
        task_id=task_id,
        sample_idx=sample_idx,
        exit_status="error",
        truncated=True,
        reward=None,
        error=error,
        metrics=dict(metrics),
    )


def infra_label(e: BaseException) -> str:
    """A short label for why an episode failed: the policy server's or the sandbox error's kind (its cause chain is
    searched, since the agent wraps what it hits), else "episode_error"."""
    from sandboxes.base import (
        EngineUnreachableError,
        SandboxDiedError,
        SandboxError,
        SandboxStartError,
        SandboxTimeoutError,
    )
    from swe_rl.policy.openai import PolicyServerError

    labels = [
        (PolicyServerError, "policy_server_error"),
        (SandboxStartError, "sandbox_start_failed"),
        (EngineUnreachableError, "engine_unreachable"),
        (SandboxDiedError, "sandbox_died"),
        (SandboxTimeoutError, "sandbox_timeout"),
        (SandboxError, "sandbox_error"),
    ]
    seen: BaseException | None = e
    for _ in range(8):
        if seen is None:
            break
        for kind, label in labels:
            if isinstance(seen, kind):
                return label
        seen = seen.__cause__ or seen.__context__
    return "episode_error"


async def rollout_one(
    task: Task,
    sample_idx: int,
    policy: Policy,
    sandbox_factory: SandboxFactory,
    agent_cfg: Any,
    reward_fn: RewardFn | None,
    *,
    tokenizer: Any = None,
    episode_fn: EpisodeFn | None = None,
    prepare: bool = True,
) -> Trajectory:
    """Run one episode of `task` and grade its patch. Never raises except on cancellation (Ctrl-C, shutdown).

    With `prepare` the fresh sandbox first gets what the task needs before an agent sees it (a generated task's
    repo from metadata.files, metadata.setup_script); pass False for sandboxes that hold the repo already.

    metrics gets rollout_s and grading_s; `metrics["grading"]` holds the grader's failure label, test report and
    `suspicious` reasons (and, when not resolved, the tail of the test log).
    """
    t0 = time.monotonic()
    run = episode_fn or default_episode_fn()
    try:
        async with sandbox_factory(task) as sandbox:
            # a generated task's repo (metadata.files) and a setup script (R2E-Gym hides its tests) come first
            if prepare:
                await prepare_sandbox(sandbox, task)
            traj = await run(task, sandbox, policy, tokenizer, agent_cfg, sample_idx=sample_idx)
    except asyncio.CancelledError:
        raise
    except Exception as e:
        # The agent attaches its partial trajectory (turns so far) to infrastructure errors: keep it for debugging.
        partial = getattr(e, "trajectory", None)
        failed = error_trajectory(
            task.instance_id,
            sample_idx,
            traceback.format_exc(),
            rollout_s=time.monotonic() - t0,
            infra_failure=infra_label(e),
        )
        if isinstance(partial, Trajectory):
            partial.exit_status, partial.truncated, partial.terminated = "error", True, False
            partial.reward, partial.resolved, partial.error = None, False, failed.error
            partial.sample_idx = sample_idx
            partial.metrics.update(failed.metrics)
            return partial
        return failed
    traj.task_id = task.instance_id
    traj.sample_idx = sample_idx
    traj.metrics["rollout_s"] = time.monotonic() - t0
    if traj.exit_status == "error" or reward_fn is None:
        traj.reward = None
        return traj
    await _grade_into(traj, task, reward_fn)
    return traj


# characters of an unresolved episode's test log kept in metrics["grading"]["log_tail"]
GRADING_LOG_TAIL = 3000


async def _grade_into(traj: Trajectory, task: Task, reward_fn: RewardFn) -> None:
    t0 = time.monotonic()
    if not traj.patch.strip():
        # An empty patch cannot resolve an issue (its FAIL_TO_PASS tests fail on the base commit): score 0 without
        # spending a container on it. This is a policy outcome, not an infrastructure failure.
        result = RewardResult(reward=0.0, resolved=False, failure=None)
    else:
        try:
            result = await _call_reward(reward_fn, task, traj.patch)
        except asyncio.CancelledError:
            raise
        except Exception:
            traj.reward, traj.resolved = None, False
            traj.error = traceback.format_exc()
            traj.metrics["grading"] = {"failure": "grader_exception", "tests": {}}
            traj.metrics["grading_s"] = time.monotonic() - t0
            return
    traj.reward, traj.resolved = result.reward, bool(result.resolved)
    traj.metrics["grading"] = {"failure": result.failure, "tests": result.tests}
    # the `suspicious` label (swe_rl.grading.reward): the trainers' reward policy and integrity metrics read it
    traj.metrics["grading"]["suspicious"] = list(getattr(result, "suspicious", ()))
    if not result.resolved and result.log:  # why it failed, for whoever reads the trajectory or eval record
        traj.metrics["grading"]["log_tail"] = result.log[-GRADING_LOG_TAIL:]
    traj.metrics["grading_s"] = time.monotonic() - t0


async def _call_reward(reward_fn: RewardFn, task: Task, patch: str) -> RewardResult:
    # Called in a thread: a sync grader blocks (docker SDK, subprocess) and must not stall the worker's other
    # episodes; an async grader just returns its coroutine there, which is awaited on this loop.
    result = await asyncio.to_thread(reward_fn, task, patch)
    if inspect.isawaitable(result):
        result = await result
    return result  # type: ignore[return-value]
