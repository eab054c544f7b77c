"""The learning rehearsal's measurement: `swe-rl eval`'s harness on the held-out generated tasks, and the
pre-registered statistics (docs/results/openrlhf_learns_2026-12-04/PLAN.md).

`evaluate(model_dir, ...)` runs the evaluation harness (`swe_rl.evaluation.harness.run_eval`) twice on one checkpoint
folder read with `from_pretrained`: greedy (1 run) and sampled at T=1 (SAMPLED runs), the demo's agent and prompts,
fixed sampling seeds; it returns per-task success. `gain_table` compares arms with a paired bootstrap over tasks.
"""

from __future__ import annotations

import json
import random
from pathlib import Path
from typing import Any

HELD_OUT, SAMPLED, SEED = 96, 2, 10_000  # held-out tasks, samples per task at T=1, the agent's sampling seed
BOOTSTRAP, MARGIN = 10_000, 0.10  # resamples; the equivalence margin (10 points) for "same gain"


def write_held_out(path: Path) -> Path:
    """The held-out split the demo evaluates (its first 48 tasks are the demo's), as a task JSONL the harness
    loads."""
    from swe_rl.tasks.generator import generate_tasks

    path.parent.mkdir(parents=True, exist_ok=True)
    tasks = generate_tasks(HELD_OUT, "held_out", 0, 3)
    path.write_text("".join(json.dumps(t.model_dump(mode="json")) + "\n" for t in tasks))
    return path


def evaluate(model_dir: Path | str, name: str, out: Path, tasks_jsonl: Path) -> dict[str, Any]:
    """{mode: {"rate": resolved fraction, "tasks": {task id: mean success over its runs}}} for greedy and
    sampled, through the evaluation harness (its run dirs and reports under `out/<name>-<mode>`)."""
    from swe_rl.evaluation.config import EvalConfig
    from swe_rl.evaluation.harness import run_eval
    from swe_rl.train.env import demo_agent_config
    from swe_rl.train.sft import prompts_dir

    result: dict[str, Any] = {}
    for mode, temperature, runs in (("greedy", 0.0, 1), ("sampled", 1.0, SAMPLED)):
        agent = demo_agent_config(prompts_dir(), temperature=temperature, seed=SEED, max_new_tokens=56)
        cfg = EvalConfig.model_validate({
            "name": f"{name}-{mode}", "output_dir": str(out), "model_name": name,
            "dataset": {"source": str(tasks_jsonl)}, "runs": runs,
            "policy": {"kind": "hf", "model": str(model_dir), "max_batch": 16},
            "agent": agent.model_dump(), "pool": {"backend": "local", "num_actors": 1, "episodes_per_actor": 16},
            "sandbox": {"backend": "docker", "image": "swe-rl/base:bookworm",
                        "warm_pool": {"size": 4, "reuse": True}},
        })  # fmt: skip
        report = run_eval(cfg)
        if not report.get("complete"):
            raise RuntimeError(f"evaluation {cfg.name}: not every episode finished (see {out / cfg.name})")
        ids = _task_ids(tasks_jsonl)
        resolved = [set(run["resolved_ids"]) for run in report["runs"]]
        tasks = {i: sum(i in r for r in resolved) / len(resolved) for i in ids}
        result[mode] = {"rate": sum(tasks.values()) / len(tasks), "tasks": tasks, "runs": len(resolved)}
    return result


def _task_ids(tasks_jsonl: Path) -> list[str]:
    return [json.loads(x)["instance_id"] for x in tasks_jsonl.read_text().splitlines() if x.strip()]


def paired_bootstrap(a: dict[str, float], b: dict[str, float], seed: int = 0) -> tuple[float, float, float]:
    """Mean of b − a over tasks and its 95% percentile interval (tasks resampled with replacement)."""
    ids = sorted(a)
    diffs = [b[i] - a[i] for i in ids]
    rng = random.Random(seed)
    means = sorted(sum(rng.choice(diffs) for _ in ids) / len(ids) for _ in range(BOOTSTRAP))
    return sum(diffs) / len(ids), means[int(0.025 * BOOTSTRAP)], means[int(0.975 * BOOTSTRAP) - 1]


def verdict_rising(gain: tuple[float, float, float]) -> str:
    return "rising" if gain[1] > 0 else ("not shown" if gain[0] > 0 else "not rising")


def verdict_same(diff: tuple[float, float, float]) -> str:
    """Equivalence of two gains: the difference's interval inside ±MARGIN (same), excluding 0 (different),
    else inconclusive."""
    if diff[1] >= -MARGIN and diff[2] <= MARGIN:
        return "same within ±10 points"
    if diff[1] > 0 or diff[2] < 0:
        return "different"
    return "inconclusive"
