"""Generated tasks through the real pipeline: expert episodes in Docker sandbox slots, real grading, re-encoding."""

from __future__ import annotations

import asyncio

import pytest

from swe_rl.tasks.generator import generate_tasks


@pytest.mark.docker
def test_expert_episodes_resolve_and_reencode(tiny_tokenizer):
    from swe_rl.train.env import CachedGrader, SandboxSlots, demo_agent_config
    from swe_rl.train.expert import encode_transcript, expert_trajectories, transcript
    from swe_rl.train.sft import prompts_dir

    tasks = generate_tasks(3, "train", seed=5)
    cfg = demo_agent_config(prompts_dir(), max_new_tokens=512)

    async def main():
        slots = SandboxSlots(2)
        try:
            trajs = await expert_trajectories(tasks, tiny_tokenizer, cfg, slots)
            # the flawed expert's episode for task 0 goes through the same tools and fails the real tests
            (flawed,) = await expert_trajectories(
                tasks[:1], tiny_tokenizer, cfg, slots, frozenset([tasks[0].instance_id])
            )
            assert flawed.exit_status == "submitted" and flawed.reward == 0.0, flawed.error
            assert tasks[0].metadata["expert"]["flawed_new"] in flawed.patch
            grader = CachedGrader(slots)
            empty_fix = await grader(tasks[0], "")  # an empty patch leaves the bug: not resolved
            wrong = tasks[0].patch.replace(tasks[0].metadata["expert"]["new"], "x * 123")
            bad = await grader(tasks[0], wrong)
            again = await grader(tasks[0], tasks[0].patch)
            again2 = await grader(tasks[0], tasks[0].patch)
            return trajs, empty_fix, bad, again, again2, grader
        finally:
            await slots.aclose()

    trajs, empty_fix, bad, good, good2, grader = asyncio.run(main())
    for t in trajs:
        assert t.exit_status == "submitted", t.error
        assert t.reward == 1.0 and t.resolved
        ids, mask = encode_transcript(transcript(t), tiny_tokenizer, cfg)
        assert ids == t.token_ids and mask == t.loss_mask  # SFT data = what the agent loop builds
    assert empty_fix.reward == 0.0 and bad.reward == 0.0
    assert (
        good.reward == 1.0 and good2.reward == 1.0 and good2.tests["cost"]["dedup_hit"] and grader.hits >= 1
    )


@pytest.mark.docker
def test_sft_demonstrations_mix_verified_expert_and_flawed_episodes(tmp_path):
    """load_or_make_transcripts plays the expert (kept if resolved) and the flawed expert (kept if it fails) for
    the configured share of tasks, caches them, and a second call replays nothing."""
    import json

    from swe_rl.train.sft import SFTConfig, flawed_task_ids, load_or_make_transcripts

    cfg = SFTConfig(n_tasks=4, flawed_fraction=0.5, slots=2, data_seed=3)
    cache = tmp_path / "expert.jsonl"
    trs = load_or_make_transcripts(cfg, cache)
    ids = [t.instance_id for t in generate_tasks(4, "train", 3)]
    flawed = flawed_task_ids(ids, 0.5, 3)
    assert len(trs) == 4 and {t["task_id"] for t in trs if t.get("flawed")} == flawed and len(flawed) == 2
    assert all(t["reward"] == (0.0 if t.get("flawed") else 1.0) for t in trs)
    lines = cache.read_text().splitlines()
    assert load_or_make_transcripts(cfg, cache) == trs and cache.read_text().splitlines() == lines
    # the same cache serves an expert-only run for the tasks it has expert episodes of, and plays the rest
    pure = load_or_make_transcripts(cfg.model_copy(update={"flawed_fraction": 0.0}), cache)
    assert len(pure) == 4 and not any(t.get("flawed") for t in pure)
    assert len(cache.read_text().splitlines()) == 6 and all(json.loads(x) for x in lines)
