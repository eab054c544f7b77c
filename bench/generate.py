"""Generation benchmark: HFLocalPolicy.generate_batch against transformers' own `generate` (plain, and returning
the logits), side by side in one run: greedy, sampled at T=1, and Qwen3's recommended sampling (T=0.6, top_p 0.95,
top_k 20: transformers' warpers sort the whole vocabulary for top_p; ours selects the top_k + 1 most likely and
draws among the kept ones, issue 61). `generate` is called with the same warpers (do_sample, temperature, top_k,
top_p), which it applies in the order temperature, top_k, top_p.

On a CUDA device (the default when there is one): a random Qwen2.5-1.5B shape in bf16, 32 prompts of ~1K tokens,
256 new tokens each (no stop token, so every row generates all 256). Ours also returns the log-prob and the exact
entropy of every token; `generate` returning logits is the like-for-like comparison, plain `generate` the speed goal
(the first CUDA run, before the sampler's rewrite: 1,095 tokens/s against 1,237 plain = 0.89x, and 914 with logits).
Without CUDA: the same comparison on this CPU at a small shape with Qwen's whole 151,936-row vocabulary (hidden 256,
4 layers, 16 prompts of ~128 tokens, 32 new), where every pass over the vocabulary shows.

Usage: python bench/generate.py [--device auto|cpu|cuda] [--prompts N] [--prompt-len N] [--new N] [--repeat 3]
                                [--skip-logits] [--out DIR]
       python bench/generate.py --cpu-dry-run   (a tiny shape on the CPU: checks the code in seconds)
Results go to docs/results/<date>_gpu_bench/generate.{json,md} when run on a GPU, to --out when given.
"""

from __future__ import annotations

import argparse
import datetime
import json
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # run from a plain checkout

import torch

REPO = Path(__file__).resolve().parents[1]
VOCAB = 151_936
QWEN15 = dict(hidden_size=1536, num_hidden_layers=28, num_attention_heads=12, num_key_value_heads=2,
              intermediate_size=8960)  # fmt: skip
SMALL = dict(
    hidden_size=256, num_hidden_layers=4, num_attention_heads=4, num_key_value_heads=2, intermediate_size=512
)
TINY = dict(
    hidden_size=64, num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2, intermediate_size=128
)
# (shape, vocab, prompts, prompt length, new tokens, dtype) per mode
MODES = {
    "cuda": (QWEN15, VOCAB, 32, 1024, 256, torch.bfloat16),
    "cpu": (SMALL, VOCAB, 16, 128, 32, torch.float32),
    "dry": (TINY, 2048, 4, 32, 8, torch.float32),
}


def build(dev: str, shape: dict, vocab: int, dtype: torch.dtype):
    from transformers import Qwen2Config, Qwen2ForCausalLM

    cfg = Qwen2Config(vocab_size=vocab, max_position_embeddings=4096, tie_word_embeddings=True, **shape)
    torch.manual_seed(0)
    with torch.device(dev):
        model = Qwen2ForCausalLM(cfg).to(dtype).eval()
    model.generation_config.eos_token_id = (
        None  # every row runs to max_new_tokens, as ours does without stops
    )
    model.generation_config.pad_token_id = 0
    return model


def _sync(dev: str) -> None:
    if dev == "cuda":
        torch.cuda.synchronize()


# decoding -> (temperature, top_p, top_k); temperature 0 = greedy
DECODING = {
    "greedy": (0.0, 1.0, -1),
    "sampled T=1": (1.0, 1.0, -1),
    "T=0.6 top_p 0.95 top_k 20": (0.6, 0.95, 20),
}


def ours(model, prompts: list[list[int]], new: int, how: str) -> int:
    from swe_rl.policy.base import SamplingParams
    from swe_rl.policy.hf import HFLocalPolicy

    t, top_p, top_k = DECODING[how]
    policy = HFLocalPolicy(model, None, pad_token_id=0, reuse_prefix=False, max_batch=len(prompts))
    policy.tokenizer = _NoDecode()
    sps = [SamplingParams(temperature=t, top_p=top_p, top_k=top_k, max_new_tokens=new) for _ in prompts]
    out = policy.generate_batch(prompts, sps)
    return sum(len(c.token_ids) for c in out)


class _NoDecode:
    """generate_batch decodes each completion to text; ids are all this benchmark needs (and a random model has
    no tokenizer), so the text is empty."""

    pad_token_id = 0

    def decode(self, ids: list[int], skip_special_tokens: bool = False) -> str:
        return ""


def hf_generate(model, prompts: list[list[int]], new: int, logits: bool, how: str) -> int:
    width = max(len(p) for p in prompts)
    dev = next(model.parameters()).device
    ids = torch.zeros(len(prompts), width, dtype=torch.long, device=dev)
    attn = torch.zeros_like(ids)
    for i, p in enumerate(prompts):  # left padding, as for batched decoder-only generation
        ids[i, width - len(p) :] = torch.tensor(p, device=dev)
        attn[i, width - len(p) :] = 1
    t, top_p, top_k = DECODING[how]
    kw = dict(do_sample=True, temperature=t, top_p=top_p, top_k=max(top_k, 0)) if t else dict(do_sample=False)
    with torch.inference_mode():
        out = model.generate(input_ids=ids, attention_mask=attn, max_new_tokens=new, min_new_tokens=new,
                             output_logits=logits, return_dict_in_generate=logits, **kw)  # fmt: skip
    seqs = out.sequences if logits else out
    return int(seqs[:, width:].numel())


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--device", choices=("auto", "cpu", "cuda"), default="auto")
    ap.add_argument("--prompts", type=int, default=0, help="0: the mode's default")
    ap.add_argument("--prompt-len", type=int, default=0)
    ap.add_argument("--new", type=int, default=0)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--threads", type=int, default=0, help="CPU torch threads (0: torch's default)")
    ap.add_argument("--cpu-dry-run", action="store_true")
    ap.add_argument(
        "--skip-logits", action="store_true", help="leave out `generate` returning logits (saves a third)"
    )
    ap.add_argument("--out", default="")
    args = ap.parse_args(argv)
    if args.device == "cuda" and not torch.cuda.is_available():
        print("generate: --device cuda, but torch.cuda.is_available() is False")
        return 2
    dev = "cuda" if args.device == "cuda" or (args.device == "auto" and torch.cuda.is_available()) else "cpu"
    mode = "dry" if args.cpu_dry_run else dev
    dev = "cpu" if mode == "dry" else dev
    shape, vocab, n, plen, new, dtype = MODES[mode]
    n, plen, new = args.prompts or n, args.prompt_len or plen, args.new or new
    if args.threads:
        torch.set_num_threads(args.threads)
    import transformers

    model = build(dev, shape, vocab, dtype)
    g = torch.Generator().manual_seed(0)
    lens = torch.randint(
        plen * 3 // 4, plen * 5 // 4 + 1, (n,), generator=g
    ).tolist()  # unequal, as in a batch
    prompts = [torch.randint(1, vocab, (k,), generator=g).tolist() for k in lens]
    runs = {}
    for how in DECODING:
        runs[("HFLocalPolicy.generate_batch (log-probs + entropy)", how)] = lambda h=how: ours(
            model, prompts, new, h
        )
        runs[("transformers generate", how)] = lambda h=how: hf_generate(model, prompts, new, False, h)
        if not args.skip_logits:
            runs[("transformers generate, output_logits", how)] = lambda h=how: hf_generate(
                model, prompts, new, True, h
            )
    for fn in runs.values():  # warm-up: kernels, allocator
        fn()
    best: dict[tuple[str, str], float] = {}
    for _ in range(args.repeat):  # interleaved, so a clock, thermal or load drift hits all alike
        for key, fn in runs.items():
            _sync(dev)
            t0 = time.perf_counter()
            tokens = fn()
            _sync(dev)
            best[key] = max(best.get(key, 0.0), tokens / (time.perf_counter() - t0))
    name = {"cuda": "random Qwen2.5-1.5B shape, bf16", "cpu": "hidden 256, 4 layers, fp32",
            "dry": "tiny, fp32 (dry run)"}[mode]  # fmt: skip
    env = {
        "date": datetime.date.today().isoformat(),
        "device": torch.cuda.get_device_name()
        if dev == "cuda"
        else f"cpu ({torch.get_num_threads()} threads)",
        "versions": f"torch {torch.__version__}, transformers {transformers.__version__}",
        "setup": f"{name}, vocabulary {vocab:,}, {n} prompts of {min(lens)}-{max(lens)} tokens, {new} new tokens "
        f"each, best of {args.repeat}",
    }
    print(f"generate: {env['device']}, {env['versions']}; {env['setup']}")
    lines = ["| generator | decoding | tokens/s | x plain generate |", "|---|---|---|---|"]
    for (gen, how), tps in best.items():
        lines.append(f"| {gen} | {how} | {tps:,.0f} | {tps / best[('transformers generate', how)]:.2f}x |")
    print("\n".join(lines))
    out = (
        Path(args.out)
        if args.out
        else (REPO / "docs" / "results" / f"{env['date']}_gpu_bench" if mode == "cuda" else None)
    )
    if out is not None:
        out.mkdir(parents=True, exist_ok=True)
        rows = [{"generator": g_, "decoding": h, "tokens_per_s": v} for (g_, h), v in best.items()]
        (out / "generate.json").write_text(json.dumps({"env": env, "results": rows}, indent=1))
        md = [f"# Generation benchmark, {env['date']}", "", f"{env['device']}; {env['versions']}; {env['setup']}",
              "", *lines, ""]  # fmt: skip
        (out / "generate.md").write_text("\n".join(md))
        print(f"generate: results in {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
