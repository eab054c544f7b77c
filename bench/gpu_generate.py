"""GPU generation benchmark: HFLocalPolicy.generate_batch against transformers' own `generate` (plain, and returning
the logits), side by side in one run, on one CUDA device.

A random Qwen2.5-1.5B shape in bf16, 32 prompts of ~1K tokens, 256 greedy new tokens each (no stop token, so every
row generates all 256). Ours also returns the log-prob and the exact entropy of every token; `generate` returning
logits is the like-for-like comparison, plain `generate` the speed goal (the first CUDA run: 1,095 tokens/s
against 1,237 plain = 0.89×, and 914 with logits).

Usage: python bench/gpu_generate.py [--prompts 32] [--prompt-len 1024] [--new 256] [--repeat 2] [--out DIR]
       python bench/gpu_generate.py --cpu-dry-run   (a tiny shape on the CPU: checks the code, writes nothing)
Without CUDA (and without --cpu-dry-run) it prints one line and exits 0. Results go to
docs/results/<date>_gpu_bench/gpu_generate.{json,md} only when run on a GPU.
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
TINY = dict(
    hidden_size=64, num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2, intermediate_size=128
)


def build(dev: str, shape: dict, vocab: int):
    from transformers import Qwen2Config, Qwen2ForCausalLM

    cfg = Qwen2Config(vocab_size=vocab, max_position_embeddings=4096, tie_word_embeddings=True, **shape)
    torch.manual_seed(0)
    with torch.device(dev):
        model = Qwen2ForCausalLM(cfg).to(torch.bfloat16 if dev == "cuda" else torch.float32).eval()
    model.generation_config.eos_token_id = (
        None  # every row runs to max_new_tokens, as ours does without stops
    )
    model.generation_config.pad_token_id = 0
    return model


def _sync(dev: str) -> None:
    if dev == "cuda":
        torch.cuda.synchronize()


def ours(model, prompts: list[list[int]], new: int) -> int:
    from swe_rl.policy.base import SamplingParams
    from swe_rl.policy.hf import HFLocalPolicy

    policy = HFLocalPolicy(model, None, pad_token_id=0, reuse_prefix=False, max_batch=len(prompts))
    policy.tokenizer = _NoDecode()
    out = policy.generate_batch(prompts, [SamplingParams(temperature=0, max_new_tokens=new) for _ in prompts])
    return sum(len(c.token_ids) for c in out)


class _NoDecode:
    """generate_batch decodes each completion to text; ids are all this benchmark needs (and a random model has
    no tokenizer), so the text is empty."""

    pad_token_id = 0

    def decode(self, ids: list[int], skip_special_tokens: bool = False) -> str:
        return ""


def hf_generate(model, prompts: list[list[int]], new: int, logits: bool) -> int:
    width = max(len(p) for p in prompts)
    dev = next(model.parameters()).device
    ids = torch.zeros(len(prompts), width, dtype=torch.long, device=dev)
    attn = torch.zeros_like(ids)
    for i, p in enumerate(prompts):  # left padding, as for batched decoder-only generation
        ids[i, width - len(p) :] = torch.tensor(p, device=dev)
        attn[i, width - len(p) :] = 1
    with torch.inference_mode():
        out = model.generate(input_ids=ids, attention_mask=attn, max_new_tokens=new, min_new_tokens=new,
                             do_sample=False, output_logits=logits, return_dict_in_generate=logits)  # fmt: skip
    seqs = out.sequences if logits else out
    return int(seqs[:, width:].numel())


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--prompts", type=int, default=32)
    ap.add_argument("--prompt-len", type=int, default=1024)
    ap.add_argument("--new", type=int, default=256)
    ap.add_argument("--repeat", type=int, default=2)
    ap.add_argument("--cpu-dry-run", action="store_true")
    ap.add_argument("--out", default="")
    args = ap.parse_args(argv)
    if args.cpu_dry_run:
        dev, shape, vocab, n, plen, new = "cpu", TINY, 2048, 4, 32, 8
    elif not torch.cuda.is_available():
        print("gpu_generate: skipped, needs a CUDA GPU (torch.cuda.is_available() is False)")
        return 0
    else:
        dev, shape, vocab, n, plen, new = "cuda", QWEN15, VOCAB, args.prompts, args.prompt_len, args.new
    import transformers

    model = build(dev, shape, vocab)
    g = torch.Generator().manual_seed(0)
    lens = torch.randint(plen * 3 // 4, plen * 5 // 4 + 1, (n,), generator=g).tolist()  # ~1K, unequal
    prompts = [torch.randint(1, vocab, (k,), generator=g).tolist() for k in lens]
    runs = {
        "HFLocalPolicy.generate_batch (log-probs + entropy)": lambda: ours(model, prompts, new),
        "transformers generate": lambda: hf_generate(model, prompts, new, logits=False),
        "transformers generate, output_logits": lambda: hf_generate(model, prompts, new, logits=True),
    }
    for fn in runs.values():  # warm-up: kernels, allocator
        fn()
    best: dict[str, float] = {}
    for _ in range(args.repeat):  # interleaved, so a clock or thermal drift hits all three alike
        for name, fn in runs.items():
            _sync(dev)
            t0 = time.perf_counter()
            tokens = fn()
            _sync(dev)
            best[name] = max(best.get(name, 0.0), tokens / (time.perf_counter() - t0))
    plain = best["transformers generate"]
    env = {
        "date": datetime.date.today().isoformat(),
        "device": torch.cuda.get_device_name() if dev == "cuda" else "cpu (dry run)",
        "versions": f"torch {torch.__version__}, transformers {transformers.__version__}",
        "setup": f"random Qwen2.5-1.5B shape, {'bf16' if dev == 'cuda' else 'fp32 tiny'}, {n} prompts of "
        f"{min(lens)}-{max(lens)} tokens, {new} greedy new tokens, best of {args.repeat}",
    }
    print(f"gpu_generate: {env['device']}, {env['versions']}; {env['setup']}")
    lines = ["| generator | tokens/s | × plain generate |", "|---|---|---|"]
    for name, tps in best.items():
        lines.append(f"| {name} | {tps:,.0f} | {tps / plain:.2f}× |")
    print("\n".join(lines))
    if dev == "cuda":
        out = Path(args.out or REPO / "docs" / "results" / f"{env['date']}_gpu_bench")
        out.mkdir(parents=True, exist_ok=True)
        (out / "gpu_generate.json").write_text(json.dumps({"env": env, "tokens_per_s": best}, indent=1))
        md = [f"# GPU generation benchmark, {env['date']}", "", f"{env['device']}; {env['versions']}; {env['setup']}",
              "", *lines, ""]  # fmt: skip
        (out / "gpu_generate.md").write_text("\n".join(md))
        print(f"gpu_generate: results in {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
