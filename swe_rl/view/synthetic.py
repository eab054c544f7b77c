"""A generated evaluation run of any size, in the format `swe-rl eval` writes (through its own store and report
code), for the viewer's benchmark (bench/view_build.py: 500 instances x 4 runs) and its tests.

What is real: the micro suite's tasks (problem statements, gold patches, FAIL_TO_PASS / PASS_TO_PASS lists), the
scripted gold policy's replies (swe_rl.policy.scripted.gold_replies, parsed by the agent's own parser), the store
(EvalRun's paths and JSON, written without its per-file fsync: minutes for 4,000 files on a busy disk; the per-run
JSONL) and report.json. What is made up, from a seeded RNG: the
instance ids (each micro task stands for many), the observations (tool output of realistic length), token ids,
rollout log-probs and entropy, and the outcome mix (resolved, unresolved, empty patch, infrastructure failure,
suspicious). Sizes follow a real micro-suite trajectory: ~5-10K tokens, ~1K policy tokens, ~150-250 KB of JSON.
"""

from __future__ import annotations

import json
import random
from pathlib import Path
from typing import Any

import yaml

from swe_rl.agent.parsing import parse_action
from swe_rl.agent.trajectory import Trajectory
from swe_rl.evaluation.store import EvalRun
from swe_rl.policy.scripted import gold_replies

VOCAB = 151_643  # Qwen2.5's regular tokens: ids of realistic width in the JSON
OUTCOMES = [("resolved", 0.42), ("unresolved", 0.33), ("empty_patch", 0.1), ("infra_failure", 0.07),
            ("suspicious", 0.08)]  # fmt: skip
INFRA_KINDS = ["sandbox_start_failed", "policy_server_error", "sandbox_died"]
NODES = ["10.0.0.11 4f2a91c0", "10.0.0.12 b7d3e5a8"]  # two sandbox nodes, "<ip> <Ray node id, 8 hex>"
EXITS_UNRESOLVED = ["submitted", "submitted", "max_steps", "format_errors", "context_limit"]


def _observation(rng: random.Random, name: str, lines: int) -> str:
    body = "\n".join(f"{i:6d}\t{'x' * rng.randint(10, 70)}" for i in range(1, lines + 1))
    return f"Execution output of [{name}]:\n{body}\n[exit code: {rng.choice([0, 0, 1])}]\nSteps Remaining: 7"


# token ids to slice from (randrange per token is slow)
_POOL = random.Random(1).choices(range(VOCAB), k=1 << 16)


def _trajectory(task: Any, iid: str, run: int, outcome: str, rng: random.Random) -> Trajectory:
    replies = gold_replies(task.patch)
    prompt = f"I have uploaded a repository in /testbed.\n\n<github_issue>\n{task.problem_statement}\n</github_issue>\n"
    prompt += "Fix the issue. " * rng.randint(50, 200)  # the task prompt's instructions
    # as long as the real system prompt (its tool documentation)
    system = "You are a programming agent working in a repository inside a sandbox. " * 120
    msgs: list[dict[str, Any]] = [{"role": "system", "content": system}]
    ids: list[int] = []
    mask: list[int] = []

    def add(n: int, policy: int) -> list[int]:
        start = len(ids)
        at = rng.randrange(len(_POOL) - n) if n < len(_POOL) else 0
        ids.extend(_POOL[at : at + n])
        mask.extend([policy] * n)
        return [start, len(ids)]

    msgs.append({"role": "user", "content": prompt, "span": add((len(system) + len(prompt)) // 3, 0)})
    for k, reply in enumerate(replies if outcome != "empty_patch" else replies[-1:]):
        act = parse_action(reply, "xml")
        msgs.append({"role": "assistant", "content": reply, "span": add(len(reply) // 4 + 5, 1),
                     "finish_reason": "stop", "action": {"name": act.name, "params": act.params}})  # fmt: skip
        if k < len(replies) - 1:
            obs = _observation(rng, act.name, rng.choice([3, 8, 30, 120]))
            msgs.append({"role": "user", "content": obs, "span": add(len(obs) // 3, 0)})
    policy = [i for i, m in enumerate(mask) if m]
    logprobs = [0.0] * len(ids)
    entropy = [0.0] * len(ids)
    for i in policy:
        logprobs[i], entropy[i] = -rng.expovariate(3.0), rng.expovariate(2.0)
    infra = outcome == "infra_failure"
    exit_status = (
        "error" if infra else "submitted" if outcome != "unresolved" else rng.choice(EXITS_UNRESOLVED)
    )
    traj = Trajectory(iid, run, msgs[1]["span"][1], ids, mask, logprobs, entropy, [], msgs,
                      "" if outcome in ("empty_patch", "infra_failure") else task.patch, exit_status,
                      exit_status == "submitted", exit_status != "submitted")  # fmt: skip
    # an evaluation keeps a suspicious episode's verdict (reward policy `keep`), labelled
    traj.resolved = outcome in ("resolved", "suspicious")
    traj.reward = None if infra else 1.0 if traj.resolved else 0.0
    traj.error = (
        "Traceback (most recent call last):\n  ...\nSandboxStartError: container did not start"
        if infra
        else None
    )
    traj.metrics = {
        "steps": sum(m["role"] == "assistant" for m in msgs),
        "infra_failure": rng.choice(INFRA_KINDS) if infra else None,
    }
    return traj


def _grading(task: Any, traj: Trajectory, outcome: str) -> dict[str, Any]:
    ok = outcome in ("resolved", "suspicious")
    f2p, p2p = list(task.FAIL_TO_PASS), list(task.PASS_TO_PASS)
    status = {"FAIL_TO_PASS": {"success": f2p if ok else [], "failure": [] if ok else f2p},
              "PASS_TO_PASS": {"success": p2p, "failure": []}}  # fmt: skip
    suspicious = ["patch edits conftest.py (pytest configuration)"] if outcome == "suspicious" else []
    tests = {"tests_status": status, "resolved": ok, "integrity": {"suspicious": suspicious, "violations": []},
             "validation": {"status": "ok", "summary": f"graded on all {len(p2p)} PASS_TO_PASS", "left_out": []}}  # fmt: skip
    return {"instance_id": traj.task_id, "run": traj.sample_idx, "grader": "ours", "resolved": ok,
            "reward": None if outcome == "infra_failure" else 1.0 if ok else 0.0,
            "failure": traj.metrics.get("infra_failure"), "empty_patch": not traj.patch.strip(),
            "tests": tests if outcome not in ("infra_failure", "empty_patch") else {}, "suspicious": suspicious,
            "log_tail": "" if ok else "FAILED " + (f2p[0] if f2p else "tests") + "\n1 failed"}  # fmt: skip


def _write(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)


def make_eval_run(root: str | Path, instances: int = 500, runs: int = 4, seed: int = 0) -> Path:
    """Write runs x instances episodes into `root` (a run folder, created) and its report; returns root."""
    from swe_rl.evaluation.report import build_report, episode_from, report_json
    from swe_rl.evaluation.store import atomic_write
    from swe_rl.tasks.loaders import load_tasks

    rng = random.Random(seed)
    tasks = sorted(load_tasks("micro", split="test"), key=lambda t: t.instance_id)
    run = EvalRun(root)
    config = {"name": Path(root).name, "model_name": "scripted-gold (synthetic outcomes)", "runs": runs,
              "dataset": {"source": "synthetic", "split": "test"}, "grader": "ours"}  # fmt: skip
    run.dir.config.write_text(yaml.safe_dump(config))
    ids = [f"{tasks[i % len(tasks)].repo.replace('/', '__')}-{1000 + i}" for i in range(instances)]
    weights = [w for _, w in OUTCOMES]
    eps = []
    for r in range(runs):
        lines, preds = [], []
        for i, iid in enumerate(ids):
            task = tasks[i % len(tasks)]
            outcome = rng.choices([o for o, _ in OUTCOMES], weights)[0]
            traj = _trajectory(task, iid, r, outcome, rng)
            grading = _grading(task, traj, outcome)
            traj.metrics["worker_node"] = NODES[i % len(NODES)]  # its rollout actor's node (RolloutWorker)
            if outcome != "infra_failure":  # with `grader: ours` an episode carries its grading (rollout_one)
                traj.metrics["grading"] = {k: grading[k] for k in ("failure", "tests", "suspicious")}
            text = traj.to_json()
            _write(run.traj_path(r, iid), text)
            _write(run.grading_path(r, iid), json.dumps(grading, sort_keys=True))
            lines.append(text)
            preds.append(
                {"instance_id": iid, "model_name_or_path": config["model_name"], "model_patch": traj.patch}
            )
            eps.append(episode_from(traj, grading, task.repo))
        run.write_jsonl(run.dir.trajectories / f"run_{r:02d}.jsonl", lines)
        run.write_jsonl(run.predictions_path(r), preds)
    atomic_write(run.dir.report / "report.json", report_json(build_report(eps, runs, config)))
    return Path(root)
