"""RolloutPool on real Ray: weights pushed with set_policy_state reach every actor; broken workers fail loudly."""

from __future__ import annotations

import pytest

from swe_rl.agent.config import AgentConfig
from swe_rl.rollout.config import PoolConfig
from swe_rl.rollout.context import RolloutSpec
from swe_rl.rollout.local import LocalRolloutPool
from swe_rl.rollout.policies import TinyPolicySpec
from swe_rl.rollout.pool import RolloutPool

pytestmark = pytest.mark.ray


def _spec(seed: int) -> RolloutSpec:
    # Seeded sampling (seed + 1000 * sample_idx + step): same weights and sample_idx -> same tokens. (Greedy
    # would not do: random tiny models all repeat one token.)
    agent = AgentConfig(max_steps=1, max_new_tokens=12, temperature=1.0, seed=7)
    return RolloutSpec(
        policy=TinyPolicySpec(seed=seed), agent=agent, grade=False, run_id=f"rollout-pool-{seed}"
    )


@pytest.mark.docker
def test_set_policy_state_reaches_every_actor(rollout_task, tiny_tokenizer, ray_local):
    from swe_rl.policy.tiny import build_tiny_model

    with LocalRolloutPool(_spec(1), progress=False) as local:
        reference = {t.sample_idx: t for t in local.run([rollout_task], 2)}
    assert all(t.exit_status != "error" for t in reference.values()), reference[0].error
    spec = _spec(0)
    with RolloutPool(
        PoolConfig(num_actors=2, episodes_per_actor=1, progress=False), spec, spec.reap_orphans
    ) as pool:
        before = list(pool.run([rollout_task], 2))
        pool.set_policy_state(build_tiny_model(tiny_tokenizer, seed=1).state_dict())
        after = list(pool.run([rollout_task], 2))
    assert sorted(t.sample_idx for t in after) == [0, 1]
    assert (
        len({t.metrics["worker_pid"] for t in after}) == 2
    )  # one episode per actor: both actors were updated
    for t in after:
        ref = reference[t.sample_idx]
        assert t.token_ids == ref.token_ids and t.loss_mask == ref.loss_mask
        assert t.logprobs == pytest.approx(ref.logprobs, abs=1e-4)
    for t in before:  # the seed-0 weights answer differently
        assert t.logprobs != pytest.approx(reference[t.sample_idx].logprobs, abs=1e-4)


def test_workers_that_cannot_start_fail_with_the_cause(rollout_task, ray_local):
    from swe_rl.rollout.policies import HFPolicySpec

    spec = RolloutSpec(policy=HFPolicySpec(model="/nowhere/model-dir"), grade=False)
    pool = RolloutPool(PoolConfig(num_actors=1, max_actor_restarts=1, progress=False), spec)
    try:
        with pytest.raises(RuntimeError, match="/nowhere/model-dir"):
            list(pool.run([rollout_task], 1))
    finally:
        pool.close()
