#!/usr/bin/env python3
"""Held-out evaluation of trainer checkpoints with one run's settings, as the trainer does it at eval steps.

    python scripts/eval_checkpoints.py runs/compare2/grpo_aem_s0/config.yaml out.json \\
        step0=swe_rl/train/assets/demo_sft s24=runs/compare2/grpo_aem_s0/checkpoints/step_000024/model

Each NAME=DIR is a HF model folder (an SFT checkpoint, or `checkpoints/step_N/model` of a run). The run's eval,
data, rollout and sandbox settings are used, so the numbers match the run's own `eval/...` metrics; on generated
tasks they include how the unresolved episodes failed (`fail/flawed_constant`, `fail/other_edit`, `fail/no_edit`).
Results go to OUT.json as {name: metrics}, written after each checkpoint; names already there are skipped (resume).
Every episode goes to OUT_episodes/NAME.jsonl (one JSON line each: mode, task, sample, reward, exit, failure mode,
patch, messages). OUT.png shows, per checkpoint, the share of episodes resolved and failed in each way.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path


def main(argv: list[str]) -> int:
    if len(argv) < 3 or any("=" not in a for a in argv[2:]):
        print(
            "usage: eval_checkpoints.py CONFIG OUT.json NAME=CHECKPOINT_DIR [NAME=CHECKPOINT_DIR ...]",
            file=sys.stderr,
        )
        return 2
    # the input is checked before torch and the trainer are imported: a mistake is answered in a second
    from swe_rl.config import ConfigError, load_config
    from swe_rl.train.config import TrainConfig

    config, out = Path(argv[0]), Path(argv[1])
    ckpts = dict(a.split("=", 1) for a in argv[2:])
    for name, d in ckpts.items():
        if not (Path(d) / "config.json").is_file():
            print(f"{name}={d}: expected a HF model folder with config.json", file=sys.stderr)
            return 2
    try:
        base = load_config(TrainConfig, [config])
    except (ConfigError, FileNotFoundError) as e:
        print(f"{config}: {e}", file=sys.stderr)
        return 2
    try:
        results = json.loads(out.read_text()) if out.is_file() else {}
    except json.JSONDecodeError as e:
        print(f"{out}: expected the JSON object an earlier run wrote ({e})", file=sys.stderr)
        return 2
    if not isinstance(results, dict):
        print(f"{out}: expected a JSON object of name -> metrics", file=sys.stderr)
        return 2
    import swe_rl.experiments  # noqa: F401  (registers the experiment data sources)
    from swe_rl.train.evaluate import write_episodes
    from swe_rl.train.run import build_env, load_policy_model

    for name, d in ckpts.items():
        if name in results:
            print(f"{name}: already in {out}, skipped")
            continue
        cfg = base.model_copy(update={"model": base.model.model_copy(update={"init": d})})
        model, tok = load_policy_model(cfg)
        env = build_env(cfg, model, tok)
        try:
            if env.evaluator is None:
                print(
                    f"{config}: data.source={cfg.data.source!r} has no held-out evaluation", file=sys.stderr
                )
                return 2
            metrics = env.evaluator(0)
            write_episodes(
                out.parent / f"{out.stem}_episodes" / f"{name}.jsonl", env.evaluator.last, env.evaluator.tasks
            )
        finally:
            env.close()
        results[name] = {"checkpoint": d, **metrics}
        out.write_text(json.dumps(results, indent=1))
        fails = ", ".join(f"{k}={v:.3f}" for k, v in sorted(metrics.items()) if "fail/" in k)
        print(f"{name}: greedy {metrics.get('greedy_success', 0):.3f} sampled {metrics.get('sampled_success', 0):.3f}"
              f" {fails}", flush=True)  # fmt: skip
    from swe_rl.experiments.plots import plot_failure_modes

    done = {n: results[n] for n in ckpts if n in results}
    print(f"plot: {plot_failure_modes(done, out.with_suffix('.png'))}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
