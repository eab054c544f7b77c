"""The built-in trainer with vLLM generating (rollout.engine: vllm): real engine, real agent episodes in Docker
sandbox slots, real tests as rewards, torch training, weights pushed into the engine in place after every step.

One engine for the module: each run attaches its own freshly loaded model to it (the push is the same in-place
reload a run does after every step). Runs in `make test-vllm`.
"""

from __future__ import annotations

import asyncio

import pytest

from swe_rl.experiments.demo import SHIPPED_SFT
from swe_rl.policy.base import SamplingParams

pytestmark = [pytest.mark.vllm, pytest.mark.docker]


@pytest.fixture(scope="module")
def engine():
    from swe_rl.policy.vllm import VLLMPolicy

    policy = VLLMPolicy.start(str(SHIPPED_SFT))
    yield policy
    asyncio.run(policy.close())


def load_model():
    import torch
    from transformers import AutoModelForCausalLM

    from swe_rl.policy.tiny import load_tokenizer

    return AutoModelForCausalLM.from_pretrained(SHIPPED_SFT, dtype=torch.float32).eval(), load_tokenizer(
        SHIPPED_SFT
    )


def config(out_dir: str, name: str):
    from swe_rl.train.config import TrainConfig

    cfg = TrainConfig(name=name, out_dir=out_dir, steps=2, save_every=1, log_trajectories=0)
    cfg.model.init = str(SHIPPED_SFT)
    r = cfg.rollout
    r.engine, r.tasks_per_step, r.n_samples, r.max_turns, r.max_new_tokens, r.slots = "vllm", 4, 4, 4, 48, 8
    cfg.optim.lr, cfg.optim.minibatch, cfg.optim.micro_batch = 3e-3, 16, 16
    return cfg


def run_training(engine, tmp, name: str, *, resume: bool = False, stop_after: int | None = None):
    """train() exactly as `swe-rl train` wires it (EngineRollouter over the real pipeline), on the shared engine."""
    from swe_rl.runs import RunDir
    from swe_rl.tasks.generator import generate_tasks, sample_batch
    from swe_rl.train.env import SandboxSlots, demo_agent_config
    from swe_rl.train.loop import train
    from swe_rl.train.sft import prompts_dir
    from swe_rl.train.vllm_engine import EngineRollouter

    cfg = config(str(tmp), name)
    model, tok = load_model()
    engine.model = model  # the engine now follows this run's model
    asyncio.run(engine.sync_weights(force=True))
    r = cfg.rollout
    agent = demo_agent_config(prompts_dir(), max_new_tokens=r.max_new_tokens, max_steps=r.max_turns)
    slots = SandboxSlots(r.slots, cfg.sandbox)
    run = RunDir.create(cfg.out_dir, cfg.name)
    try:
        rollouter = EngineRollouter(engine, tok, agent, slots, model=model)
        train(cfg, run, model, tok, rollouter, generate_tasks(40, "train", 0), sample_tasks=sample_batch,
              resume=resume, stop_after=stop_after)  # fmt: skip
    finally:
        slots.close()
    return model, tok, run


def probe(engine, tok) -> tuple[list[int], list[float]]:
    from swe_rl.tasks.generator import generate_tasks

    text = tok.apply_chat_template(
        [{"role": "user", "content": generate_tasks(1, "held_out", 2)[0].problem_statement}],
        tokenize=False,
        add_generation_prompt=True,
    )
    prompt = tok(text, add_special_tokens=False)["input_ids"]
    c = asyncio.run(engine.generate(prompt, SamplingParams(temperature=1.0, max_new_tokens=32, seed=7)))
    return c.token_ids, c.logprobs


@pytest.fixture(scope="module")
def straight_run(engine, tmp_path_factory):
    """Two steps in one go, with a seeded sample of a fixed prompt from the engine before and after."""
    model, tok = load_model()
    engine.model = model
    asyncio.run(engine.sync_weights(force=True))
    before = probe(engine, tok)
    syncs = engine.stats["syncs"]
    model, tok, run = run_training(engine, tmp_path_factory.mktemp("vllm-train"), "straight")
    after = probe(engine, tok)
    return model, run, before, after, engine.stats["syncs"] - syncs


def test_engine_generates_trains_and_syncs_every_step(straight_run):
    _, run, before, after, syncs = straight_run
    rows = run.read_metrics()
    assert [r["step"] for r in rows] == [1, 2]
    for r in rows:
        assert r["active_rows"] > 0, r  # some mixed group gave gradient (else nothing would change)
        # the sampler (vLLM) and the trainer's forward agree on policy tokens: same weights, same temperature
        assert r["rollout_lp_gap"] < 2e-3, r
        assert r["policy_tokens"] > 0
    assert rows[1]["cost/weight_syncs"] == 1 and rows[1]["cost/weight_sync_s"] < rows[1]["time_step_s"]
    assert syncs >= 3  # the run's start, after step 1 (before step 2's rollouts), after step 2 (probe)
    assert after[1] != pytest.approx(before[1], abs=1e-4)  # the engine serves the trained weights
    assert after[0] != before[0]  # and samples other tokens from them (same seed)


def test_resume_reaches_the_same_parameters(engine, straight_run, tmp_path):
    import torch

    model_a = straight_run[0]
    run_training(engine, tmp_path, "resumed", stop_after=1)
    model_b, _, run = run_training(engine, tmp_path, "resumed", resume=True)  # a fresh model, from the ckpt
    assert [r["step"] for r in run.read_metrics()] == [1, 2]
    for (name, a), b in zip(model_a.state_dict().items(), model_b.state_dict().values(), strict=True):
        assert torch.allclose(a, b, atol=1e-6), name
