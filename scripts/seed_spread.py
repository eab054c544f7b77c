"""How much a sampled held-out success rate moves with the evaluation seed alone.

One checkpoint (default: the demo's shipped SFT checkpoint), the demo's generated held-out tasks and pipeline
(sandbox slots, agent loop, grader), sampled at T=1, `--samples` runs per task, once per seed in `--seeds`. If the
runs are independent, the rates spread about as a binomial of that many runs does (the band in the plot); shared
random streams across tasks spread them wider. Writes spread.json and spread.png to --out.

Usage: .venv/bin/python scripts/seed_spread.py [--seeds 10000,20000,...] [--samples 2] [--out DIR] [--label new]
"""

from __future__ import annotations

import argparse
import json
import math
from pathlib import Path


def measure(seeds: list[int], samples: int, init: str) -> dict[int, float]:
    from swe_rl.experiments.demo import SHIPPED_SFT, DemoConfig
    from swe_rl.train.run import build_env, load_policy_model

    tcfg = DemoConfig().train.model_copy(deep=True)
    tcfg.model.init = init or str(SHIPPED_SFT)
    model, tok = load_policy_model(tcfg)
    env = build_env(tcfg, model, tok, None)
    out: dict[int, float] = {}
    try:
        roll = env.evaluator.rollouter.with_temperature(1.0)
        for seed in seeds:
            trajs = roll.rollout(env.evaluator.tasks, samples, seed)
            out[seed] = sum(float(t.reward or 0.0) for t in trajs) / len(trajs)
            print(f"seed {seed}: {len(trajs)} runs, success {out[seed]:.3f}", flush=True)
    finally:
        env.close()
    return out


def plot(results: dict[str, dict[str, float]], runs: int, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(7, 4))
    for i, (label, rates) in enumerate(results.items()):
        ys = list(rates.values())
        ax.scatter([i] * len(ys), ys, label=f"{label}: sd {_sd(ys):.3f}")
        mean = sum(ys) / len(ys)
        band = 2 * math.sqrt(mean * (1 - mean) / runs)
        ax.errorbar([i + 0.15], [mean], yerr=[band], fmt="_", color="gray", capsize=6)
    ax.set_xticks(range(len(results)), list(results), fontsize=8)
    ax.set_xlim(-0.5, len(results) - 0.3)
    ax.set_ylabel("sampled held-out success")
    ax.set_title(
        f"one checkpoint, one seed per point ({runs} runs each);\ngray: mean ± 2 binomial sd", fontsize=9
    )
    ax.legend(fontsize=8, loc="upper center")
    ax.set_ylim(min(min(r.values()) for r in results.values()) - 0.05, 1.0)
    fig.tight_layout()
    fig.savefig(path, dpi=120)


def _sd(xs: list[float]) -> float:
    m = sum(xs) / len(xs)
    return math.sqrt(sum((x - m) ** 2 for x in xs) / (len(xs) - 1))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seeds", default="10000,20000,30000,40000,50000,60000")
    ap.add_argument("--samples", type=int, default=2)
    ap.add_argument("--init", default="", help="checkpoint folder (default: the shipped demo SFT checkpoint)")
    ap.add_argument("--label", default="current seeding")
    ap.add_argument("--out", default="runs/seed_spread")
    a = ap.parse_args()
    try:
        seeds = [int(x) for x in a.seeds.split(",")]
    except ValueError:
        ap.error(f"--seeds {a.seeds!r}: expected integers separated by commas")
    if a.samples < 1:
        ap.error(f"--samples {a.samples}: expected >= 1")
    out = Path(a.out)
    out.mkdir(parents=True, exist_ok=True)
    path = out / "spread.json"
    data = json.loads(path.read_text()) if path.is_file() else {"results": {}}  # other labels are kept
    rates = measure(seeds, a.samples, a.init)
    data["results"][a.label] = {str(k): v for k, v in rates.items()}
    from swe_rl.experiments.demo import DemoConfig

    data["runs_per_seed"] = DemoConfig().train.eval.n_tasks * a.samples
    path.write_text(json.dumps(data, indent=1))
    plot(data["results"], data["runs_per_seed"], out / "spread.png")
    print(f"seed_spread: {path}, {out / 'spread.png'}")


if __name__ == "__main__":
    main()
