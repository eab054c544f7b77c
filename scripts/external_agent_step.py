"""One built-in trainer step from mini-swe-agent's trajectories through the recording gateway, with the drift check.

    .venv/bin/python scripts/external_agent_step.py [--tasks 4] [--samples 2] [--steps 1] [--temperature 1.0]

mini-swe-agent (its DefaultAgent + litellm) runs on generated micro tasks in Docker sandbox slots, driven by the
shipped tiny SFT model (HF local policy) behind `swe_rl.gateway`; CachedGrader grades the patches; the sessions
feed `swe_rl.train.loop.train` (GRPO + AEM). Prints one JSON object: per-step loss, grad norm, rows, rollout_lp_gap,
rewards, and the drift summary over all sessions (text / token matches, sessions that did not chain and why).
"""

from __future__ import annotations

import argparse
import json
import tempfile
from collections import Counter
from typing import Any


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--tasks", type=int, default=4)
    ap.add_argument("--samples", type=int, default=2)
    ap.add_argument("--steps", type=int, default=1)
    ap.add_argument("--temperature", type=float, default=1.0)
    ap.add_argument("--step-limit", type=int, default=4)
    ap.add_argument(
        "--gold-every", type=int, default=0, help="every k-th run also applies the gold fix (0 = none)"
    )
    args = ap.parse_args()

    from transformers import AutoModelForCausalLM

    from swe_rl.experiments.demo import SHIPPED_SFT
    from swe_rl.gateway.external import ExternalRollouter, WithGoldFix, demo_mini_agent
    from swe_rl.gateway.server import Gateway
    from swe_rl.policy.hf import HFLocalPolicy
    from swe_rl.policy.tiny import load_tokenizer
    from swe_rl.runs import RunDir
    from swe_rl.tasks.generator import generate_tasks, sample_batch
    from swe_rl.train.config import TrainConfig
    from swe_rl.train.env import CachedGrader, SandboxSlots
    from swe_rl.train.loop import train

    tok = load_tokenizer(SHIPPED_SFT)
    model = AutoModelForCausalLM.from_pretrained(SHIPPED_SFT).eval()
    cfg = TrainConfig(name="external", out_dir=tempfile.mkdtemp(), steps=args.steps, save_every=0)
    cfg.rollout.tasks_per_step, cfg.rollout.n_samples = args.tasks, args.samples
    cfg.rollout.temperature, cfg.optim.lr, cfg.algo.modulator.kind = args.temperature, 1e-4, "aem"
    agent: Any = demo_mini_agent(step_limit=args.step_limit, max_tokens=48, temperature=args.temperature)
    if args.gold_every:
        agent = WithGoldFix(agent, every=args.gold_every)
    slots = SandboxSlots(min(args.tasks * args.samples, 8))
    gw = Gateway(HFLocalPolicy(model, tok), tok, max_context_tokens=2048, default_max_tokens=48).start()
    seen = []

    class Capture:
        def rollout(self, tasks, n, seed):
            out = ExternalRollouter(agent, gw, slots, CachedGrader(slots)).rollout(tasks, n, seed)
            seen.extend(out)
            return out

    run = RunDir.create(cfg.out_dir, cfg.name)
    try:
        train(cfg, run, model, tok, Capture(), generate_tasks(50, "train", 0), sample_tasks=sample_batch)
    finally:
        gw.stop()
        slots.close()
    keys = ("loss", "grad_norm", "rollout_lp_gap", "policy_tokens", "total_tokens", "reward_mean", "updates")
    gws = [t.metrics.get("gateway", {}) for t in seen]
    drift = [g.get("drift", {}) for g in gws]
    print(json.dumps({
        "steps": [{k: r.get(k) for k in keys} | {"rows": args.tasks * args.samples} for r in run.read_metrics()],
        "episodes": len(seen), "exit": Counter(t.exit_status for t in seen), "rewards": [t.reward for t in seen],
        "calls": sum(g.get("calls", 0) for g in gws), "assembled": sum(bool(g.get("assembled")) for g in gws),
        "not_chained_reasons": Counter(g.get("reason") for g in gws if not g.get("assembled")),
        "drift_text_match": sum(bool(d.get("text_match")) for d in drift),
        "drift_token_match": sum(bool(d.get("token_match")) for d in drift),
        # re-rendered minus recorded tokens: +1 is the template's trailing "\n", +2 also a closing <|im_end|>
        "drift_token_count_delta": [d.get("rerendered_tokens", 0) - d.get("recorded_tokens", 0) for d in drift],
    }, indent=1, default=str))  # fmt: skip


if __name__ == "__main__":
    main()
