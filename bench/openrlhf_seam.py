"""Cost of the AEM seam inside OpenRLHF's advantage step, against OpenRLHF's own work measured in the same run.

- Baseline: upstream `RemoteExperienceMaker.get_cumulative_returns` (run verbatim from the installed openrlhf
  source; it is what group_norm / rloo / dr_grpo call per micro-batch to spread the reward over the tokens).
- Seam: `modulate_experiences` over the same batch (span ids from the action mask, per-group α, valid masking,
  per-sample diagnostics), exact-entropy mode.
Prints both times and seam / baseline. Batch: 64 tasks × 8 rollouts of 8192 tokens, 10 agent turns each, in
micro-batches of 8 (as --rollout.micro_batch_size 8 would make).

Usage: python bench/openrlhf_seam.py [--tasks 64] [--tokens 8192] [--turns 10]
"""

from __future__ import annotations

import argparse
import ast
import importlib.util
import time
from pathlib import Path

import torch


def upstream_cumulative_returns():
    root = Path(next(iter(importlib.util.find_spec("openrlhf").submodule_search_locations)))
    tree = ast.parse((root / "trainer/ppo_utils/experience_maker.py").read_text())
    cls = next(n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == "RemoteExperienceMaker")
    fn = next(n for n in cls.body if isinstance(n, ast.FunctionDef) and n.name == "get_cumulative_returns")
    fn.decorator_list = []
    ns = {"torch": torch, "Tuple": tuple}
    exec(compile(ast.Module(body=[fn], type_ignores=[]), "experience_maker.py", "exec"), ns)
    return ns["get_cumulative_returns"]


def make_batch(tasks: int, n: int, tokens: int, turns: int, micro: int):
    from openrlhf.trainer.ppo_utils.experience import Experience

    from swe_rl.train.openrlhf.aem_seam import VALID_KEY

    g = torch.Generator().manual_seed(0)
    total = tasks * n
    mask = torch.zeros(total, tokens, dtype=torch.bool)
    seg = tokens // (2 * turns)
    for t in range(turns):  # turn t: policy tokens in [2t·seg + 1, (2t+1)·seg), observations in between
        mask[:, 2 * t * seg + 1 : (2 * t + 1) * seg] = True
    perm = torch.randperm(total, generator=g)
    rewards = torch.randint(0, 2, (total,), generator=g).float()
    exps, ents = [], []  # ents: the exact (B, A) entropy per micro-batch, as our policy forward returns it
    for start in range(0, total, micro):
        idx = perm[start : start + micro]
        lp = -torch.rand(len(idx), tokens, generator=g) * mask[idx]
        ents.append(torch.rand(len(idx), tokens, generator=g) * 2 * mask[idx])
        exps.append(Experience(action_mask=mask[idx], action_log_probs=lp, rewards=rewards[idx],
                               index=idx.tolist(), info={VALID_KEY: (torch.rand(len(idx), generator=g) > 0.05).float()}))  # fmt: skip
    return exps, ents


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--tasks", type=int, default=64)
    ap.add_argument("--n", type=int, default=8)
    ap.add_argument("--tokens", type=int, default=8192)
    ap.add_argument("--turns", type=int, default=10)
    ap.add_argument("--micro", type=int, default=8)
    args = ap.parse_args()
    from swe_rl.train.openrlhf.aem_seam import modulate_experiences
    from swe_rl.train.openrlhf.config import AemConfig

    returns = upstream_cumulative_returns()
    exps, ents = make_batch(args.tasks, args.n, args.tokens, args.turns, args.micro)
    t0 = time.perf_counter()
    for e in exps:  # OpenRLHF's per-micro-batch work for group_norm (reward already baseline-subtracted)
        r = torch.zeros(e.action_mask.shape)
        r[:, -1] = e.rewards
        e.advantages = returns(None, r, e.action_mask, 1.0)
    base = time.perf_counter() - t0
    t0 = time.perf_counter()
    diag = modulate_experiences(exps, args.n, AemConfig(), ents)
    seam = time.perf_counter() - t0
    tokens = args.tasks * args.n * args.tokens
    print(f"batch: {args.tasks}x{args.n} samples x {args.tokens} tokens ({tokens / 1e6:.1f}M), {args.turns} turns, "
          f"{int(diag['num_spans'])} spans")  # fmt: skip
    print(f"baseline upstream get_cumulative_returns: {base:.3f} s")
    print(f"AEM seam (modulate_experiences):         {seam:.3f} s")
    print(f"ratio seam / baseline: {seam / base:.2f}")


if __name__ == "__main__":
    main()
