"""AEM's α by turn type on real episodes: expert and flawed-expert episodes through the real agent loop and tools
(Docker sandbox slots), labelled span by span from the transcript."""

from __future__ import annotations

import asyncio

import pytest
import torch

from swe_rl.algo.config import AlgoConfig
from swe_rl.tasks.generator import generate_tasks
from swe_rl.train.batch import collate, span_turn_types
from swe_rl.train.objective import advantages


@pytest.mark.docker
def test_alpha_by_turn_type_on_real_episodes(tiny_tokenizer):
    from swe_rl.train.env import SandboxSlots, demo_agent_config
    from swe_rl.train.expert import expert_trajectories
    from swe_rl.train.sft import prompts_dir

    tasks = generate_tasks(2, "train", seed=7)
    cfg = demo_agent_config(prompts_dir(), max_new_tokens=512)

    async def main():
        slots = SandboxSlots(2)
        try:
            good = await expert_trajectories(tasks, tiny_tokenizer, cfg, slots)
            bad = await expert_trajectories(
                tasks, tiny_tokenizer, cfg, slots, frozenset(t.instance_id for t in tasks)
            )
            return [
                good[0],
                bad[0],
                good[1],
                bad[1],
            ]  # task-major: one solved and one failed episode per task
        finally:
            await slots.aclose()

    trajs = asyncio.run(main())
    assert [t.reward for t in trajs] == [1.0, 0.0, 1.0, 0.0], [t.error for t in trajs]
    batch = collate(trajs, tiny_tokenizer.pad_token_id)
    labels = span_turn_types(trajs, batch.loss_mask)
    assert labels == ["file_editor:view", "file_editor:str_replace", "submit"] * 4
    gen = torch.Generator().manual_seed(0)
    ent = torch.rand(batch.loss_mask.shape, generator=gen) * batch.loss_mask  # spans of different entropy
    algo = AlgoConfig.model_validate({"modulator": {"kind": "aem", "aem": {"min_range": 0.0}}})
    rewards = torch.tensor([t.reward for t in trajs])
    _, _, diag = advantages(
        algo, rewards, torch.tensor([0, 0, 1, 1]), torch.ones(4, dtype=torch.bool), batch.loss_mask, ent,
        [t.exit_status for t in trajs], trajectories=trajs,
    )  # fmt: skip
    kinds = {k.removeprefix("aem/alpha_turn/") for k in diag if k.startswith("aem/alpha_turn/")}
    assert kinds == {"file_editor:view", "file_editor:str_replace", "submit"}
    # the mean of α over all spans is 1 in every modulated group, so the per-type means average to 1 here
    assert sum(diag[f"aem/alpha_turn/{k}"] for k in kinds) / 3 == pytest.approx(1.0, abs=1e-5)
