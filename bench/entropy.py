"""Exact entropy over the LM head's logits, as the trainers compute it (issue 61): what it adds to the log-probs,
each chunk size, eager and torch.compile'd, against the log-probs alone and the formula the built-in trainer used
before (a full log_softmax, then -(p * log p).sum), all on the same logits in one run.

Rows (N tokens x Qwen's 151,936 vocabulary; on CUDA 4096 tokens in bf16, one 1.5B row's old-policy forward; on the
CPU 512 tokens in fp32):
- `logprobs only`: swe_rl.algo.entropy.token_logprobs_and_entropy(with_entropy=False) (logsumexp + gather), the
  baseline every ratio is against;
- `fused, chunk C` / `fused compiled, chunk C`: the same call with the entropy (SWE_RL_ENTROPY_COMPILE=1 for the
  compiled kernel);
- `before`: the old formula, one pass per tensor op over the whole (N, V);
- `logprobs only compiled`: the baseline with its logsumexp compiled too (what "without entropy" costs when the
  flag is on).

Usage: python bench/entropy.py [--device auto|cpu|cuda] [--tokens N] [--repeat 5] [--no-compile] [--out DIR]
       python bench/entropy.py --cpu-dry-run
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # run from a plain checkout

import torch

VOCAB = 151_936


def before(logits: torch.Tensor, targets: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    logp_all = torch.log_softmax(logits.float(), dim=-1)
    lp = logp_all.gather(-1, targets[:, None]).squeeze(-1)
    return lp, -(logp_all.exp() * logp_all).sum(-1)


def timed(fn, dev: str, repeat: int) -> float:
    """Best of `repeat` seconds (after one warm-up call: kernels, allocator, compilation)."""
    fn()
    best = float("inf")
    for _ in range(repeat):
        if dev == "cuda":
            torch.cuda.synchronize()
        t0 = time.perf_counter()
        fn()
        if dev == "cuda":
            torch.cuda.synchronize()
        best = min(best, time.perf_counter() - t0)
    return best


def main(argv: list[str] | None = None) -> int:
    from swe_rl.algo.entropy import token_logprobs_and_entropy

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--device", choices=("auto", "cpu", "cuda"), default="auto")
    ap.add_argument("--tokens", type=int, default=0, help="0: 4096 on CUDA, 512 on the CPU")
    ap.add_argument("--chunks", default="", help="comma-separated token chunks (default: the device's set)")
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--no-compile", action="store_true")
    ap.add_argument(
        "--cpu-dry-run", action="store_true", help="64 tokens on the CPU, eager only: checks the code"
    )
    ap.add_argument("--out", default="")
    args = ap.parse_args(argv)
    if args.cpu_dry_run:
        args.device, args.tokens, args.chunks, args.repeat, args.no_compile = "cpu", 64, "32", 1, True
    cuda = args.device == "cuda" or (args.device == "auto" and torch.cuda.is_available())
    dev = "cuda" if cuda else "cpu"
    n = args.tokens or (4096 if cuda else 512)
    dtype = torch.bfloat16 if cuda else torch.float32
    chunks = [int(c) for c in args.chunks.split(",")] if args.chunks else ([512, 1024, 2048, 4096] if cuda else
                                                                         [32, 128, 512])  # fmt: skip
    g = torch.Generator(device=dev).manual_seed(0)
    logits = (torch.randn(n, VOCAB, generator=g, device=dev) * 3).to(dtype)
    targets = torch.randint(0, VOCAB, (n,), generator=g, device=dev)
    ref_lp, ref_h = before(logits, targets)

    def fused(chunk: int, entropy: bool = True):
        return lambda: token_logprobs_and_entropy(logits, targets, with_entropy=entropy, chunk_size=chunk)

    runs: dict[str, float] = {}
    runs["logprobs only"] = timed(fused(max(chunks), entropy=False), dev, args.repeat)
    runs["before: log_softmax, exp, product"] = timed(lambda: before(logits, targets), dev, args.repeat)
    modes = ["0"] if args.no_compile else ["0", "1"]
    compile_error = ""
    for compiled in modes:
        os.environ["SWE_RL_ENTROPY_COMPILE"] = compiled
        try:
            if compiled == "1":
                runs["logprobs only compiled"] = timed(fused(max(chunks), entropy=False), dev, args.repeat)
            for c in chunks:
                lp, h = fused(c)()
                err = max(float((lp - ref_lp).abs().max()), float((h - ref_h).abs().max()))
                assert err < 1e-3, f"chunk {c}, compile {compiled}: differs from the old formula by {err}"
                name = f"fused{' compiled' if compiled == '1' else ''}, chunk {c}"
                runs[name] = timed(fused(c), dev, args.repeat)
        except Exception as e:  # inductor needs a toolchain: the eager rows stand alone then
            if compiled == "0" or isinstance(e, AssertionError):
                raise
            compile_error = f"{type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}"
    os.environ.pop("SWE_RL_ENTROPY_COMPILE", None)
    base = runs["logprobs only"]
    env = {"date": datetime.datetime.now(datetime.UTC).date().isoformat(),
           "device": torch.cuda.get_device_name() if cuda else f"cpu ({torch.get_num_threads()} threads)",
           "versions": f"torch {torch.__version__}",
           "setup": f"{n} tokens x {VOCAB:,} vocabulary, {str(dtype).removeprefix('torch.')} logits, best of "
                    f"{args.repeat}"}  # fmt: skip
    lines = [f"entropy: {env['device']}, {env['versions']}; {env['setup']}", "",
             "| computation | ms | x logprobs only |", "|---|---|---|"]  # fmt: skip
    lines += [f"| {k} | {1e3 * v:.1f} | {v / base:.3f}x |" for k, v in runs.items()]
    if compile_error:
        lines += ["", f"torch.compile failed, eager rows only: {compile_error}"]
        env["compile_error"] = compile_error
    print("\n".join(lines), flush=True)
    if args.out:
        out = Path(args.out)
        out.mkdir(parents=True, exist_ok=True)
        (out / "entropy.json").write_text(json.dumps({"env": env, "seconds": runs}, indent=1))
        (out / "entropy.md").write_text(
            "\n".join([f"# Exact entropy over the logits, {env['date']}", "", *lines, ""])
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
