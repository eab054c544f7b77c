"""The branch experiment (arms compared from one shared state, not from separate starts): trunk runs to a branch step, then every recipe continues from each trunk's
exact state, so the arms are paired by starting state (weights, Adam moments, RNG, data cursor).

    python -m swe_rl.experiments.branch -c configs/study/aem_branch.yaml --out runs/aem_branch \\
        -m grpo -m grpo_aem -m grpo_aem_action -s 0 ... -s 9 --jobs 2

1. trunk: `<out>/trunk/grpo_s<seed>`, the study config's runs under the trunk recipe to `trunk_steps` (compare's
   start checkpoint, run configs and resumable runner);
2. branches: `<out>/<method>_s<seed>` = a copy of the trunk run (its checkpoint at trunk_steps, metrics and
   per-task evaluation records; copied into a temp folder and renamed, so a killed copy leaves nothing), resumed
   with the method's `algo` block to `trunk_steps + branch_steps`;
3. analysis: compare's summary (primary metric, paired against `--baseline`) and `collapses.json` / `.md`: each
   branch's final checkpoint on the *validation* split (the test split chooses nothing) with the collapse rule
   fixed in the design (docs/results/aem_branch_2026-12-02/design.md).
Every stage resumes: rerunning skips finished trunks, existing branches continue from their newest checkpoint.
"""

from __future__ import annotations

import argparse
import json
import shutil
from pathlib import Path
from typing import Any

# The collapse rule (fixed in the design before the run): edit 1 decided on one answer whatever the file showed,
# i.e. right about half the time, with a near-certain decision token. Both must hold at the final checkpoint.
COLLAPSE_RIGHT = (0.30, 0.70)  # edit-1 right share inside this band (a constant answer is right ~50%)
COLLAPSE_ENTROPY = 0.20  # and the edit-1 decision token's mean entropy below this (nats)


def branch_configs(demo: Any, methods: list[str], seeds: list[int], out: Path, init: Path,
                   trunk_steps: int, branch_steps: int, trunk_method: str,
                   branch_eval_every: int = 0) -> tuple[list[Any], list[Any]]:  # fmt: skip
    """(trunk run configs, branch run configs), from compare's run_configs."""
    from swe_rl.experiments.compare import run_configs

    if trunk_steps < 1 or branch_steps < 1:
        raise ValueError(
            f"branch: trunk_steps and branch_steps must be >= 1, got {trunk_steps}, {branch_steps}"
        )
    trunks = run_configs(demo, [trunk_method], seeds, out / "trunk", init)
    branches = run_configs(demo, methods, seeds, out, init)
    for c in trunks:  # the trunk is evaluated at step 0 and at the branch point only (no analysis reads more)
        c.steps = trunk_steps
        c.eval.every = trunk_steps
    for c in branches:
        c.steps = trunk_steps + branch_steps
        c.eval.every = branch_eval_every or c.eval.every
    return trunks, branches


def seed_branch(trunk: Path, dest: Path, trunk_steps: int) -> None:
    """Copy a finished trunk run to `dest` (nothing when dest exists). The trunk must have its checkpoint at
    trunk_steps: a branch never starts from anything else."""
    if dest.exists():
        return
    ckpt = trunk / "checkpoints" / f"step_{trunk_steps:06d}"
    if not (ckpt / "state.pt").is_file():
        raise FileNotFoundError(f"branch: {trunk} has no checkpoint at step {trunk_steps} ({ckpt})")
    tmp = dest.with_name(f".tmp_{dest.name}")
    shutil.rmtree(tmp, ignore_errors=True)
    shutil.copytree(trunk, tmp, ignore=shutil.ignore_patterns("trajectories", "tb"))
    tmp.rename(dest)


def _train_all(cfgs: list[Any], jobs: int) -> None:
    from swe_rl.experiments.compare import _train_one, _train_parallel

    if jobs == 1:
        for cfg in cfgs:
            _train_one(cfg)
    else:
        _train_parallel(cfgs, jobs)


def is_collapsed(edit1: dict[str, float]) -> bool:
    lo, hi = COLLAPSE_RIGHT
    return lo <= edit1["right"] <= hi and edit1["entropy"] < COLLAPSE_ENTROPY


def collapse_table(out: Path, methods: list[str], seeds: list[int], demo: Any, trunk: str = "grpo",
                   n_tasks: int = 0, samples: int = 0, with_trunk: bool = True) -> dict[str, Any]:  # fmt: skip
    """Per branch (and trunk): the final checkpoint's decision statistics on validation tasks and the collapse
    rule; per method the count. Written to <out>/collapses.json and collapses.md."""
    from swe_rl.experiments.decisions import decision_tasks
    from swe_rl.experiments.turns import decision_stats
    from swe_rl.train.checkpoint import latest

    ev, data = demo.train.eval, demo.train.data
    tasks = decision_tasks("validation", n_tasks or ev.n_tasks, data.seed, field="eval.n_tasks")
    samples = samples or ev.sampled
    rf = data.decisions.reason_first
    runs: dict[str, Any] = {}
    names = [f"trunk/{trunk}_s{s}" for s in seeds if with_trunk] + [
        f"{m}_s{s}" for s in seeds for m in methods
    ]
    for name in names:
        ckpt = latest(out / name / "checkpoints")
        if ckpt is None:
            continue
        st = decision_stats(ckpt / "model", tasks, samples, rf)
        runs[name] = {"step": int(ckpt.name.split("_")[1]), "collapsed": is_collapsed(st["edit:1"]), **st}
    counts = {m: sum(runs[f"{m}_s{s}"]["collapsed"] for s in seeds if f"{m}_s{s}" in runs) for m in methods}
    table = {"rule": {"edit1_right_band": COLLAPSE_RIGHT, "edit1_entropy_below": COLLAPSE_ENTROPY},
             "split": "validation", "n_tasks": len(tasks), "samples": samples, "trunk": trunk, "counts": counts,
             "runs": runs}  # fmt: skip
    (out / "collapses.json").write_text(json.dumps(table, indent=1))
    (out / "collapses.md").write_text(collapse_markdown(table, methods, seeds))
    return table


def collapse_markdown(table: dict[str, Any], methods: list[str], seeds: list[int]) -> str:
    lo, hi = table["rule"]["edit1_right_band"]
    out = [f"Edit-1 collapses at the final checkpoint (validation split; rule: edit 1 right in [{lo:.0%}, "
           f"{hi:.0%}] and its decision entropy < {table['rule']['edit1_entropy_below']} nats). Cells: success / "
           "edit-1 right / edit-1 decision entropy; * = collapsed.", "",
           "| seed | trunk (branch point) | " + " | ".join(methods) + " |", "|---|---|" + "---|" * len(methods)]  # fmt: skip
    runs = table["runs"]

    def cell(name: str) -> str:
        r = runs.get(name)
        if r is None:
            return "n/a"
        e = r["edit:1"]
        return f"{r['success']:.0%} / {e['right']:.0%} / {e['entropy']:.2f}" + (
            " *" if r["collapsed"] else ""
        )

    trunk = table["trunk"]
    for s in seeds:
        out.append(
            f"| {s} | {cell(f'trunk/{trunk}_s{s}')} | "
            + " | ".join(cell(f"{m}_s{s}") for m in methods)
            + " |"
        )
    out += [
        "",
        "Collapsed runs: " + ", ".join(f"{m} {c} / {len(seeds)}" for m, c in table["counts"].items()) + ".",
    ]
    return "\n".join(out) + "\n"


def pack_records(out: Path, names: list[str], after: dict[str, int]) -> Path:
    """Every run's per-task evaluation records in one compact file, <out>/eval_records.json:
    {run: {step: {mode: {task_id: "0110"}}}} (one character per sample reward, 0/1 in this environment; other
    values are kept as lists). `after[run]`: only steps above it (a branch's earlier records are its trunk's)."""
    from swe_rl.experiments.compare import read_records

    def pack(rewards: list[float]) -> str | list[float]:
        return "".join(str(int(r)) for r in rewards) if all(r in (0.0, 1.0) for r in rewards) else rewards

    packed = {
        name: {str(step): {mode: {t: pack(r) for t, r in tasks.items()} for mode, tasks in modes.items()}
               for step, modes in read_records(out / name).items() if step > after.get(name, -1)}
        for name in names if (out / name / "eval_tasks").is_dir()
    }  # fmt: skip
    path = out / "eval_records.json"
    path.write_text(json.dumps(packed, separators=(",", ":"), sort_keys=True))
    return path


def run_branch(config: list[str], methods: list[str], seeds: list[int], out: str, *, trunk_steps: int,
               branch_steps: int, jobs: int = 1, baseline: str = "grpo", trunk_method: str = "grpo",
               last_k: int = 3, analyse_only: bool = False, branch_eval_every: int = 0,
               collapse_tasks: int = 0, collapse_samples: int = 0, trunk_collapse: bool = True) -> Path:  # fmt: skip
    from swe_rl.config import load_config
    from swe_rl.experiments.compare import start_checkpoint, summarize
    from swe_rl.experiments.demo import DemoConfig

    demo = load_config(DemoConfig, files=list[str | Path](config))
    if demo.train.data.source != "decisions":
        raise ValueError(f"branch: data.source must be 'decisions' (collapses are counted per decision), "
                         f"got {demo.train.data.source!r}")  # fmt: skip
    out_dir = Path(out)
    if not analyse_only:
        import torch

        # the start's SFT runs in this process: torch's default of one thread per core makes it ~5x slower on a
        # loaded 2-core machine (measured: 0.97 vs 0.20 CPU-s per SFT step); workers set model.threads themselves
        torch.set_num_threads(demo.train.model.threads or 1)
        init = start_checkpoint(demo, out_dir)
        trunks, branches = branch_configs(demo, methods, seeds, out_dir, init, trunk_steps, branch_steps,
                                          trunk_method, branch_eval_every)  # fmt: skip
        # `jobs` seeds at a time, trunks then their branches: a run cut short by the deadline leaves complete
        # pairs (every arm of a finished seed), not ten trunks and no branches
        for i in range(0, len(seeds), jobs):
            group = set(seeds[i : i + jobs])
            _train_all([c for c in trunks if c.seed in group], jobs)
            mine = [c for c in branches if c.seed in group]
            for c in mine:
                trunk = out_dir / "trunk" / f"{trunk_method}_s{c.seed}"
                seed_branch(trunk, Path(c.out_dir) / c.name, trunk_steps)
            _train_all(mine, jobs)
    path = summarize(out_dir, methods, seeds, baseline=baseline, last_k=last_k)
    table = collapse_table(out_dir, methods, seeds, demo, trunk_method, collapse_tasks, collapse_samples,
                           trunk_collapse)  # fmt: skip
    branches_of = {f"{m}_s{s}": trunk_steps for s in seeds for m in methods}
    pack_records(out_dir, [f"trunk/{trunk_method}_s{s}" for s in seeds] + list(branches_of), branches_of)
    print(json.dumps(table["counts"]))
    return path


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(
        prog="python -m swe_rl.experiments.branch", description=__doc__.split("\n")[0]
    )
    p.add_argument("-c", "--config", action="append", required=True, help="study config (DemoConfig YAML)")
    p.add_argument("-m", "--method", action="append", required=True, help="branch recipe (configs/train/)")
    p.add_argument("-s", "--seed", action="append", type=int, required=True)
    p.add_argument("--out", required=True)
    p.add_argument("--trunk-steps", type=int, default=50)
    p.add_argument("--branch-steps", type=int, default=30)
    p.add_argument("--jobs", type=int, default=1)
    p.add_argument("--baseline", default="grpo")
    p.add_argument("--last-k", type=int, default=3)
    p.add_argument("--analyse-only", action="store_true", help="summary and collapse count of existing runs")
    p.add_argument(
        "--branch-eval-every", type=int, default=0, help="branch evaluation interval (0: config's)"
    )
    p.add_argument(
        "--collapse-tasks", type=int, default=0, help="validation tasks of the collapse count (0: eval's)"
    )
    p.add_argument("--collapse-samples", type=int, default=0, help="samples per task there (0: eval's)")
    p.add_argument("--no-trunk-collapse", action="store_true", help="skip the trunks' collapse measurement")
    a = p.parse_args(argv)
    run_branch(a.config, a.method, a.seed, a.out, trunk_steps=a.trunk_steps, branch_steps=a.branch_steps,
               jobs=a.jobs, baseline=a.baseline, last_k=a.last_k, analyse_only=a.analyse_only,
               branch_eval_every=a.branch_eval_every, collapse_tasks=a.collapse_tasks,
               collapse_samples=a.collapse_samples, trunk_collapse=not a.no_trunk_collapse)  # fmt: skip


if __name__ == "__main__":
    main()
