"""One sampling step on a batch of logits (B, Qwen's 151,936 vocabulary): our sampler (swe_rl.policy.sampling, with
its log-probs and exact entropies) against what transformers' `generate` does per step (its warpers in generate's
order, TemperatureLogitsWarper -> TopKLogitsWarper -> TopPLogitsWarper, then softmax and torch.multinomial; argmax
when greedy), and against our sampler as it was before issue 61 (top_k / top_p from topk(256), the draw a float64
cumsum over the whole vocabulary), all on the same logits in one run. Each step ends with the tokens on the host,
as both generation loops need them.

The decodings of bench/generate.py: greedy, sampled at T=1, T=0.6 top_p 0.95 top_k 20 (DeepSWE-style recipes).
On CUDA 32 rows (the 1.5B generation benchmark's batch), on the CPU 16.

Usage: python bench/sampler.py [--device auto|cpu|cuda] [--rows N] [--steps 20] [--repeat 3] [--out DIR]
       python bench/sampler.py --cpu-dry-run
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

VOCAB = 151_936
DECODING = {  # temperature (0 = greedy), top_p, top_k
    "greedy": (0.0, 1.0, -1),
    "sampled T=1": (1.0, 1.0, -1),
    "T=0.6 top_p 0.95 top_k 20": (0.6, 0.95, 20),
}


def ours(logits: torch.Tensor, how: str, before: bool):
    """Our step with the host-side flags the generation loop passes (swe_rl/policy/hf.py `_generate`); `before`:
    the settings of the sampler before issue 61 (no draw from the kept head, the truncation from topk(256))."""
    from swe_rl.policy.sampling import _sample

    t, top_p, top_k = DECODING[how]
    n, dev = len(logits), logits.device
    temps = torch.full((n,), t or 1.0, device=dev)
    top_ps, top_ks = torch.full((n,), top_p, device=dev), torch.full((n,), top_k, device=dev)
    greedy = torch.full((n,), t == 0, device=dev)
    trunc = t != 0 and (top_p < 1.0 or top_k > 0)
    fast = trunc and not before

    def step():
        tok, lp, ent = _sample(logits, temps, top_ps, greedy, [None] * n, top_ks=top_ks, truncate=trunc,
                               max_top_k=top_k, all_greedy=t == 0, unit_temps=t in (0, 1), all_truncate=fast,
                               first_k=top_k + 1 if fast and top_k > 0 else 256)  # fmt: skip
        return torch.stack([tok.double(), lp.double(), ent.double()]).tolist()

    return step


def transformers_step(logits: torch.Tensor, how: str):
    from transformers.generation.logits_process import (
        LogitsProcessorList,
        TemperatureLogitsWarper,
        TopKLogitsWarper,
        TopPLogitsWarper,
    )

    t, top_p, top_k = DECODING[how]
    warpers = LogitsProcessorList()
    if t:
        warpers.append(TemperatureLogitsWarper(t))
        if top_k > 0:
            warpers.append(TopKLogitsWarper(top_k))
        if top_p < 1.0:
            warpers.append(TopPLogitsWarper(top_p))
    ids = torch.zeros(len(logits), 1, dtype=torch.long, device=logits.device)

    def step():
        scores = warpers(ids, logits.to(copy=True, dtype=torch.float32))  # as generate copies the last logits
        if not t:
            return scores.argmax(-1).tolist()
        return torch.multinomial(torch.softmax(scores, dim=-1), num_samples=1).squeeze(1).tolist()

    return step


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--device", choices=("auto", "cpu", "cuda"), default="auto")
    ap.add_argument("--rows", type=int, default=0, help="0: 32 on CUDA, 16 on the CPU")
    ap.add_argument("--steps", type=int, default=20, help="steps per timing")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--cpu-dry-run", action="store_true", help="4 rows, 2 steps on the CPU: checks the code")
    ap.add_argument("--out", default="")
    args = ap.parse_args(argv)
    if args.cpu_dry_run:
        args.device, args.rows, args.steps, args.repeat = "cpu", 4, 2, 1
    cuda = args.device == "cuda" or (args.device == "auto" and torch.cuda.is_available())
    dev = "cuda" if cuda else "cpu"
    n = args.rows or (32 if cuda else 16)
    g = torch.Generator(device=dev).manual_seed(0)
    logits = torch.randn(n, VOCAB, generator=g, device=dev) * 4  # peaked rows, as a trained model's
    runs = {}
    for how in DECODING:
        runs[("ours (log-probs + entropy)", how)] = ours(logits, how, before=False)
        runs[("ours before issue 61", how)] = ours(logits, how, before=True)
        runs[("transformers warpers + multinomial", how)] = transformers_step(logits, how)
    for fn in runs.values():  # warm-up
        fn()
    best: dict[tuple[str, str], float] = {}
    for _ in range(args.repeat):  # interleaved, so drift hits all alike
        for key, fn in runs.items():
            t0 = time.perf_counter()
            for _ in range(args.steps):
                fn()
            best[key] = min(best.get(key, float("inf")), (time.perf_counter() - t0) / args.steps)
    import transformers

    env = {"date": datetime.datetime.now(datetime.UTC).date().isoformat(),
           "device": torch.cuda.get_device_name() if cuda else f"cpu ({torch.get_num_threads()} threads)",
           "versions": f"torch {torch.__version__}, transformers {transformers.__version__}",
           "setup": f"{n} rows x {VOCAB:,}, fp32 logits, {args.steps} steps, best of {args.repeat}"}  # fmt: skip
    lines = [f"sampler: {env['device']}, {env['versions']}; {env['setup']}", "",
             "| sampler | decoding | ms / step | transformers / this (speed-up) |", "|---|---|---|---|"]  # fmt: skip
    for (who, how), s in best.items():
        ref = best[("transformers warpers + multinomial", how)]
        lines.append(f"| {who} | {how} | {1e3 * s:.2f} | {ref / s:.2f}x |")
    print("\n".join(lines), flush=True)
    if args.out:
        out = Path(args.out)
        out.mkdir(parents=True, exist_ok=True)
        rows = [{"sampler": w, "decoding": h, "s_per_step": v} for (w, h), v in best.items()]
        (out / "sampler.json").write_text(json.dumps({"env": env, "results": rows}, indent=1))
        (out / "sampler.md").write_text("\n".join([f"# One sampling step, {env['date']}", "", *lines, ""]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
