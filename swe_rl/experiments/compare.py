"""`swe-rl compare`: several RL recipes x seeds from one SFT start, then PNG plots and a summary.

Each run is `<out>/<method>_s<seed>` with the demo's RL settings and the `algo` block of
configs/train/<method>.yaml; runs resume, so an interrupted comparison continues where it stopped.
"""

from __future__ import annotations

import hashlib
import json
import statistics
from pathlib import Path
from typing import Any

import yaml

from swe_rl.runs import RunDir


def recipe_algo(method: str, recipes_dir: str = "configs/train") -> dict[str, Any]:
    path = Path(recipes_dir) / f"{method}.yaml"
    if not path.is_file():
        raise FileNotFoundError(f"--method {method}: no recipe {path}")
    data = yaml.safe_load(path.read_text()) or {}
    return data.get("algo", {})


def run_compare(config: list[str], methods: list[str], seeds: list[int], overrides: list[str], out: str,
                plot_only: bool = False) -> Path:  # fmt: skip
    from swe_rl.algo.config import AlgoConfig
    from swe_rl.config import load_config
    from swe_rl.experiments.demo import DemoConfig

    demo = load_config(DemoConfig, files=[c for c in config if Path(c).is_file()], overrides=overrides)
    out_dir = Path(out)
    if not plot_only:
        init = Path(demo.init) if demo.init else None
        if init is None or not (init / "config.json").is_file():
            from swe_rl.train.sft import run_sft

            init = run_sft(demo.sft.model_copy(update={"out_dir": str(out_dir), "name": "sft"}))
        for seed in seeds:
            for method in methods:  # interleaved so a cut-short comparison still has every method
                cfg = demo.train.model_copy(deep=True)
                cfg.algo = AlgoConfig.model_validate(recipe_algo(method))
                cfg.seed, cfg.name, cfg.out_dir, cfg.model.init = (
                    seed,
                    f"{method}_s{seed}",
                    str(out_dir),
                    str(init),
                )
                _train_one(cfg)
    return summarize(out_dir, methods, seeds)


class Step0Cache:
    """Every run of a comparison starts from the same checkpoint and evaluates the same held-out episodes with
    the same seeds, so the step-0 evaluation is computed once and reused (keyed by everything it depends on)."""

    def __init__(self, evaluator: Any, path: Path, key: dict[str, Any]):
        self.evaluator, self.path, self.key = evaluator, path, key

    def __call__(self, step: int) -> dict[str, float]:
        if step != 0:
            return dict(self.evaluator(step))
        cached = json.loads(self.path.read_text()) if self.path.is_file() else {}
        if cached.get("key") == self.key:
            return dict(cached["metrics"])
        metrics = dict(self.evaluator(0))
        self.path.write_text(json.dumps({"key": self.key, "metrics": metrics}, indent=1))
        return metrics


def _train_one(cfg: Any) -> None:
    from swe_rl.train.loop import train
    from swe_rl.train.run import build_env, load_policy_model

    run = RunDir.create(cfg.out_dir, cfg.name)
    run.save_config(cfg)
    model, tok = load_policy_model(cfg)
    env = build_env(cfg, model, tok)
    # the checkpoint's weights, not only its path: a checkpoint replaced in place must be evaluated again
    weights = sorted(Path(cfg.model.init).glob("*.safetensors"))
    digest = hashlib.sha256(b"".join(p.read_bytes() for p in weights)).hexdigest()
    key = {"init": str(Path(cfg.model.init).resolve()), "weights": digest, "eval": cfg.eval.model_dump(),
           "data": cfg.data.model_dump(), "rollout": cfg.rollout.model_dump(), "sandbox": cfg.sandbox}  # fmt: skip
    evaluate = (
        Step0Cache(env.evaluator, Path(cfg.out_dir) / "eval_step0.json", key) if env.evaluator else None
    )
    try:
        print(f"compare: {cfg.name}", flush=True)
        state = train(cfg, run, model, tok, env.rollouter, env.tasks, sample_tasks=env.sample_tasks,
                      evaluate=evaluate, resume=True)  # fmt: skip
        rows = run.read_metrics()
        if env.evaluator is not None and not any(
            r["step"] == state.step and "eval/greedy_success" in r for r in rows
        ):
            run.log_metrics(state.step, {f"eval/{k}": v for k, v in env.evaluator(state.step).items()})
    finally:
        env.close()


def summarize(out_dir: Path, methods: list[str], seeds: list[int]) -> Path:
    """Plots + summary.json: held-out success at the first and last evaluation, per seed and mean gain."""
    from swe_rl.experiments.plots import aem_summary, plot_methods, series

    runs: dict[str, list[list[dict[str, Any]]]] = {}
    summary: dict[str, Any] = {}
    for m in methods:
        per_seed = []
        for s in seeds:
            rows = RunDir(out_dir / f"{m}_s{s}").read_metrics()
            if not rows:
                continue
            runs.setdefault(m, []).append(rows)
            _, mixed = series(rows, "mixed_group_frac")
            rec: dict[str, Any] = {"seed": s, "mixed_first": mixed[0] if mixed else None}
            if aem := aem_summary(rows):  # AEM's own diagnostics, averaged over the run's steps
                rec["aem"] = aem
            for mode in ("greedy", "sampled"):
                steps, succ = series(rows, f"eval/{mode}_success")
                if succ:
                    rec[mode] = {"first_step": steps[0], "last_step": steps[-1], "start": succ[0],
                                 "end": succ[-1], "gain": succ[-1] - succ[0]}  # fmt: skip
            per_seed.append(rec)
        summary[m] = {"seeds": per_seed}
        for mode in ("greedy", "sampled"):
            gains = [float(p[mode]["gain"]) for p in per_seed if mode in p]
            summary[m][f"{mode}_mean_gain"] = statistics.mean(gains) if gains else None
            summary[m][f"{mode}_sd_gain"] = statistics.stdev(gains) if len(gains) > 1 else None
        aems = [p["aem"] for p in per_seed if "aem" in p]
        if aems:
            summary[m]["aem"] = _mean_aem(aems)
    pngs = plot_methods(runs, out_dir / "plots")
    path = out_dir / "summary.json"
    path.write_text(json.dumps(summary, indent=1))
    print(json.dumps({m: {k: v for k, v in s.items() if k != "seeds"} for m, s in summary.items()}))
    print(f"compare: plots {[str(p) for p in pngs]}, summary {path}")
    return path


def _mean_aem(per_seed: list[dict[str, Any]]) -> dict[str, Any]:
    """Seed means of aem_summary's scalars and of α per turn type."""

    def avg(vals: list[Any]) -> float | None:
        vals = [v for v in vals if v is not None]
        return statistics.mean(vals) if vals else None

    turns = sorted({t for a in per_seed for t in a["alpha_by_turn"]})
    return {
        "frac_groups_range_rule": avg([a["frac_groups_range_rule"] for a in per_seed]),
        "alpha_token_mean": avg([a["alpha_token_mean"] for a in per_seed]),
        "alpha_by_turn": {t: avg([a["alpha_by_turn"].get(t) for a in per_seed]) for t in turns},
    }
