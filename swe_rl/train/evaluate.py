"""Held-out evaluation of the policy on generated tasks, through the same rollout path as training.

`HeldOutEval(rollouter, tasks)` runs every held-out task greedily (and optionally sampled at T=1) and returns
success rates, per-family rates, exit reasons and, on generated tasks, how the unresolved episodes failed
(`failure_mode`: the flawed expert's off-by-one constant, another edit, no edit); the episodes go into the
evaluation harness's report (`write_eval_report`) so the demo's report has the same shape as `swe-rl eval`'s.

With `record_dir` set, every evaluation also writes the per-task rewards (`record_dir/step_<step>.json`:
`{"step": .., "modes": {mode: {task_id: [reward of sample 0, 1, ..]}}}`), which `swe-rl compare`'s paired
two-level bootstrap resamples. With `episodes_dir` set, it writes every episode (`episodes_dir/step_<step>.jsonl`,
one JSON line each: mode, task_id, sample, reward, resolved, exit, failure, patch, messages), so how a held-out
episode failed can be read after the run.
"""

from __future__ import annotations

import json
from collections import Counter, defaultdict
from pathlib import Path
from typing import Any

from swe_rl.agent.trajectory import Trajectory
from swe_rl.evaluation.store import atomic_write
from swe_rl.runs import RunDir
from swe_rl.tasks.task import Task


class HeldOutEval:
    def __init__(self, rollouter: Any, tasks: list[Task], *, sampled: int = 0, seed: int = 10_000,
                 record_dir: Path | None = None, episodes_dir: Path | None = None):  # fmt: skip
        self.rollouter = rollouter  # a PipelineRollouter (its agent_cfg sets the limits)
        self.tasks = tasks
        self.sampled = sampled  # samples per task at T=1 (0 = greedy only)
        self.seed = seed
        self.last: dict[str, list[Trajectory]] = {}
        self.record_dir: Path | None = record_dir  # when set, run(step) writes the per-task rewards there
        self.last_record: dict[str, dict[str, list[float]]] = {}  # mode -> task_id -> rewards of the last run
        self.episodes_dir: Path | None = episodes_dir  # when set, run(step) writes every episode there

    def run(self, step: int = 0) -> dict[str, float]:
        out: dict[str, float] = {}
        self.last, self.last_record = {}, {}
        for mode, temp, n in (("greedy", 0.0, 1), ("sampled", 1.0, self.sampled)):
            if n <= 0:
                continue
            roll = self.rollouter.with_temperature(temp)
            trajs = roll.rollout(self.tasks, n, self.seed)
            self.last[mode] = trajs
            self.last_record[mode] = task_rewards(trajs)
            out.update(summarize(trajs, self.tasks, n, prefix=f"{mode}_"))
        if self.record_dir is not None:
            write_record(self.record_dir, step, self.last_record)
        if self.episodes_dir is not None:
            write_episodes(episodes_path(self.episodes_dir, step), self.last, self.tasks)
        return out

    __call__ = run

    def keep_in(self, run: RunDir) -> None:
        """Every later evaluation writes its per-task rewards and episodes into the run directory."""
        self.record_dir, self.episodes_dir = run.eval_tasks, run.eval_episodes


def task_rewards(trajs: list[Trajectory]) -> dict[str, list[float]]:
    """task_id -> the rewards of its samples in rollout order (an ungraded reward, None, counts as 0)."""
    out: dict[str, list[float]] = {}
    for t in trajs:
        out.setdefault(t.task_id, []).append(float(t.reward or 0.0))
    return out


def record_path(record_dir: Path, step: int) -> Path:
    return Path(record_dir) / f"step_{step:06d}.json"


def write_record(record_dir: Path, step: int, modes: dict[str, dict[str, list[float]]]) -> Path:
    """Write one evaluation's per-task rewards atomically (a temporary file renamed over the target)."""
    path = record_path(record_dir, step)
    atomic_write(path, json.dumps({"step": step, "modes": modes}))
    return path


def episodes_path(episodes_dir: Path, step: int) -> Path:
    return Path(episodes_dir) / f"step_{step:06d}.jsonl"


def write_episodes(path: Path, modes: dict[str, list[Trajectory]], tasks: list[Task]) -> Path:
    """Write one evaluation's episodes to `path` atomically, one JSON line each, in rollout order (task-major;
    `sample` is the episode's index among its task's samples in that mode)."""
    by_id = {t.instance_id: t for t in tasks}
    lines = []
    for mode, trajs in modes.items():
        seen: Counter[str] = Counter()
        for t in trajs:
            task = by_id.get(t.task_id)
            rec = {"mode": mode, "task_id": t.task_id, "sample": seen[t.task_id], "reward": t.reward,
                   "resolved": bool(t.resolved), "exit": t.exit_status,
                   "failure": failure_mode(t, task) if task is not None else None,
                   "patch": t.patch, "messages": t.messages}  # fmt: skip
            seen[t.task_id] += 1
            lines.append(json.dumps(rec) + "\n")
    return atomic_write(path, "".join(lines))


def summarize(trajs: list[Trajectory], tasks: list[Task], n: int, prefix: str = "") -> dict[str, float]:
    fam = {t.instance_id: t.metadata.get("family", "?") for t in tasks}
    by_fam: dict[str, list[float]] = defaultdict(list)
    for t in trajs:
        by_fam[fam.get(t.task_id, "?")].append(float(t.reward or 0.0))
    out = {f"{prefix}success": sum(float(t.reward or 0.0) for t in trajs) / max(len(trajs), 1)}
    # success under the training reward spec's default (a patch counts only when the agent submitted it);
    # `success` grades every final patch, as SWE-bench does
    out[f"{prefix}success_submitted"] = sum(
        float(t.reward or 0.0) for t in trajs if t.exit_status == "submitted"
    ) / max(len(trajs), 1)
    out.update({f"{prefix}family/{k}": sum(v) / len(v) for k, v in sorted(by_fam.items())})
    if n > 1:  # fraction of tasks whose n samples disagree (the RL signal)
        groups = [trajs[i : i + n] for i in range(0, len(trajs), n)]
        mixed = sum(1 for g in groups if len({t.reward for t in g}) > 1)
        out[f"{prefix}mixed_task_frac"] = mixed / max(len(groups), 1)
    out.update(
        {f"{prefix}exit/{k}": v / len(trajs) for k, v in Counter(t.exit_status for t in trajs).items()}
    )
    by_id = {t.instance_id: t for t in tasks}
    modes = [failure_mode(t, by_id[t.task_id]) for t in trajs if t.task_id in by_id]
    if trajs and any("flawed_new" in (t.metadata.get("expert") or {}) for t in tasks):
        out.update({f"{prefix}fail/{m}": modes.count(m) / len(trajs) for m in FAILURE_MODES})
    return out


# How an unresolved episode on a generated task failed (fractions of all episodes in the eval metrics):
# flawed_constant: exactly the flawed expert's edit (the right line, the constant off by one), the choice RL has to
#   learn against; other_edit: any other patch (copy errors, wrong line, several edits); no_edit: an empty patch;
#   infra: no verdict (episode error or grading infrastructure failure).
FAILURE_MODES = ("flawed_constant", "other_edit", "no_edit", "infra")


def failure_mode(traj: Trajectory, task: Task) -> str | None:
    """None when resolved; one of FAILURE_MODES; "unknown" for tasks without a flawed expert (not generated)."""
    if traj.resolved:
        return None
    ex = task.metadata.get("expert") or {}
    if "flawed_new" not in ex:
        return "unknown"
    if traj.reward is None or traj.exit_status == "error":
        return "infra"
    lines = traj.patch.splitlines()
    added = [x[1:] for x in lines if x.startswith("+") and not x.startswith("+++")]
    removed = [x[1:] for x in lines if x.startswith("-") and not x.startswith("---")]
    if not added and not removed:
        return "no_edit"
    one_line = len(added) == len(removed) == 1 and ex["old"] in removed[0]
    if one_line and added[0] == removed[0].replace(ex["old"], ex["flawed_new"]):
        return "flawed_constant"
    return "other_edit"


def write_eval_report(
    trajs: list[Trajectory], tasks: list[Task], out_dir: Path, meta: dict[str, Any]
) -> Path:
    """The evaluation harness's report (report.json, report.md, plots) for these episodes."""
    from swe_rl.evaluation.plots import write_plots
    from swe_rl.evaluation.report import build_report, episode_from, report_json, report_markdown

    out_dir.mkdir(parents=True, exist_ok=True)
    repo = {t.instance_id: t.repo for t in tasks}
    episodes = []
    for t in trajs:
        grading = t.metrics.get("grading") or {}
        rec = {"resolved": bool(t.resolved), "reward": t.reward, "failure": grading.get("failure"),
               "tests": grading.get("tests", {})}  # fmt: skip
        episodes.append(episode_from(t, rec, repo.get(t.task_id, "")))
    report = build_report(episodes, 1, meta)
    plots = write_plots(report, episodes, out_dir)
    (out_dir / "report.json").write_text(report_json(report))
    (out_dir / "report.md").write_text(report_markdown(report, plots))
    with (out_dir / "trajectories.jsonl").open("w") as f:
        for t in trajs:
            f.write(json.dumps({"task_id": t.task_id, "reward": t.reward, "exit": t.exit_status,
                                "patch": t.patch, "messages": t.messages}) + "\n")  # fmt: skip
    return out_dir / "report.md"
