#!/usr/bin/env python3
"""AEM's mechanism probe (issue 16): one identical optimizer step, four kinds of advantages, paired over batches.

    python scripts/probe_aem.py OUT_DIR [--batches 50] [--delta 0.02] [--lr 0.5] [--optimizer sgd|adam]
                                        [--adam-warmup 0] [--sft-steps 150] [--seed 0]

Writes OUT_DIR/probe.json (config, per-start summary: paired means of Δ(kind) − Δ(GRPO) for decision entropy
and P(correct) with 95% bootstrap intervals), OUT_DIR/probe_batches.json (every batch) and OUT_DIR/probe.png.
See swe_rl/experiments/probe.py for the design. About 10 minutes on one core for the defaults (two SFT starts).
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import sys
import time
from pathlib import Path


def main(argv: list[str]) -> int:
    from swe_rl.experiments.probe import ProbeConfig, plot, run_probe

    ap = argparse.ArgumentParser(prog="probe_aem.py", description=__doc__.split("\n")[0])
    ap.add_argument("out_dir", type=Path)
    d = ProbeConfig()
    for name in ("batches", "tasks", "n", "sft_steps", "seed", "threads", "adam_warmup"):
        ap.add_argument(f"--{name.replace('_', '-')}", type=int, default=getattr(d, name))
    for name in ("delta", "lr", "lam", "sft_lr"):
        ap.add_argument(f"--{name.replace('_', '-')}", type=float, default=getattr(d, name))
    ap.add_argument("--optimizer", choices=["sgd", "adam"], default=d.optimizer)
    args = ap.parse_args(argv)
    cfg = ProbeConfig(**{k: v for k, v in vars(args).items() if k != "out_dir"})
    args.out_dir.mkdir(parents=True, exist_ok=True)
    t0 = time.monotonic()
    results, summary = run_probe(cfg)
    meta = {"config": dataclasses.asdict(cfg), "wall_s": round(time.monotonic() - t0, 1)}
    (args.out_dir / "probe.json").write_text(json.dumps({**meta, "summary": summary}, indent=1))
    (args.out_dir / "probe_batches.json").write_text(json.dumps(results, indent=1))
    png = plot(summary, args.out_dir / "probe.png")
    for start, s in summary.items():
        print(f"{start}: success {s['success_rate']:.1%}, GRPO Δentropy {s['grpo_delta']['entropy']:+.4f}, "
              f"range rule {s['aem_frac_groups_range_rule']:.0%} (per turn {s['per_turn_frac_groups_range_rule']:.0%})")  # fmt: skip
        for kind in ("aem", "reversed", "shuffled", "per_turn"):
            e, p = s[kind]["entropy"], s[kind]["p_correct"]
            print(f"  {kind:9s} ΔH−GRPO {e['mean']:+.4f} [{e['lo']:+.4f}, {e['hi']:+.4f}]   "
                  f"ΔP−GRPO {p['mean']:+.4f} [{p['lo']:+.4f}, {p['hi']:+.4f}]")  # fmt: skip
    print(f"probe: {args.out_dir / 'probe.json'}, {png}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
