"""A warm pool inside Ray rollout actors: episodes take pooled sandboxes, and shutting the pool down drains them."""

from __future__ import annotations

import os

import pytest

from swe_rl.agent.config import AgentConfig
from swe_rl.rollout.config import PoolConfig
from swe_rl.rollout.context import RolloutSpec
from swe_rl.rollout.policies import ScriptedPolicySpec
from swe_rl.rollout.pool import make_pool

pytestmark = [pytest.mark.docker, pytest.mark.ray, pytest.mark.slow]  # ~40-60 s with Ray start


def test_ray_actors_drain_their_warm_pools_at_close(rollout_task, ray_local):
    from sandboxes.docker_sandbox import docker_client
    from sandboxes.lifecycle import list_managed

    run_id = f"warm-ray-{os.getpid()}"
    box = {"backend": "docker", "warm_pool": {"size": 1, "refill": "always"}, "limits": {"memory": "256m"}}
    spec = RolloutSpec(
        policy=ScriptedPolicySpec(),
        agent=AgentConfig(max_steps=8, temperature=0.0),
        sandbox=box,
        run_id=run_id,
    )
    client = docker_client()
    # no cleanup hook: the reaper would remove a killed actor's containers and hide a pool that was not drained
    with make_pool(PoolConfig(num_actors=1, episodes_per_actor=2, progress=False), spec) as pool:
        trajs = list(pool.run([rollout_task], 2))
        idle = [c for c in list_managed(client, run_id=run_id) if c.labels.get("sandboxes.pool") == "1"]
    assert [t.resolved for t in trajs] == [True, True], [t.error for t in trajs]
    assert idle, "the actor's pool kept no sandbox ready"
    assert list_managed(client, run_id=run_id) == []
