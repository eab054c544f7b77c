"""Benchmarks for swe_rl.algo; every number is a ratio against a baseline measured in the same run.

1. AEM on a batch of B trajectories × T tokens × ~50 spans each (defaults: 512 × 32,768, groups of 8):
   vectorized vs a per-span Python loop (goal ≥ 50×), and vs plain GRPO broadcast (goal: AEM adds ≤ 20%).
2. Chunked vs naive token entropy at vocab 151,936 (defaults: 4,096 tokens, bf16 logits, chunk 512):
   peak extra memory (goal ≤ 1/8) and time (goal ≤ 1.2×). Each variant runs in a fresh subprocess and its peak
   is read from the kernel's high-water mark (VmHWM) minus the resident size after the inputs exist.

Usage: python bench/algo.py [--rows 512] [--tokens 32768] [--ent-tokens 4096] [--chunk 512] [--quick]
       [--part all|aem|entropy]
Peak RAM ≈ 2 GB for part 1 and ≈ 9 GB for the naive entropy at the defaults (fits the 24 GiB dev machine).
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from collections.abc import Callable

import torch

VOCAB = 151_936


def best_of(fn: Callable[[], object], repeat: int) -> float:
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return min(times)


def make_batch(rows: int, tokens: int, spans: int, group: int, seed: int = 0):
    """Loss mask with ~`spans` response spans per row (alternating runs cut at 2·spans random points)."""
    g = torch.Generator().manual_seed(seed)
    cuts = torch.randint(1, tokens, (rows, 2 * spans), generator=g)
    flips = torch.zeros(rows, tokens + 1, dtype=torch.int32).scatter_add_(
        1, cuts, torch.ones_like(cuts, dtype=torch.int32)
    )
    mask = (flips[:, :tokens].cumsum(1) % 2 == 1).to(torch.int8)
    del flips
    entropy = torch.rand(rows, tokens, generator=g) * 2.0
    rewards = (torch.rand(rows, generator=g) > 0.5).float()
    groups = torch.arange(rows) // group
    return mask, entropy, rewards, groups


def aem_loop(row_adv, entropy, spans_py, span_group_py, lam=1.0, min_range=0.1):
    """Reference per-span Python loop (the paper's pseudocode): per-span mean, per-group α, per-span write."""
    out = torch.zeros_like(entropy)
    hbar = [entropy[b, s:e].mean().item() for b, s, e in spans_py]
    by_group: dict[int, list[int]] = {}
    for i, grp in enumerate(span_group_py):
        by_group.setdefault(grp, []).append(i)
    alpha = [1.0] * len(spans_py)
    for members in by_group.values():
        hs = [hbar[i] for i in members]
        lo, hi = min(hs), max(hs)
        if hi - lo < min_range:
            continue
        w = [torch.exp(torch.tensor(-lam * (h - lo) / (hi - lo))).item() for h in hs]
        mean = sum(w) / len(w)
        for i, wi in zip(members, w, strict=True):
            alpha[i] = wi / mean
    for (b, s, e), a in zip(spans_py, alpha, strict=True):
        out[b, s:e] = row_adv[b] * a
    return out


def bench_aem(rows: int, tokens: int, repeat: int) -> None:
    from swe_rl.algo.advantages import grpo
    from swe_rl.algo.aem import aem_token_advantages
    from swe_rl.algo.spans import span_index

    mask, ent, rewards, groups = make_batch(rows, tokens, spans=50, group=8)
    valid = torch.ones(rows, dtype=torch.bool)

    def plain() -> torch.Tensor:
        return grpo(rewards, groups, valid)[:, None] * mask

    def aem_full() -> torch.Tensor:
        adv = grpo(rewards, groups, valid)
        idx = span_index(mask)
        return aem_token_advantages(adv, ent, idx, idx.group(groups))[0]

    idx = span_index(mask)
    span_group = idx.group(groups)

    def aem_given_spans() -> torch.Tensor:
        return aem_token_advantages(grpo(rewards, groups, valid), ent, idx, span_group)[0]

    print(
        f"AEM batch: {rows} rows × {tokens} tokens, {idx.num_spans} spans ({idx.num_spans / rows:.1f}/row), groups of 8"
    )
    # the loop gets span boundaries for free (from the vectorized index)
    run_start = idx.run_lengths.cumsum(0) - idx.run_lengths
    s_flat = run_start[idx.run_span >= 0]
    spans_py = [
        (int(b), int(s), int(s) + int(n))
        for b, s, n in zip(
            (s_flat // tokens).tolist(), (s_flat % tokens).tolist(), idx.length.tolist(), strict=True
        )
    ]
    adv = grpo(rewards, groups, valid)
    span_group_py = span_group.tolist()
    # rounds interleave the variants so load drift on a shared machine hits all of them alike; min per variant
    t_plain = t_full = t_given = t_loop = float("inf")
    for _ in range(repeat):
        t_plain = min(t_plain, best_of(plain, 1))
        t_full = min(t_full, best_of(aem_full, 1))
        t_given = min(t_given, best_of(aem_given_spans, 1))
        t_loop = min(t_loop, best_of(lambda: aem_loop(adv, ent, spans_py, span_group_py), 1))
    ref = aem_loop(adv, ent, spans_py, span_group_py)
    err = (ref - aem_full()).abs().max().item()
    print(f"  plain GRPO broadcast          {t_plain * 1e3:9.1f} ms")
    print(
        f"  AEM vectorized (incl. spans)  {t_full * 1e3:9.1f} ms   adds {100 * (t_full / t_plain - 1):.0f}% over plain"
    )
    print(
        f"  AEM vectorized (spans given)  {t_given * 1e3:9.1f} ms   adds {100 * (t_given / t_plain - 1):.0f}% over plain"
    )
    print(f"  AEM per-span Python loop      {t_loop * 1e3:9.1f} ms   (max |diff| vs vectorized {err:.1e})")
    print(f"  RATIO loop / vectorized = {t_loop / t_full:.1f}x (goal >= 50x)")
    print(
        f"  RATIO AEM / plain GRPO = {t_full / t_plain:.2f} (goal <= 1.20); spans given: {t_given / t_plain:.2f}"
    )


CHILD = r"""
import json, sys, time, torch
mode, n, chunk, repeat, V = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4]), int(sys.argv[5])
def rss(field):
    for line in open("/proc/self/status"):
        if line.startswith(field):
            return int(line.split()[1]) * 1024
logits = torch.empty(n, V, dtype=torch.bfloat16)
g = torch.Generator().manual_seed(0)
for i in range(0, n, 256):  # fill without a full-size fp32 temporary
    logits[i:i + 256] = (torch.randn(min(256, n - i), V, generator=g) * 3).to(torch.bfloat16)
def naive():
    z = logits.float()  # the textbook / verl entropy_from_logits on the whole tensor
    p = torch.softmax(z, dim=-1)
    return torch.logsumexp(z, dim=-1) - (p * z).sum(-1)
from swe_rl.algo.entropy import token_entropy
fn = naive if mode == "naive" else (lambda: token_entropy(logits, chunk_size=chunk))
try:  # reset the high-water mark so the fill loop's temporaries do not count
    open("/proc/self/clear_refs", "w").write("5")
except OSError:
    pass
with torch.no_grad():
    before = rss("VmRSS")
    out = fn()
    peak = rss("VmHWM") - before
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter(); out = fn(); times.append(time.perf_counter() - t0)
print(json.dumps({"peak": peak, "time": min(times), "mean_h": float(out.mean())}))
"""


def run_child(mode: str, n: int, chunk: int, repeat: int) -> dict[str, float]:
    proc = subprocess.run(
        [sys.executable, "-c", CHILD, mode, str(n), str(chunk), str(repeat), str(VOCAB)],
        capture_output=True,
        text=True,
        check=False,
    )
    if proc.returncode != 0:
        raise RuntimeError(f"entropy bench child ({mode}) failed:\n{proc.stderr[-2000:]}")
    return json.loads(proc.stdout.strip().splitlines()[-1])


def bench_entropy(n: int, chunk: int, repeat: int) -> None:
    print(
        f"Entropy: {n} tokens × vocab {VOCAB}, bf16 logits ({n * VOCAB * 2 / 2**30:.2f} GiB), chunk {chunk}"
    )
    naive = run_child("naive", n, chunk, repeat)
    chunked = run_child("chunked", n, chunk, repeat)
    gib = 2**30
    print(f"  naive    peak extra {naive['peak'] / gib:6.2f} GiB   time {naive['time'] * 1e3:8.1f} ms")
    print(f"  chunked  peak extra {chunked['peak'] / gib:6.2f} GiB   time {chunked['time'] * 1e3:8.1f} ms")
    print(f"  (mean entropy naive {naive['mean_h']:.5f} / chunked {chunked['mean_h']:.5f})")
    print(f"  RATIO memory chunked / naive = {chunked['peak'] / naive['peak']:.3f} (goal <= 0.125)")
    print(f"  RATIO time chunked / naive = {chunked['time'] / naive['time']:.2f} (goal <= 1.20)")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rows", type=int, default=512)
    ap.add_argument("--tokens", type=int, default=32_768)
    ap.add_argument("--ent-tokens", type=int, default=4096)
    ap.add_argument("--chunk", type=int, default=512)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--quick", action="store_true", help="small sizes, for a smoke run")
    ap.add_argument("--part", choices=["all", "aem", "entropy"], default="all", help="run one part only")
    args = ap.parse_args()
    if args.quick:
        args.rows, args.tokens, args.ent_tokens, args.repeat = 64, 4096, 512, 2
    torch.manual_seed(0)
    print(f"torch {torch.__version__}, {torch.get_num_threads()} threads")
    if args.part in ("all", "aem"):
        bench_aem(args.rows, args.tokens, args.repeat)
    if args.part in ("all", "entropy"):
        bench_entropy(args.ent_tokens, args.chunk, args.repeat)


if __name__ == "__main__":
    main()
