"""Bursts of episodes against real Docker: the host-wide start cap, budgets and TTLs sized per episode.

Every episode requested at once must come back graded, or as an infrastructure failure with a label (reward
None); none may expire mid-episode, and no container may be left.
"""

from __future__ import annotations

import os
import time

import pytest

from swe_rl.agent.config import AgentConfig
from swe_rl.config import ConfigError
from swe_rl.rollout.config import PoolConfig
from swe_rl.rollout.context import RolloutSpec, episode_ttl
from swe_rl.rollout.policies import ScriptedPolicySpec
from swe_rl.rollout.pool import make_pool

pytestmark = pytest.mark.docker

_AGENT = AgentConfig(max_steps=8, temperature=0.0, max_wall_s=120, setup_timeout_s=60)


def _spec(run_id: str, gate_dir: str, **sandbox) -> RolloutSpec:
    box = {"backend": "docker", "start_gate_dir": gate_dir, "max_starting": 2, "limits": {"memory": "256m"}}
    return RolloutSpec(
        policy=ScriptedPolicySpec(),
        agent=_AGENT,
        sandbox=box | sandbox,
        run_id=run_id,
        grade_timeout_s=120,
        ttl_margin_s=60,
    )


def _burst(task, n: int, spec: RolloutSpec, **pool) -> tuple[list, float]:
    cfg = PoolConfig(backend="local", num_actors=1, episodes_per_actor=n, progress=False, **pool)
    t0 = time.monotonic()
    with make_pool(cfg, spec) as p:
        trajs = list(p.run([task], n_samples=n))
    return trajs, time.monotonic() - t0


def _check(trajs: list, n: int, docker_client, run_id: str) -> dict[str, int]:
    from sandboxes.lifecycle import list_managed

    assert sorted(t.sample_idx for t in trajs) == list(range(n))
    outcome: dict[str, int] = {}
    for t in trajs:
        label = (t.metrics.get("grading") or {}).get("failure")
        if t.reward is not None:
            key = "graded"
        else:  # an infrastructure failure: labelled (error trajectory with its traceback, or a grading label)
            assert (t.exit_status == "error" and t.error) or label, (t.exit_status, t.error)
            key = label or t.metrics["infra_failure"]
        assert "ttl=" not in (t.error or "") and label != "sandbox_timeout", t.error  # nothing expired
        outcome[key] = outcome.get(key, 0) + 1
    assert list_managed(docker_client, run_id=run_id) == []
    return outcome


@pytest.mark.slow  # make test's 15-minute budget (2026-12-04: 21-29 s each); .ci/run still runs it
@pytest.mark.ci_slow
def test_burst_of_12_episodes_all_graded_with_the_warm_pool(rollout_task, tmp_path):
    """The default-suite variant: 12 at once, sandboxes from a warm pool switched on in the rollout config."""
    from sandboxes.docker_sandbox import docker_client

    run_id = f"burst12-{os.getpid()}"
    trajs, _ = _burst(rollout_task, 12, _spec(run_id, str(tmp_path)), warm_sandboxes=2)
    outcome = _check(trajs, 12, docker_client(), run_id)
    assert outcome == {"graded": 12}, outcome
    assert all(t.resolved for t in trajs)


@pytest.mark.slow
def test_burst_of_64_episodes_on_two_cores(rollout_task, tmp_path):
    """64 episodes (128 sandboxes with their gradings) at once behind a cap of 2 starting; each sandbox's TTL is one
    episode's budget (480 s here), counted from its own create, not from the burst's start (~200 s at load 17)."""
    from sandboxes.docker_sandbox import docker_client

    run_id = f"burst64-{os.getpid()}"
    trajs, wall = _burst(rollout_task, 64, _spec(run_id, str(tmp_path)))
    outcome = _check(trajs, 64, docker_client(), run_id)
    print(f"64 episodes in {wall:.0f}s: {outcome}")
    assert outcome.get("graded", 0) >= 60, outcome  # start failures, if any, are labelled (checked above)


def test_sandbox_ttl_is_sized_from_the_episode_budget():
    spec = _spec("ttl", "/tmp/unused")
    budget = episode_ttl(_AGENT, 120, 60)
    assert budget == 120 + 3 * 60 + 120 + 60
    assert spec().sandbox_factory.cfg.ttl == budget
    ray = spec.model_copy(update={"sandbox": {"backend": "ray", "inner": {"image": "x"}}})
    assert ray().sandbox_factory.cfg.inner.ttl == budget
    assert _spec("ttl", "/tmp/unused", ttl=budget + 1)().sandbox_factory.cfg.ttl == budget + 1
    with pytest.raises(ConfigError, match=r"sandbox.ttl=100s is shorter than one episode's budget"):
        _spec("ttl", "/tmp/unused", ttl=100)()


def test_episode_failures_are_labelled_by_the_sandbox_error_they_come_from():
    from sandboxes.base import EngineUnreachableError, SandboxDiedError, SandboxStartError
    from swe_rl.rollout.episode import infra_label

    def raised(outer: Exception, inner: Exception) -> Exception:
        try:
            try:
                raise inner
            except Exception as e:
                raise outer from e
        except Exception as e:
            return e

    assert (
        infra_label(SandboxStartError("no start slot free within the start budget")) == "sandbox_start_failed"
    )
    assert (
        infra_label(raised(RuntimeError("tool install failed"), SandboxDiedError("gone"))) == "sandbox_died"
    )
    assert infra_label(EngineUnreachableError("down")) == "engine_unreachable"
    assert infra_label(ValueError("a bug")) == "episode_error"
