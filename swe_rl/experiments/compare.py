"""`swe-rl compare`: several RL recipes x seeds from one SFT start, then PNG plots and a summary.

Each run is `<out>/<method>_s<seed>` with the demo's RL settings and the `algo` block of
configs/train/<method>.yaml; runs resume, so an interrupted comparison continues where it stopped. With
`jobs > 1` the runs go to that many worker processes (after the start checkpoint exists).

Every held-out evaluation writes its episodes to `<run>/eval_episodes/step_<step>.jsonl` (how each one failed can
be read afterwards) and its per-task rewards to `<run>/eval_tasks/step_<step>.json`; the summary's
primary metric (fixed before the outcome study ran, so that no result could choose it) is read from them: per run and held-out task, the mean
sampled (T=1) success over the last K evaluations and all samples; per method, the paired difference against a
baseline method, seed by seed, with a two-level bootstrap interval (seeds, then tasks; swe_rl.experiments.stats).
"""

from __future__ import annotations

import hashlib
import json
import os
import statistics
from pathlib import Path
from typing import Any

import yaml

from swe_rl.runs import RunDir

PRIMARY_METRIC = (
    "mean sampled (T=1) held-out success over the last {k} evaluations, per task over all samples; "
    "per seed the mean over tasks"
)


def recipe_algo(method: str, recipes_dir: str = "configs/train") -> dict[str, Any]:
    path = Path(recipes_dir) / f"{method}.yaml"
    if not path.is_file():
        raise FileNotFoundError(f"--method {method}: no recipe {path}")
    data = yaml.safe_load(path.read_text()) or {}
    return data.get("algo", {})


def run_compare(config: list[str], methods: list[str], seeds: list[int], overrides: list[str], out: str,
                plot_only: bool = False, jobs: int = 1, baseline: str | None = None,
                last_k: int = 3) -> Path:  # fmt: skip
    from swe_rl.config import load_config
    from swe_rl.experiments.demo import DemoConfig

    if jobs < 1:
        raise ValueError(f"compare: jobs must be >= 1, got {jobs}")
    if baseline is not None and baseline not in methods:
        raise ValueError(f"compare: baseline {baseline!r} is not one of the methods {methods}")
    demo = load_config(DemoConfig, files=[c for c in config if Path(c).is_file()], overrides=overrides)
    out_dir = Path(out)
    if not plot_only:
        init = start_checkpoint(demo, out_dir)
        cfgs = run_configs(demo, methods, seeds, out_dir, init)
        from swe_rl.train.run import check_run_dir

        for cfg in cfgs:  # the runs resume: one whose recipe changed since would mix two setups (ConfigError)
            check_run_dir(cfg, resume=True)
        if jobs == 1:
            for cfg in cfgs:
                _train_one(cfg)
        else:
            _train_parallel(cfgs, jobs)
    return summarize(out_dir, methods, seeds, baseline=baseline, last_k=last_k)


def start_checkpoint(demo: Any, out_dir: Path) -> Path:
    """The HF folder every run starts from: the decisions environment's own start, the configured `init`, or an
    SFT run into <out>/sft. Built here, in the parent, so that parallel workers never race to build it."""
    if demo.train.data.source == "decisions":
        from swe_rl.experiments.decisions import build_start

        return Path(build_start(demo.train, out_dir / "start"))
    init = Path(demo.init) if demo.init else None
    if init is None or not (init / "config.json").is_file():
        from swe_rl.train.sft import run_sft

        init = run_sft(demo.sft.model_copy(update={"out_dir": str(out_dir), "name": "sft"}))
    return Path(init)


def run_configs(demo: Any, methods: list[str], seeds: list[int], out_dir: Path, init: Path) -> list[Any]:
    """One TrainConfig per (method, seed), interleaved (seed-major) so a cut-short comparison still has every
    method."""
    from swe_rl.algo.config import AlgoConfig

    cfgs = []
    for seed in seeds:
        for method in methods:
            cfg = demo.train.model_copy(deep=True)
            cfg.algo = AlgoConfig.model_validate(recipe_algo(method))
            cfg.seed, cfg.name, cfg.out_dir, cfg.model.init = (
                seed,
                f"{method}_s{seed}",
                str(out_dir),
                str(init),
            )
            cfgs.append(cfg)
    return cfgs


def _train_parallel(cfgs: list[Any], jobs: int) -> None:
    """The runs in `jobs` spawned worker processes, submitted in order. When a run fails, the runs not yet
    started are cancelled, the running ones finish (they are resumable anyway), then this raises naming it."""
    import multiprocessing
    from concurrent.futures import FIRST_EXCEPTION, ProcessPoolExecutor, wait

    threads = max(1, (os.cpu_count() or 1) // jobs)
    ctx = multiprocessing.get_context("spawn")
    with ProcessPoolExecutor(max_workers=jobs, mp_context=ctx) as pool:
        futures = {pool.submit(_train_worker, cfg, threads): cfg.name for cfg in cfgs}
        done, _ = wait(futures, return_when=FIRST_EXCEPTION)
        failed = [(futures[f], f.exception()) for f in done if f.exception() is not None]
        if failed:
            for f in futures:
                f.cancel()
            wait(futures)
            failed = [(futures[f], f.exception()) for f in futures if not f.cancelled() and f.exception()]
            names = ", ".join(n for n, _ in failed)
            raise RuntimeError(f"compare: run(s) failed: {names}: {failed[0][1]}") from failed[0][1]


def _train_worker(cfg: Any, default_threads: int) -> str:
    """One run in a worker process: torch threads from cfg.model.threads (or the parent's share of the cores)."""
    import torch

    torch.set_num_threads(cfg.model.threads or default_threads)
    try:
        _train_one(cfg)
    except Exception as e:  # the run's name travels with the error; the traceback as text (it may not pickle)
        import traceback

        raise RuntimeError(f"{cfg.name}: {type(e).__name__}: {e}\n{traceback.format_exc()}") from None
    return cfg.name


class Step0Cache:
    """Every run of a comparison starts from the same checkpoint and evaluates the same held-out episodes with
    the same seeds, so the step-0 evaluation is computed once and reused (keyed by everything it depends on).
    The cache file also holds the per-task rewards, written into each run's eval_tasks record when served from
    the cache, and the sha256 of its episodes file (`<cache>.episodes.jsonl` beside it), copied into each run's
    eval_episodes when it matches. Files are written atomically: parallel runs may compute them at the same time
    (same content)."""

    def __init__(self, evaluator: Any, path: Path, key: dict[str, Any]):
        self.evaluator, self.path, self.key = evaluator, path, key
        self.episodes = path.with_name(f"{path.stem}.episodes.jsonl")

    def __call__(self, step: int) -> dict[str, float]:
        from swe_rl.evaluation.store import atomic_write
        from swe_rl.train.evaluate import episodes_path, write_record

        if step != 0:
            return dict(self.evaluator(step))
        record_dir = getattr(self.evaluator, "record_dir", None)
        episodes_dir = getattr(self.evaluator, "episodes_dir", None)
        try:
            cached = json.loads(self.path.read_text()) if self.path.is_file() else {}
        except json.JSONDecodeError:  # a torn file from before writes were atomic: evaluate again
            cached = {}
        if cached.get("key") == self.key and (record_dir is None or "tasks" in cached):
            if record_dir is not None:
                write_record(record_dir, 0, cached["tasks"])
            text = self.episodes.read_text() if self.episodes.is_file() else ""
            if episodes_dir is not None and _sha256(text) == cached.get("episodes_sha256"):
                atomic_write(episodes_path(episodes_dir, 0), text)
            return dict(cached["metrics"])
        metrics = dict(self.evaluator(0))  # writes its own record and episodes when their dirs are set
        entry: dict[str, Any] = {"key": self.key, "metrics": metrics}
        if (tasks := getattr(self.evaluator, "last_record", None)) is not None:
            entry["tasks"] = tasks
        if episodes_dir is not None and (written := episodes_path(episodes_dir, 0)).is_file():
            text = written.read_text()
            atomic_write(self.episodes, text)
            entry["episodes_sha256"] = _sha256(text)
        atomic_write(self.path, json.dumps(entry, indent=1))
        return metrics


def _sha256(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


def _train_one(cfg: Any) -> None:
    from swe_rl.agent.loop import SAMPLING_VERSION
    from swe_rl.train.loop import train
    from swe_rl.train.run import build_env, load_policy_model

    run = RunDir.create(cfg.out_dir, cfg.name)
    run.save_config(cfg)
    model, tok = load_policy_model(cfg)
    env = build_env(cfg, model, tok)
    if env.evaluator is not None:  # every evaluation's per-task rewards (the paired bootstrap) and episodes
        env.evaluator.keep_in(run)
    # the checkpoint's weights, not only its path: a checkpoint replaced in place must be evaluated again
    weights = sorted(Path(cfg.model.init).glob("*.safetensors"))
    digest = hashlib.sha256(b"".join(p.read_bytes() for p in weights)).hexdigest()
    key = {"init": str(Path(cfg.model.init).resolve()), "weights": digest, "eval": cfg.eval.model_dump(),
           "data": cfg.data.model_dump(), "rollout": cfg.rollout.model_dump(), "sandbox": cfg.sandbox,
           "sampling": SAMPLING_VERSION}  # fmt: skip
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


def summarize(out_dir: Path, methods: list[str], seeds: list[int], baseline: str | None = None,
              last_k: int = 3, mode: str = "sampled", draws: int = 10_000) -> Path:  # fmt: skip
    """Plots, summary.json and summary.md: held-out success at the first and last evaluation (per seed and the
    mean gain), AEM's diagnostics and, where the runs have eval_tasks records, the primary metric with its
    paired two-level bootstrap against `baseline` (default: the first method)."""
    from swe_rl.experiments.plots import aem_summary, plot_methods, plot_paired, series

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
            for md in ("greedy", "sampled"):
                steps, succ = series(rows, f"eval/{md}_success")
                if succ:
                    rec[md] = {"first_step": steps[0], "last_step": steps[-1], "start": succ[0],
                               "end": succ[-1], "gain": succ[-1] - succ[0]}  # fmt: skip
            per_seed.append(rec)
        summary[m] = {"seeds": per_seed}
        for md in ("greedy", "sampled"):
            gains = [float(p[md]["gain"]) for p in per_seed if md in p]
            summary[m][f"{md}_mean_gain"] = statistics.mean(gains) if gains else None
            summary[m][f"{md}_sd_gain"] = statistics.stdev(gains) if len(gains) > 1 else None
        aems = [p["aem"] for p in per_seed if "aem" in p]
        if aems:
            summary[m]["aem"] = _mean_aem(aems)
        summary[m]["entropy_by_step"] = _seed_mean_curve(runs.get(m, []), "entropy_mean")
    pngs = plot_methods(runs, out_dir / "plots")
    primary = primary_block(out_dir, methods, seeds, baseline or methods[0], last_k, mode, draws)
    if primary is None:
        print(f"compare: no eval_tasks records with {mode!r} evaluations in {out_dir} (runs from before the "
              "per-task records, or no sampled evaluation): the primary metric is skipped")  # fmt: skip
    else:
        summary["primary"] = primary
        if primary["paired"]:
            pngs.append(plot_paired(primary, out_dir / "plots" / "paired_primary.png"))
    path = out_dir / "summary.json"
    path.write_text(json.dumps(summary, indent=1))
    (out_dir / "summary.md").write_text(summary_markdown(summary, methods))
    print(json.dumps({m: {k: v for k, v in s.items() if k not in ("seeds", "entropy_by_step")}
                      for m, s in summary.items()
                      if m != "primary"}))  # fmt: skip
    if primary is not None:
        print(json.dumps({m: {k: p[k] for k in ("mean", "lo", "hi", "n_positive", "n_seeds")}
                          for m, p in primary["paired"].items()}))  # fmt: skip
    print(f"compare: plots {[str(p) for p in pngs]}, summary {path}, {out_dir / 'summary.md'}")
    return path


def read_records(run_root: Path) -> dict[int, dict[str, dict[str, list[float]]]]:
    """step -> mode -> task_id -> rewards, from <run>/eval_tasks/step_*.json ({} when there are none)."""
    out = {}
    for p in sorted((run_root / "eval_tasks").glob("step_*.json")):
        rec = json.loads(p.read_text())
        out[int(rec["step"])] = rec["modes"]
    return out


def run_primary(records: dict[int, dict[str, dict[str, list[float]]]], mode: str, last_k: int
                ) -> tuple[list[int], dict[str, float]] | None:  # fmt: skip
    """(steps used, task_id -> mean reward over the last `last_k` evaluations with `mode` and all their samples);
    None without such evaluations. A task missing from one of those evaluations averages the others."""
    steps = sorted(s for s, modes in records.items() if modes.get(mode))[-last_k:]
    if not steps:
        return None
    per_task: dict[str, list[float]] = {}
    for s in steps:
        for task, rewards in records[s][mode].items():
            per_task.setdefault(task, []).extend(float(r) for r in rewards)
    return steps, {t: statistics.mean(v) for t, v in per_task.items() if v}


def primary_block(out_dir: Path, methods: list[str], seeds: list[int], baseline: str, last_k: int, mode: str,
                  draws: int) -> dict[str, Any] | None:  # fmt: skip
    """summary.json's "primary": per method the per-seed metric and its mean; per non-baseline method the
    paired difference against `baseline` over the seeds both have and the held-out tasks all those pairs have,
    with its two-level bootstrap. None when no run has records."""
    import numpy as np

    from swe_rl.experiments.stats import mean_t_interval, paired_two_level_bootstrap, small_seed_summary

    if last_k < 1:
        raise ValueError(f"compare: last_k must be >= 1, got {last_k}")
    per: dict[str, dict[int, tuple[list[int], dict[str, float]]]] = {}
    for m in methods:
        for s in seeds:
            if (res := run_primary(read_records(out_dir / f"{m}_s{s}"), mode, last_k)) is not None:
                per.setdefault(m, {})[s] = res
    if not per:
        return None
    block: dict[str, Any] = {"metric": PRIMARY_METRIC.format(k=last_k), "last_k": last_k, "mode": mode,
                             "baseline": baseline, "methods": {}, "paired": {}}  # fmt: skip
    for m, by_seed in per.items():
        vals = [statistics.mean(by_seed[s][1].values()) for s in sorted(by_seed)]
        mean, lo, hi = mean_t_interval(vals)
        block["methods"][m] = {"mean": mean, "t95": [lo, hi], "seeds": sorted(by_seed), "per_seed": vals,
                               "steps": {str(s): by_seed[s][0] for s in sorted(by_seed)}}  # fmt: skip
    base = per.get(baseline, {})
    if not base:
        print(f"compare: baseline {baseline!r} has no eval_tasks records: no paired differences")
    for m, by_seed in per.items():
        if m == baseline:
            continue
        common = sorted(set(by_seed) & set(base))
        if not common:
            print(f"compare: {m} and {baseline} share no seed with records: no paired difference for {m}")
            continue
        tasks = sorted(set.intersection(*(set(by_seed[s][1]) & set(base[s][1]) for s in common)))
        if not tasks:
            print(f"compare: {m} and {baseline} share no held-out task: no paired difference for {m}")
            continue
        mismatched = [s for s in common if by_seed[s][0] != base[s][0]]
        if mismatched:
            print(f"compare: {m} vs {baseline}: seeds {mismatched} were evaluated at different steps "
                  "(a run not finished?); paired anyway")  # fmt: skip
        diff = np.array([[by_seed[s][1][t] - base[s][1][t] for t in tasks] for s in common])
        boot = paired_two_level_bootstrap(diff, draws=draws)
        block["paired"][m] = {**boot, "seeds": common, "steps_mismatched_seeds": mismatched,
                              "small_seed": small_seed_summary(boot["per_seed"])}  # fmt: skip
    return block


def summary_markdown(summary: dict[str, Any], methods: list[str]) -> str:
    """summary.md: the primary metric with the paired differences, then AEM's diagnostics, the entropy curve and
    the gains."""

    def pct(v: float | None, sign: bool = False) -> str:
        return "n/a" if v is None else format(100 * v, "+.1f" if sign else ".1f")

    out = ["# `swe-rl compare` summary", ""]
    primary = summary.get("primary")
    if primary is None:
        out += ["No per-task evaluation records (eval_tasks/): the primary metric is not available.", ""]
    else:
        base = primary["baseline"]
        draws = next((p["draws"] for p in primary["paired"].values()), 0)
        out += [f"Primary metric (fixed in advance): {primary['metric']}. Paired differences against `{base}` "
                f"with 95% intervals from a two-level bootstrap (seeds, then held-out tasks inside each seed; "
                f"{draws} draws), the seeds-only interval and, for few seeds, the t-interval over the per-seed "
                "differences and the exact sign-flip permutation p (two-sided). Points of success.", "",
                "| method | seeds | primary (mean, %) | paired diff vs baseline (95% CI, two-level) | seeds-only CI "
                "| t-interval | sign-flip p | median | seeds with d > 0 |",
                "|---|---|---|---|---|---|---|---|---|"]  # fmt: skip
        for m in methods:
            if m not in primary["methods"]:
                continue
            pm = primary["methods"][m]
            out.append(f"| {m} | {len(pm['seeds'])} | {pct(pm['mean'])} | " + " | ".join(_paired_cells(
                primary["paired"].get(m), m == base, pct)) + " |")  # fmt: skip
        out.append("")
    aem_rows = [(m, summary[m]["aem"]) for m in methods if m in summary and "aem" in summary[m]]
    if aem_rows:
        turns = sorted({t for _, a in aem_rows for t in a["alpha_by_turn"]})
        out += ["AEM diagnostics (seed means of per-run step means):", "",
                "| method | groups under the range rule | token-weighted mean α | "
                + " | ".join(f"mean α, {t}" for t in turns) + " |",
                "|---|---|---|" + "---|" * len(turns)]  # fmt: skip

        def num(v: float | None, fmt: str) -> str:
            return "n/a" if v is None else format(v, fmt)

        for m, a in aem_rows:
            cells = [num(a["frac_groups_range_rule"], ".0%"), num(a["alpha_token_mean"], ".3f")]
            cells += [num(a["alpha_by_turn"].get(t), ".3f") for t in turns]
            out.append(f"| {m} | " + " | ".join(cells) + " |")
        out.append("")
    curves = {m: summary[m].get("entropy_by_step") or {} for m in methods if m in summary}
    if any(curves.values()):
        all_steps = sorted({int(k) for c in curves.values() for k in c})
        picks = sorted({all_steps[round(i * (len(all_steps) - 1) / 5)] for i in range(6)})
        out += ["Policy token entropy of the old-policy pass (nats, mean over seeds; plots/entropy.png):", "",
                "| method | " + " | ".join(f"step {st}" for st in picks) + " |", "|---|" + "---|" * len(picks)]  # fmt: skip
        for m, c in curves.items():
            out.append(f"| {m} | " + " | ".join(
                format(c[str(st)], ".3f") if str(st) in c else "n/a" for st in picks) + " |")  # fmt: skip
        out.append("")
    out += ["Held-out success gain, first to last evaluation (mean ± sd over seeds, points):", "",
            "| method | runs | greedy gain | sampled gain |", "|---|---|---|---|"]  # fmt: skip
    for m in methods:
        if m not in summary:
            continue
        s = summary[m]
        cells = []
        for md in ("greedy", "sampled"):
            g, sd = s[f"{md}_mean_gain"], s[f"{md}_sd_gain"]
            cells.append("n/a" if g is None else pct(g, True) + ("" if sd is None else f" ± {pct(sd)}"))
        out.append(f"| {m} | {len(s['seeds'])} | {cells[0]} | {cells[1]} |")
    return "\n".join(out) + "\n"


def _paired_cells(p: dict[str, Any] | None, is_base: bool, pct: Any) -> list[str]:
    """summary.md's paired columns for one method: two-level CI, seeds-only CI, t-interval, sign-flip p, median,
    seeds with d > 0."""
    if is_base:
        return ["(baseline)", "", "", "", "", ""]
    if p is None:
        return ["n/a (no shared seeds or tasks)", "", "", "", "", ""]
    cells = [f"{pct(p['mean'], True)} [{pct(p['lo'], True)}, {pct(p['hi'], True)}]",
             f"[{pct(p['seeds_only']['lo'], True)}, {pct(p['seeds_only']['hi'], True)}]"]  # fmt: skip
    if (ss := p.get("small_seed")) is not None:  # absent in summaries written before it existed
        cells += [f"[{pct(ss['t95'][0], True)}, {pct(ss['t95'][1], True)}]", f"{ss['sign_flip_p']:.3f}",
                  pct(ss["median"], True)]  # fmt: skip
    else:
        cells += ["n/a", "n/a", "n/a"]
    return [*cells, f"{p['n_positive']} / {p['n_seeds']} ({p['n_tasks']} tasks)"]


def _seed_mean_curve(runs: list[list[dict[str, Any]]], key: str) -> dict[str, float]:
    """step (as a string, JSON keys) -> mean over the runs that logged `key` at that step."""
    from swe_rl.experiments.plots import series

    by: dict[int, list[float]] = {}
    for rows in runs:
        for st, v in zip(*series(rows, key), strict=True):
            by.setdefault(st, []).append(v)
    return {str(st): statistics.mean(v) for st, v in sorted(by.items())}


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
