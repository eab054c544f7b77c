"""Exploratory, after the fact: where the empty patches of a `swe-rl compare` run come from.

Reads a compare output folder (COMPARE_DIR/<method>_s<seed>/{config.yaml, metrics.jsonl, eval_tasks/,
trajectories/}); runs no model and no sandbox. Failure modes are the evaluator's own
(swe_rl.train.evaluate.failure_mode: no_edit = an empty patch). Four sources, and what each can say:
- eval/* metrics (every eval step): per run, the share of empty-patch episodes and the exit reasons, greedy
  and sampled;
- eval_tasks/: per-task rewards, so which tasks fail (in any mode, not which mode);
- trajectories/: the first `log_trajectories` training episodes of every step (all of the batch's first task,
  so one group), replayed on the generated task's file to get their final patch, classified as eval episodes.
  Advantages and token entropies are not stored per episode;
- eval_episodes/ (runs since 2026-12-05, or re-evaluated with scripts/eval_checkpoints.py): every held-out
  episode, checked against eval_tasks/ and replayed like the training ones.
Prints the tables; writes empty_patches.png and summary.json to --out.

Usage: .venv/bin/python scripts/analyze_empty_patches.py [COMPARE_DIR] [--out DIR]
"""

from __future__ import annotations

import argparse
import difflib
import json
import math
import re
from collections import Counter, defaultdict
from pathlib import Path
from typing import Any

import yaml

from swe_rl.agent.trajectory import Trajectory
from swe_rl.experiments.compare import read_records
from swe_rl.experiments.demo_report import md_table
from swe_rl.experiments.plots import series
from swe_rl.runs import RunDir
from swe_rl.tasks.generator import generate_tasks
from swe_rl.tasks.task import Task
from swe_rl.train.evaluate import FAILURE_MODES, failure_mode

REPO_DIR = "/testbed"  # the agent's repository path in the generated tasks' sandbox
EDITED = "has been edited"  # file_editor's success line for str_replace / insert
UNSUBMITTED = ("format_errors", "max_steps", "context_limit", "timeout")
AEM_TURNS = ("file_editor:view", "file_editor:str_replace", "submit", "format_error")
WINDOW = 4  # training steps per point of the logged-episode curve in the plot


def load_runs(compare_dir: Path) -> list[dict[str, Any]]:
    runs = []
    for root in sorted(p for p in compare_dir.iterdir() if (p / "metrics.jsonl").is_file()):
        method, _, seed = root.name.rpartition("_s")
        cfg = yaml.safe_load((root / "config.yaml").read_text())
        runs.append(
            {
                "name": root.name,
                "method": method,
                "seed": int(seed),
                "root": root,
                "cfg": cfg,
                "rows": RunDir(root).read_metrics(),
            }
        )
    if not runs:
        raise SystemExit(f"analyze_empty_patches: no <method>_s<seed>/metrics.jsonl under {compare_dir}")
    return runs


# ---- held-out evaluation: eval/* metrics and per-task records ----------------------------------------------


def eval_counts(run: dict[str, Any]) -> list[dict[str, Any]]:
    """Per eval step and mode: episodes, success, each failure mode and the unsubmitted exits, as counts."""
    ev = run["cfg"]["eval"]
    out = []
    for row in run["rows"]:
        for mode, n in (("greedy", ev["n_tasks"]), ("sampled", ev["n_tasks"] * ev["sampled"])):
            if f"eval/{mode}_success" not in row:
                continue
            c = {
                k: round(row.get(f"eval/{mode}_{k}", 0.0) * n)
                for k in [
                    "success",
                    *(f"fail/{m}" for m in FAILURE_MODES),
                    *(f"exit/{e}" for e in UNSUBMITTED),
                ]
            }
            unsub = sum(c[f"exit/{e}"] for e in UNSUBMITTED)
            empty = c["fail/no_edit"]
            out.append(
                {
                    "run": run["name"],
                    "method": run["method"],
                    "seed": run["seed"],
                    "step": row["step"],
                    "mode": mode,
                    "n": n,
                    "empty": empty,
                    "unsubmitted": unsub,
                    "submitted_empty_min": max(empty - unsub, 0),
                    **{k.split("/")[1]: v for k, v in c.items() if k.startswith("fail/")},
                    "success": c["success"],
                }
            )
    return out


def task_failures(runs: list[dict[str, Any]], step: int, mode: str) -> Counter[str]:
    """task_id -> failed episodes (reward 0, any failure mode) over all runs at `step`."""
    fails: Counter[str] = Counter()
    for run in runs:
        for task_id, rewards in read_records(run["root"]).get(step, {}).get(mode, {}).items():
            fails[task_id] += sum(1 for r in rewards if r == 0)
    return fails


# ---- training: the logged episodes, replayed ---------------------------------------------------------------


def replay(ep: dict[str, Any], task: Task) -> dict[str, Any]:
    """Replay the episode's edits on the task's files: its actions, final patch class and policy tokens. Only
    str_replace is replayed; disagreements with the tool's observation and edits not replayed are counted."""
    files = dict(task.metadata["files"])
    ex = task.metadata["expert"]
    msgs = ep["messages"]
    actions, old_strs, mismatch, unreplayed = [], [], 0, 0
    for i, m in enumerate(msgs):
        if m["role"] != "assistant":
            continue
        obs = msgs[i + 1]["content"] if i + 1 < len(msgs) else ""
        act = m.get("action")
        if act is None:
            actions.append("malformed")
            continue
        cmd = act["params"].get("command", "")
        if act["name"] != "file_editor" or cmd == "view":
            actions.append(act["name"] if act["name"] != "file_editor" else "view")
            continue
        if cmd != "str_replace":
            unreplayed += EDITED in obs or "successfully" in obs
            actions.append(f"file_editor {cmd or '(no command)'}")
            continue
        path = act["params"].get("path", "").removeprefix(REPO_DIR + "/")
        old, new = act["params"].get("old_str", ""), act["params"].get("new_str", "")
        ok = bool(old) and files.get(path, "").count(old) == 1
        if ok:
            files[path] = files[path].replace(old, new)
        mismatch += ok != (EDITED in obs)
        old_strs.append((old, ok))
        actions.append("str_replace ok" if ok else "str_replace failed")
    patch = "\n".join(
        line
        for path, text in files.items()
        for line in difflib.unified_diff(
            task.metadata["files"][path].splitlines(),
            text.splitlines(),
            f"a/{path}",
            f"b/{path}",
            lineterm="",
        )
    )
    traj = Trajectory(
        task_id=ep["task_id"],
        patch=patch,
        exit_status=ep["exit"],
        reward=ep["reward"],
        resolved=ep["reward"] == 1.0,
    )
    category = failure_mode(traj, task) or (
        "resolved" if ep["exit"] == "submitted" else "resolved, unsubmitted"
    )
    tokens = sum(m["span"][1] - m["span"][0] for m in msgs if m["role"] == "assistant")
    errors = [old_str_error(old, ex) for old, ok in old_strs if not ok]
    return {
        "actions": actions,
        "category": category,
        "pattern": empty_pattern(actions, ep["exit"]),
        "tokens": tokens,
        "turns": len(actions),
        "old_str_errors": errors,
        "replay_mismatch": mismatch,
        "unreplayed": unreplayed,
    }


def empty_pattern(actions: list[str], exit_status: str) -> str:
    """How an episode without a patch got there (read only for no_edit episodes)."""
    if exit_status == "format_errors":
        return "malformed reply (episode ends)"
    if exit_status != "submitted":
        return f"not submitted ({exit_status})"
    if "str_replace ok" in actions:
        return "edited, then undone, submitted"
    if "str_replace failed" in actions:
        return "edit failed (old_str not in file), submitted"
    return "submitted without trying an edit"


def old_str_error(old: str, ex: dict[str, str]) -> str:
    """Why an old_str did not match: the buggy text with the fix's constant (the one the statement names),
    with another constant (its offset from the file's), or other text."""
    number = re.compile(r"\d+")
    if number.sub("#", old) != number.sub("#", ex["old"]) or len(number.findall(old)) != 1:
        return "other text"
    got, file_k, fix_k = (int(number.findall(x)[0]) for x in (old, ex["old"], ex["new"]))
    return (
        "buggy text, the fix's constant"
        if got == fix_k != file_k
        else f"buggy text, constant {got - file_k:+d}"
    )


def logged_episodes(runs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    out = []
    for run in runs:
        d = run["cfg"]["data"]
        tasks = {t.instance_id: t for t in generate_tasks(d["n_train"], "train", d["seed"], d["n_funcs"])}
        for path in sorted((run["root"] / "trajectories").glob("step_*.jsonl")):
            step = int(path.stem.split("_")[1])
            for i, line in enumerate(path.read_text().splitlines()):
                ep = json.loads(line)
                out.append(
                    {
                        "run": run["name"],
                        "method": run["method"],
                        "seed": run["seed"],
                        "step": step,
                        "idx": i,
                        "task_id": ep["task_id"],
                        "exit": ep["exit"],
                        "messages": json.dumps(ep["messages"]),
                        **replay(ep, tasks[ep["task_id"]]),
                    }
                )
    return out


def held_out_episodes(runs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Every stored held-out episode (<run>/eval_episodes/step_N.jsonl: runs made since 2026-12-05 store them;
    older runs get them from scripts/eval_checkpoints.py, checked here against the run's eval_tasks/ records),
    replayed like the training episodes; the replay's class must equal the evaluator's stored failure mode."""
    out = []
    for run in runs:
        d, n = run["cfg"]["data"], run["cfg"]["eval"]["n_tasks"]
        tasks = {t.instance_id: t for t in generate_tasks(n, "held_out", d["seed"], d["n_funcs"])}
        records = read_records(run["root"])
        for path in sorted((run["root"] / "eval_episodes").glob("step_*.jsonl")):
            step = int(path.stem.split("_")[1])
            eps = [json.loads(line) for line in path.read_text().splitlines()]
            got: dict[str, dict[str, list[float]]] = {}
            for ep in eps:
                got.setdefault(ep["mode"], {}).setdefault(ep["task_id"], []).append(
                    float(ep["reward"] or 0.0)
                )
            if got != records.get(step):
                raise SystemExit(
                    f"{path}: its rewards are not those of the run's eval_tasks record of step {step}"
                )
            for ep in eps:
                r = replay(ep, tasks[ep["task_id"]])
                if (ep["failure"] or "resolved") != r["category"].replace(", unsubmitted", ""):
                    raise SystemExit(
                        f"{path}: {ep['task_id']} replays as {r['category']}, stored {ep['failure']}"
                    )
                out.append({"run": run["name"], "method": run["method"], "seed": run["seed"], "step": step,
                            "mode": ep["mode"], "task_id": ep["task_id"], "exit": ep["exit"], **r})  # fmt: skip
    return out


def held_out_section(eps: list[dict[str, Any]]) -> dict[str, Any]:
    """How the held-out episodes failed, per step and mode: empty-patch patterns, the failed old_str, retries."""
    if not eps:
        print("\nno stored held-out episodes (<run>/eval_episodes/): their section is skipped")
        return {}
    out: dict[str, Any] = {}
    keys = sorted({(e["step"], e["mode"]) for e in eps})
    rows = []
    for step, mode in keys:
        sel = [e for e in eps if (e["step"], e["mode"]) == (step, mode)]
        if step == 0:  # every run evaluates the same start with the same seeds: count it once
            sel = [e for e in sel if e["run"] == sel[0]["run"]]
        empty = [e for e in sel if e["category"] == "no_edit"]
        failed_calls = sum(e["actions"].count("str_replace failed") for e in sel)
        retried = sum(
            1
            for e in sel
            for i, a in enumerate(e["actions"])
            if a == "str_replace failed"
            and any(b.startswith(("view", "str_replace")) for b in e["actions"][i + 1 :])
        )
        patterns = Counter(e["pattern"] for e in empty)
        errors = Counter(x for e in sel for x in e["old_str_errors"])
        out[f"step {step}/{mode}"] = {"episodes": len(sel), "empty": len(empty), "patterns": dict(patterns),
                                      "failed_str_replace": failed_calls, "retried_after_failure": retried,
                                      "old_str_errors": dict(errors)}  # fmt: skip
        top = "; ".join(f"{p} {k}" for p, k in patterns.most_common())
        rows.append([step, mode, pct(len(empty), len(sel)), top, f"{retried}/{failed_calls}",
                     "; ".join(f"{x} {k}" for x, k in errors.most_common(3))])  # fmt: skip
    print_table(
        "Held-out episodes (stored or re-evaluated), step 0 counted once: empty patches and how they ended",
        [
            "step",
            "mode",
            "empty patch",
            "patterns (episodes)",
            "retried after a failed edit",
            "failed old_str (top 3)",
        ],
        rows,
    )
    methods = sorted({e["method"] for e in eps})
    later = [(step, mode) for step, mode in keys if step > 0]
    by_method = {m: {f"step {st}/{mo}": [sum(e["category"] == "no_edit" for e in eps if (e["method"], e["step"], e["mode"]) == (m, st, mo)),
                                         sum((e["method"], e["step"], e["mode"]) == (m, st, mo) for e in eps)]
                     for st, mo in later} for m in methods}  # fmt: skip
    print_table(
        f"Held-out empty patches by method ({len({e['seed'] for e in eps})} seeds pooled)",
        ["method", *(f"step {st}, {mo}" for st, mo in later)],
        [[m, *(pct(*v) for v in by_method[m].values())] for m in methods],
    )
    out["by_method"] = by_method
    return out


def training_unsubmitted(runs: list[dict[str, Any]]) -> dict[str, dict[int, list[int]]]:
    """method -> step -> [unsubmitted episodes, episodes] over its seeds (the whole batch's exit/* counts)."""
    out: dict[str, dict[int, list[int]]] = defaultdict(lambda: defaultdict(lambda: [0, 0]))
    for run in runs:
        r = run["cfg"]["rollout"]
        for row in run["rows"]:
            if row["step"] > 0:
                cell = out[run["method"]][row["step"]]
                cell[0] += sum(int(row.get(f"exit/{e}", 0)) for e in UNSUBMITTED)
                cell[1] += r["tasks_per_step"] * r["n_samples"]
    return out


def aem_alpha_by_turn(runs: list[dict[str, Any]]) -> dict[str, dict[str, float]]:
    """method -> turn type -> AEM's mean α over the steps and seeds that logged it."""
    out: dict[str, dict[str, float]] = {}
    for method in sorted({r["method"] for r in runs}):
        vals: dict[str, list[float]] = defaultdict(list)
        for run in (r for r in runs if r["method"] == method):
            for turn in AEM_TURNS:
                vals[turn] += series(run["rows"], f"algo/aem/alpha_turn/{turn}")[1]
        means = {t: sum(v) / len(v) for t, v in vals.items() if v}
        if means:
            out[method] = means
    return out


# ---- report ------------------------------------------------------------------------------------------------


def pct(k: int, n: int) -> str:
    return f"{k}/{n} ({100 * k / n:.1f}%)" if n else "0/0"


def print_table(title: str, header: list[str], rows: list[list[Any]]) -> None:
    print(f"\n## {title}\n")
    print("\n".join(md_table(header, rows)))


def eval_section(runs: list[dict[str, Any]]) -> dict[str, Any]:
    methods = sorted({r["method"] for r in runs})
    counts = [c for run in runs for c in eval_counts(run)]
    steps = sorted({c["step"] for c in counts})
    modes = ("greedy", "sampled")

    def cell(run: str, step: int, mode: str) -> dict[str, Any]:
        return next(c for c in counts if c["run"] == run and c["step"] == step and c["mode"] == mode)

    print_table(
        "Held-out eval, per run: empty patches / episodes (in brackets: unsubmitted exits, any patch)",
        ["run", *(f"step {s} {m}" for s in steps for m in modes)],
        [
            [
                r["name"],
                *(
                    f"{cell(r['name'], s, m)['empty']}/{cell(r['name'], s, m)['n']} "
                    f"({cell(r['name'], s, m)['unsubmitted']})"
                    for s in steps
                    for m in modes
                ),
            ]
            for r in runs
        ],
    )
    pooled: dict[str, dict[str, int]] = {}
    rows = []
    for method in ["all", *methods]:
        for mode in modes:
            for s in steps:
                cs = [
                    c
                    for c in counts
                    if c["step"] == s and c["mode"] == mode and method in ("all", c["method"])
                ]
                cs = cs[:1] if s == 0 else cs  # step 0 is one shared checkpoint: counted once
                tot = {
                    k: sum(c[k] for c in cs)
                    for k in ("n", "empty", "unsubmitted", "submitted_empty_min", "success", *FAILURE_MODES)
                }
                tot["empty_run_min"], tot["empty_run_max"] = (
                    min(c["empty"] for c in cs),
                    max(c["empty"] for c in cs),
                )
                pooled[f"{method}/{mode}/{s}"] = tot
                rows.append(
                    [
                        method,
                        mode,
                        s,
                        len(cs),
                        pct(tot["empty"], tot["n"]),
                        f"{tot['empty_run_min']}-{tot['empty_run_max']}/{cs[0]['n']}",
                        f"{tot['submitted_empty_min']}-{tot['empty']}",
                        pct(tot["unsubmitted"], tot["n"]),
                        pct(tot["flawed_constant"], tot["n"]),
                        pct(tot["other_edit"], tot["n"]),
                        pct(tot["success"], tot["n"]),
                    ]
                )
    print_table(
        "Held-out eval, pooled over runs (step 0 once). Runs share the eval's sampling seeds",
        [
            "method",
            "mode",
            "step",
            "runs",
            "empty patch",
            "empty, per run (min-max)",
            "of which submitted (bounds)",
            "unsubmitted exits",
            "flawed constant",
            "other edit",
            "success",
        ],
        rows,
    )
    higher = []
    if len(steps) > 2:
        higher = [
            r["name"]
            for r in runs
            if cell(r["name"], steps[-2], "sampled")["empty"] > cell(r["name"], steps[-1], "sampled")["empty"]
        ]
        print(
            f"\nsampled empty patches higher at step {steps[-2]} than at step {steps[-1]}: "
            f"{len(higher)} of {len(runs)} runs"
        )

    per_task: dict[int, dict[str, Any]] = {}
    rows = []
    for s in (steps[0], steps[-1]):
        fails = task_failures(runs[:1] if s == 0 else runs, s, "sampled")
        per_run = runs[0]["cfg"]["eval"]["sampled"]
        total, top5 = sum(fails.values()), sum(v for _, v in fails.most_common(5))
        per_task[s] = {"episodes_per_task": per_run * (1 if s == 0 else len(runs)), "failures": dict(fails)}
        top = ", ".join(f"{t.split('-', 1)[1]}: {v}" for t, v in fails.most_common(5))
        rows.append(
            [
                s,
                per_task[s]["episodes_per_task"],
                total,
                f"{sum(1 for v in fails.values() if v)}/{len(fails)}",
                pct(top5, total),
                top,
            ]
        )
    print_table(
        "Held-out sampled failures by task (any failure mode: eval_tasks/ holds rewards only)",
        [
            "step",
            "episodes per task",
            "failed episodes",
            "tasks with a failure",
            "share of the top 5 tasks",
            "top 5 tasks: failed episodes",
        ],
        rows,
    )
    return {
        "per_run": counts,
        "pooled": pooled,
        "runs_higher_before_last_eval": higher,
        "failures_by_task": per_task,
    }


def training_section(runs: list[dict[str, Any]], eps: list[dict[str, Any]]) -> dict[str, Any]:
    methods = sorted({r["method"] for r in runs})
    blocks = _blocks(runs)
    distinct = list({(e["seed"], e["step"], e["idx"], e["messages"]): e for e in eps}.values())
    empty = [e for e in eps if e["category"] == "no_edit"]
    by_cat = Counter(e["category"] for e in eps)
    tokens = {c: _mean([e["tokens"] for e in eps if e["category"] == c]) for c in by_cat}
    print_table(
        "Training, logged episodes (2 per step, both from the step's first group), by final patch",
        ["final patch", "episodes", "mean turns", "mean policy tokens"],
        [
            [
                c,
                pct(k, len(eps)),
                f"{_mean([e['turns'] for e in eps if e['category'] == c]):.2f}",
                f"{tokens[c]:.1f}",
            ]
            for c, k in by_cat.most_common()
        ],
    )
    same = Counter((e["seed"], e["step"], e["idx"], e["messages"]) for e in eps)
    identical = sum(1 for e in eps if same[(e["seed"], e["step"], e["idx"], e["messages"])] == len(methods))
    print(
        f"\nlogged episodes identical in all {len(methods)} methods at the same seed and step (same tasks "
        f"and sampling seeds): {pct(identical, len(eps))}; {len(distinct)} distinct episodes"
    )
    print(
        f"replay: {sum(e['replay_mismatch'] for e in eps)} edits disagree with the tool's observation, "
        f"{sum(e['unreplayed'] for e in eps)} edits not replayed"
    )
    patterns = Counter(e["pattern"] for e in empty)
    print_table(
        "Training, logged empty-patch episodes: how they ended",
        ["pattern", "episodes", "action sequences (episodes)"],
        [
            [
                p,
                pct(k, len(empty)),
                "; ".join(
                    f"{' > '.join(a)} ({n})"
                    for a, n in Counter(tuple(e["actions"]) for e in empty if e["pattern"] == p).most_common()
                ),
            ]
            for p, k in patterns.most_common()
        ],
    )
    family = Counter(e["task_id"].rsplit("-", 1)[1] for e in eps)
    fam_empty = Counter(e["task_id"].rsplit("-", 1)[1] for e in empty)
    fam_tasks = {f: {e["task_id"] for e in empty if e["task_id"].endswith(f"-{f}")} for f in family}
    print_table(
        "Training, logged episodes by task family (the bug's family, from the task id)",
        ["family", "empty patch / logged episodes", "distinct tasks with an empty patch"],
        [[f, pct(fam_empty[f], n), len(fam_tasks[f])] for f, n in family.most_common()],
    )
    print(
        f"\nempty patches in {len({e['task_id'] for e in empty})} distinct tasks of "
        f"{len({e['task_id'] for e in eps})} logged tasks"
    )
    errs = {
        f"steps {lo}-{hi}": Counter(x for e in eps if lo <= e["step"] <= hi for x in e["old_str_errors"])
        for lo, hi in blocks
    }
    errs["all steps, distinct episodes"] = Counter(x for e in distinct for x in e["old_str_errors"])
    labels = Counter(x for e in eps for x in e["old_str_errors"])
    print_table(
        "Training, logged episodes: failed str_replace calls, old_str against the file's buggy text",
        ["old_str", *errs],
        [[k, *(pct(c[k], sum(c.values())) for c in errs.values())] for k, _ in labels.most_common()],
    )
    per_block: dict[str, dict[str, dict[str, int]]] = {}
    rows = []
    for method in ["all", *methods]:
        for lo, hi in blocks:
            es = [e for e in eps if lo <= e["step"] <= hi and method in ("all", e["method"])]
            calls = [x for e in es for x in e["actions"] if x.startswith("str_replace")]
            b = {
                "episodes": len(es),
                "no_edit": sum(e["category"] == "no_edit" for e in es),
                "flawed_constant": sum(e["category"] == "flawed_constant" for e in es),
                "resolved": sum(e["category"] == "resolved" for e in es),
                "str_replace_calls": len(calls),
                "str_replace_failed": calls.count("str_replace failed"),
            }
            per_block.setdefault(method, {})[f"{lo}-{hi}"] = b
            rows.append(
                [
                    method,
                    f"{lo}-{hi}",
                    pct(b["no_edit"], b["episodes"]),
                    pct(b["str_replace_failed"], b["str_replace_calls"]),
                    pct(b["flawed_constant"], b["episodes"]),
                    pct(b["resolved"], b["episodes"]),
                ]
            )
    print_table(
        "Training, logged episodes per block of steps (between two evaluations)",
        ["method", "steps", "empty patch", "failed str_replace / calls", "flawed constant", "resolved"],
        rows,
    )
    partner = Counter(_partner_category(e, eps) for e in empty)
    print_table(
        "Training, logged empty-patch episodes: the other logged episode of the same group",
        ["other episode", "empty-patch episodes"],
        [[k, pct(v, len(empty))] for k, v in partner.most_common()],
    )
    unsub = training_unsubmitted(runs)
    print_table(
        "Training, all episodes: unsubmitted exits (format_errors, max_steps, ...), metrics.jsonl",
        ["method", *(f"steps {lo}-{hi}" for lo, hi in blocks)],
        [
            [
                m,
                *(
                    pct(
                        sum(unsub[m][s][0] for s in range(lo, hi + 1)),
                        sum(unsub[m][s][1] for s in range(lo, hi + 1)),
                    )
                    for lo, hi in blocks
                ),
            ]
            for m in methods
        ],
    )
    alpha = aem_alpha_by_turn(runs)
    if alpha:
        print_table(
            "AEM: mean α by turn type (metrics.jsonl, the steps and seeds that logged it)",
            ["method", *AEM_TURNS],
            [[m, *(f"{a[t]:.3f}" if t in a else "-" for t in AEM_TURNS)] for m, a in alpha.items()],
        )
    return {
        "episodes": len(eps),
        "distinct_episodes": len(distinct),
        "by_final_patch": dict(by_cat),
        "identical_across_methods": identical,
        "mean_policy_tokens": tokens,
        "empty_patterns": dict(patterns),
        "empty_by_family": {f: [fam_empty[f], n] for f, n in family.items()},
        "empty_distinct_tasks": len({e["task_id"] for e in empty}),
        "old_str_errors": {b: dict(c) for b, c in errs.items()},
        "per_block": per_block,
        "empty_other_episode_of_group": dict(partner),
        "unsubmitted_all_episodes": {m: {s: v for s, v in sorted(unsub[m].items())} for m in methods},
        "aem_alpha_by_turn": alpha,
    }


def _mean(xs: list[float]) -> float:
    return sum(xs) / len(xs) if xs else math.nan


def _blocks(runs: list[dict[str, Any]]) -> list[tuple[int, int]]:
    """The training steps between two evaluations: (1, every), (every + 1, 2 * every), ..."""
    every, steps = runs[0]["cfg"]["eval"]["every"], runs[0]["cfg"]["steps"]
    return [(lo, min(lo + every - 1, steps)) for lo in range(1, steps + 1, every)]


def _partner_category(ep: dict[str, Any], eps: list[dict[str, Any]]) -> str:
    others = [e["category"] for e in eps if e["run"] == ep["run"] and e["step"] == ep["step"] and e is not ep]
    if "resolved" in others:
        return "resolved: the group had a success, so A < 0"
    return f"{others[0]}: A not known" if others else "none logged"


def plot(runs: list[dict[str, Any]], eps: list[dict[str, Any]], summary: dict[str, Any], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    methods = sorted({r["method"] for r in runs})
    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(12, 5.5))
    for i, m in enumerate(methods):
        for mode, style in (("sampled", "-"), ("greedy", "--")):
            cs = [c for c in summary["eval"]["per_run"] if c["method"] == m and c["mode"] == mode]
            steps = sorted({c["step"] for c in cs})
            for c in cs:
                ax1.scatter(
                    c["step"] + 0.4 * (i - 1), 100 * c["empty"] / c["n"], color=f"C{i}", s=10, alpha=0.5
                )
            mean = [100 * _mean([c["empty"] / c["n"] for c in cs if c["step"] == s]) for s in steps]
            ax1.plot(steps, mean, style, color=f"C{i}", label=f"{m} {mode} (mean of {len(cs) // len(steps)})")
    ax1.set_title("held-out eval: empty-patch episodes (points: runs)", fontsize=9)
    ax1.set_xlabel("RL step")
    ax1.set_ylabel("% of episodes")
    ax1.legend(fontsize=7, loc="upper center", bbox_to_anchor=(0.5, -0.13), ncol=2)
    unsub = summary["training"]["unsubmitted_all_episodes"]
    for i, m in enumerate(methods):
        steps = sorted(unsub[m])
        ax2.plot(
            steps,
            [100 * unsub[m][s][0] / unsub[m][s][1] for s in steps],
            color=f"C{i}",
            lw=1,
            alpha=0.6,
            label=f"{m}: unsubmitted exits, all {unsub[m][steps[0]][1]} episodes/step",
        )
        es = [e for e in eps if e["method"] == m]
        xs, ys = [], []
        for lo in range(1, max(steps) + 1, WINDOW):
            w = [e for e in es if lo <= e["step"] < lo + WINDOW]
            if w:
                xs.append(lo + (WINDOW - 1) / 2)
                ys.append(100 * sum(e["category"] == "no_edit" for e in w) / len(w))
        ax2.plot(
            xs,
            ys,
            "o-",
            color=f"C{i}",
            lw=2,
            label=f"{m}: empty patch, logged episodes ({len(es) * WINDOW // len(steps)}/point)",
        )
    ax2.set_title(
        f"training rollouts (logged: 2 episodes of one group per step and run, windows of {WINDOW} steps)",
        fontsize=9,
    )
    ax2.set_xlabel("RL step")
    ax2.set_ylabel("% of episodes")
    ax2.legend(fontsize=7, loc="upper center", bbox_to_anchor=(0.5, -0.13), ncol=2)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("compare_dir", nargs="?", default="runs/compare_2026-12-05")
    ap.add_argument(
        "--out", default="runs/empty_patches", help="folder for empty_patches.png and summary.json"
    )
    a = ap.parse_args()
    compare_dir, out = Path(a.compare_dir), Path(a.out)
    if not compare_dir.is_dir():
        ap.error(f"{compare_dir} is not a folder (expected `swe-rl compare --out`)")
    runs = load_runs(compare_dir)
    eps = logged_episodes(runs)
    summary = {
        "compare_dir": str(compare_dir),
        "eval": eval_section(runs),
        "training": training_section(runs, eps),
        "held_out_episodes": held_out_section(held_out_episodes(runs)),
    }
    out.mkdir(parents=True, exist_ok=True)
    plot(runs, eps, summary, out / "empty_patches.png")
    (out / "summary.json").write_text(json.dumps(summary, indent=1))
    print(f"\nanalyze_empty_patches: {out / 'empty_patches.png'}, {out / 'summary.json'}")


if __name__ == "__main__":
    main()
