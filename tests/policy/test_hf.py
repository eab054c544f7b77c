"""HFLocalPolicy against an unbatched full forward of the same tiny model: logprobs, entropy, batching, stops."""

from __future__ import annotations

import asyncio

import pytest
import torch

from swe_rl.policy.base import SamplingParams
from swe_rl.policy.hf import HFLocalPolicy


def reference(model, prompt: list[int], completion: list[int], temperature: float):
    """(logprobs, entropies) of `completion` after `prompt` from one unpadded forward pass."""
    ids = torch.tensor([prompt + completion])
    with torch.no_grad():
        logits = model(ids).logits[0, len(prompt) - 1 : -1].float() / (temperature or 1.0)
    logp = torch.log_softmax(logits, -1)
    lp = logp.gather(-1, torch.tensor(completion)[:, None]).squeeze(-1)
    ent = -(logp.exp() * logp).sum(-1)
    return lp, ent


async def test_batched_logprobs_and_entropy_match_full_forward(tiny_model, tiny_tokenizer):
    policy = HFLocalPolicy(tiny_model, tiny_tokenizer, max_batch=8)
    prompts = [
        tiny_tokenizer(t)["input_ids"]
        for t in ["def add(a, b):", "x", "The function returns the wrong value."]
    ]
    sp = SamplingParams(temperature=0.7, max_new_tokens=12, seed=3)
    outs = await asyncio.gather(*(policy.generate(p, sp) for p in prompts))
    await policy.close()
    assert policy.stats["batches"] == 1 and policy.stats["requests"] == 3  # one left-padded batch
    for p, c in zip(prompts, outs, strict=True):
        assert (
            len(c.token_ids) == len(c.logprobs) == len(c.token_entropy) == 12 and c.finish_reason == "length"
        )
        lp, ent = reference(tiny_model, p, c.token_ids, 0.7)
        assert torch.allclose(torch.tensor(c.logprobs), lp, atol=1e-4)
        assert torch.allclose(torch.tensor(c.token_entropy), ent, atol=1e-4)
        assert c.text == tiny_tokenizer.decode(c.token_ids, skip_special_tokens=False)


async def test_greedy_top_p_stop_and_zero_budget(tiny_model, tiny_tokenizer):
    policy = HFLocalPolicy(tiny_model, tiny_tokenizer)
    prompt = tiny_tokenizer("def add(a, b):")["input_ids"]
    greedy = await policy.generate(prompt, SamplingParams(temperature=0, max_new_tokens=6))
    ids = torch.tensor([prompt])
    for tok in greedy.token_ids:  # greedy = argmax step by step
        with torch.no_grad():
            assert int(tiny_model(ids).logits[0, -1].argmax()) == tok
        ids = torch.cat([ids, torch.tensor([[tok]])], dim=1)
    nucleus = await policy.generate(prompt, SamplingParams(temperature=1.0, top_p=1e-6, max_new_tokens=6))
    assert nucleus.token_ids == greedy.token_ids  # a vanishing nucleus keeps only the argmax
    stop = greedy.token_ids[2]
    stopped = await policy.generate(
        prompt, SamplingParams(temperature=0, max_new_tokens=6, stop_token_ids=(stop,))
    )
    assert (
        stopped.token_ids == greedy.token_ids[: greedy.token_ids.index(stop) + 1]
        and stopped.finish_reason == "stop"
    )
    empty = await policy.generate(prompt, SamplingParams(max_new_tokens=0))
    assert empty.token_ids == [] and empty.finish_reason == "length"
    await policy.close()


async def test_seeded_sampling_is_reproducible(tiny_model, tiny_tokenizer):
    policy = HFLocalPolicy(tiny_model, tiny_tokenizer)
    prompt = tiny_tokenizer("x")["input_ids"]
    a = await policy.generate(prompt, SamplingParams(max_new_tokens=10, seed=7))
    b = await policy.generate(prompt, SamplingParams(max_new_tokens=10, seed=7))
    assert a.token_ids == b.token_ids
    await policy.close()


async def test_concurrent_requests_batch_and_finished_rows_leave(tiny_model, tiny_tokenizer):
    policy = HFLocalPolicy(tiny_model, tiny_tokenizer, max_batch=4)
    prompt = tiny_tokenizer("def")["input_ids"]
    budgets = [1, 3, 8, 2, 5, 4]
    outs = await asyncio.gather(
        *(policy.generate(prompt, SamplingParams(max_new_tokens=n, seed=i)) for i, n in enumerate(budgets))
    )
    assert [len(c.token_ids) for c in outs] == budgets
    assert policy.stats["batches"] == 2  # 6 requests, max_batch 4
    for c in outs:  # rows dropped mid-batch did not disturb the others
        lp, _ = reference(tiny_model, prompt, c.token_ids, 1.0)
        assert torch.allclose(torch.tensor(c.logprobs), lp, atol=1e-4)
    await policy.close()


async def test_in_place_weight_updates_are_seen(tiny_tokenizer):
    from swe_rl.policy.tiny import build_tiny_model

    model = build_tiny_model(tiny_tokenizer, seed=5)
    policy = HFLocalPolicy(model, tiny_tokenizer)
    assert policy.model is model
    prompt = tiny_tokenizer("x")["input_ids"]
    before = await policy.generate(prompt, SamplingParams(temperature=0, max_new_tokens=4))
    with torch.no_grad():  # what a trainer step does: mutate parameters in place
        for p in model.parameters():
            p.mul_(-3.0)
    after = await policy.generate(prompt, SamplingParams(temperature=0, max_new_tokens=4))
    lp, _ = reference(model, prompt, after.token_ids, 1.0)
    assert torch.allclose(torch.tensor(after.logprobs), lp, atol=1e-4)
    assert after.logprobs != before.logprobs
    await policy.close()


async def test_errors_reach_the_caller_and_the_worker_survives(tiny_model, tiny_tokenizer):
    policy = HFLocalPolicy(tiny_model, tiny_tokenizer)
    with pytest.raises(IndexError):
        await policy.generate([10**6], SamplingParams(max_new_tokens=2))  # token id outside the vocabulary
    ok = await policy.generate(tiny_tokenizer("x")["input_ids"], SamplingParams(max_new_tokens=2))
    assert len(ok.token_ids) == 2
    await policy.close()


def test_bad_batch_size(tiny_model, tiny_tokenizer):
    with pytest.raises(ValueError, match="max_batch"):
        HFLocalPolicy(tiny_model, tiny_tokenizer, max_batch=0)


async def test_prefix_kv_reuse_across_turns_matches_full_forward(tiny_model, tiny_tokenizer):
    """Turn 2 prompts extend turn 1 (prompt + reply + observation): their prefill reuses stored K/V, mixed in one
    batch with a fresh prompt, and the logprobs still equal an unbatched full forward."""
    policy = HFLocalPolicy(tiny_model, tiny_tokenizer, max_batch=8)
    enc = lambda t: tiny_tokenizer(t, add_special_tokens=False)["input_ids"]  # noqa: E731
    first = [enc("def add(a, b):"), enc("The function returns the wrong value.")]
    sp = SamplingParams(temperature=0.9, max_new_tokens=6, seed=1)
    turn1 = await asyncio.gather(*(policy.generate(p, sp) for p in first))
    assert len(policy.kv_store.entries) == 2
    second = [p + c.token_ids + enc("\nobservation text\n") for p, c in zip(first, turn1, strict=True)]
    fresh = enc("x = 1")
    outs = await asyncio.gather(*(policy.generate(p, sp) for p in [*second, fresh]))
    assert policy.kv_store.hits == 2 and policy.kv_store.reused_tokens == sum(len(p) + 5 for p in first)
    for p, c in zip([*second, fresh], outs, strict=True):
        lp, ent = reference(tiny_model, p, c.token_ids, 0.9)
        assert torch.allclose(torch.tensor(c.logprobs), lp, atol=1e-4)
        assert torch.allclose(torch.tensor(c.token_entropy), ent, atol=1e-4)
    with torch.no_grad():  # an in-place weight update invalidates every stored prefix
        next(tiny_model.parameters()).add_(0.0)
    hits = policy.kv_store.hits
    third = second[0] + outs[0].token_ids + enc("more")
    out3 = await policy.generate(third, sp)
    assert policy.kv_store.hits == hits  # nothing reused after the update
    lp, _ = reference(tiny_model, third, out3.token_ids, 0.9)
    assert torch.allclose(torch.tensor(out3.logprobs), lp, atol=1e-4)
    await policy.close()


def test_kv_store_eviction_and_longest_prefix():
    from swe_rl.policy.kv_store import PrefixKVStore

    store = PrefixKVStore(
        max_entries=10, max_bytes=3 * 2 * 4 * 4
    )  # room for three 1-layer entries of 4 floats
    kv = lambda n: [(torch.zeros(1, n, 2), torch.zeros(1, n, 2))]  # noqa: E731  (H=1, L=n, D=2)
    store.put([1, 2], kv(2))
    store.put([1, 2, 3], kv(2))
    store.put([9], kv(2))
    assert (
        store.take([1, 2, 3]) is not None and store.hits == 1
    )  # strict prefix only: [1, 2] matches, not [1, 2, 3]
    assert store.take([1, 2, 3, 4]).ids == [1, 2, 3]  # the longest prefix wins
    store.put([5], kv(2))
    store.put([6], kv(2))
    store.put([7], kv(2))
    assert [e.ids for e in store.entries.values()] == [[5], [6], [7]]  # [9] evicted by the byte budget
    store.sync((1, 0.0))
    assert not store.entries and store.nbytes == 0


def test_weights_version_sees_fused_optimizer_steps():
    from swe_rl.policy.kv_store import weights_version

    model = torch.nn.Linear(8, 8)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-2, fused=True)  # fused steps do not bump _version
    before = weights_version(model)
    model(torch.randn(2, 8)).sum().backward()
    opt.step()
    assert weights_version(model) != before


@pytest.fixture(scope="module", params=["qwen25", "qwen3"])
def qwen_policy_parts(request):
    """A tiny random Qwen2/Qwen3 with the real 151,936-row embedding and the real tokenizer + chat template."""
    from transformers import AutoModelForCausalLM, AutoTokenizer

    folder = request.getfixturevalue(f"{request.param}_tiny_model_dir")
    model = AutoModelForCausalLM.from_pretrained(folder).eval()
    return model, AutoTokenizer.from_pretrained(folder)


async def test_real_vocabulary_logprobs_entropy_stops_and_prefix_reuse(qwen_policy_parts):
    import math

    model, tok = qwen_policy_parts
    policy = HFLocalPolicy(model, tok, max_batch=8)
    assert policy.pad_token_id == 151643  # Qwen pads with <|endoftext|>

    def chat(user: str) -> list[int]:
        msgs = [{"role": "system", "content": "S"}, {"role": "user", "content": user}]
        text = tok.apply_chat_template(msgs, tokenize=False, add_generation_prompt=True)
        return tok(text, add_special_tokens=False)["input_ids"]

    prompts = [chat("Fix add() in calc.py"), chat("<think> is text here? 你好 🦙")]
    ends = (151645, 151643)
    sp = SamplingParams(temperature=0.8, top_p=0.95, max_new_tokens=10, seed=4, stop_token_ids=ends)
    outs = await asyncio.gather(*(policy.generate(p, sp) for p in prompts))
    turn2 = [
        p + c.token_ids + tok("\n<|im_start|>user\nobs<|im_end|>\n")["input_ids"]
        for p, c in zip(prompts, outs, strict=True)
    ]
    outs2 = await asyncio.gather(*(policy.generate(p, sp) for p in turn2))
    assert policy.kv_store.hits == 2  # turn 2 reused turn 1's K/V
    for p, c in zip([*prompts, *turn2], [*outs, *outs2], strict=True):
        lp, ent = reference(model, p, c.token_ids, 0.8)
        assert torch.allclose(torch.tensor(c.logprobs), lp, atol=1e-4)
        assert torch.allclose(torch.tensor(c.token_entropy), ent, atol=1e-4)
        assert max(c.token_entropy) <= math.log(151_936) + 1e-4
        assert all(t not in ends for t in c.token_ids[:-1])
    greedy = await policy.generate(prompts[0], SamplingParams(temperature=0, max_new_tokens=6))
    stop = greedy.token_ids[3]
    cut = await policy.generate(
        prompts[0], SamplingParams(temperature=0, max_new_tokens=6, stop_token_ids=(stop,))
    )
    assert (
        cut.token_ids == greedy.token_ids[: greedy.token_ids.index(stop) + 1] and cut.finish_reason == "stop"
    )
    await policy.close()
