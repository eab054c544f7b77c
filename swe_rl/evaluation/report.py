"""report.json and report.md from the episodes of an evaluation run (deterministic: same episodes → same bytes).

Each (run, instance) falls in exactly one bucket: infra_failure (the episode or its grading failed for
infrastructure reasons: reward None), empty_patch, resolved, or unresolved. The resolve rate counts every
episode in its denominator (infra failures are unresolved for the rate, but listed apart so they can be re-run).
"""

from __future__ import annotations

import json
from collections import Counter, defaultdict
from dataclasses import dataclass
from typing import Any

from swe_rl.agent.trajectory import Trajectory
from swe_rl.evaluation.metrics import default_ks, mean_pass_at_k, wilson_interval

BUCKETS = ("resolved", "unresolved", "empty_patch", "infra_failure")


@dataclass(frozen=True)
class Episode:
    """One graded episode as the report sees it."""

    run: int
    instance_id: str
    repo: str
    bucket: str  # one of BUCKETS
    exit_status: str
    steps: int
    tokens: int  # all tokens of the episode (prompt + policy + observations)
    policy_tokens: int
    failure: str | None  # infra failure label (grader's, or "episode_error")
    suspicious: tuple[
        str, ...
    ] = ()  # why the grader suspects a reward hack (swe_rl.grading.reward); kept, labelled
    patch_caused: str | None = None  # unresolved: the timeout / sandbox death its patch caused (grader)
    error: str | None = None  # an infra failure's error, its last line
    node: str | None = None  # the rollout actor's node "<ip> <id8>" (with Docker sandboxes, theirs)


def episode_from(traj: Trajectory, grading: dict[str, Any] | None, repo: str) -> Episode:
    failure = None
    if traj.exit_status == "error":  # the kind rollout_one gave it (policy server, sandbox start ...)
        bucket, failure = "infra_failure", str(traj.metrics.get("infra_failure") or "episode_error")
    elif grading is None or grading.get("reward") is None:
        bucket = "infra_failure"
        failure = (grading or {}).get("failure") or "not_graded"
    elif not traj.patch.strip():
        bucket = "empty_patch"
    else:
        bucket = "resolved" if grading.get("resolved") else "unresolved"
    steps = traj.metrics.get("steps")
    if not isinstance(steps, int):
        steps = sum(1 for m in traj.messages if m.get("role") == "assistant")
    node = traj.metrics.get("worker_node")
    return Episode(
        run=traj.sample_idx,
        instance_id=traj.task_id,
        repo=repo,
        bucket=bucket,
        exit_status=traj.exit_status or "unknown",
        steps=steps,
        tokens=len(traj.token_ids),
        policy_tokens=sum(traj.loss_mask),
        failure=failure,
        suspicious=tuple((grading or {}).get("suspicious") or ()),
        patch_caused=(((grading or {}).get("tests") or {}).get("patch_caused") or {}).get("failure"),
        error=_last_line(traj.error) if failure else None,
        node=node if isinstance(node, str) else None,
    )


def _last_line(text: str | None) -> str | None:
    lines = (text or "").strip().splitlines()
    return lines[-1][:500] if lines else None


def _stats(values: list[int]) -> dict[str, float]:
    if not values:
        return {"mean": 0.0, "min": 0, "max": 0}
    return {"mean": round(sum(values) / len(values), 4), "min": min(values), "max": max(values)}


def build_report(episodes: list[Episode], n_runs: int, meta: dict[str, Any]) -> dict[str, Any]:
    """The report.json content. `meta` (dataset, model name, grader ...) is copied in as is."""
    episodes = sorted(episodes, key=lambda e: (e.run, e.instance_id))
    instances = sorted({e.instance_id for e in episodes})
    runs = []
    for r in range(n_runs):
        mine = [e for e in episodes if e.run == r]
        row: dict[str, Any] = {"run": r, "total": len(mine)}
        for b in BUCKETS:
            row[f"{b}_ids"] = [e.instance_id for e in mine if e.bucket == b]
        row["resolve_rate"] = round(len(row["resolved_ids"]) / len(mine), 6) if mine else 0.0
        runs.append(row)
    resolved = sum(e.bucket == "resolved" for e in episodes)
    lo, hi = wilson_interval(resolved, len(episodes))
    per_instance = {i: (0, 0) for i in instances}
    for e in episodes:
        n, c = per_instance[e.instance_id]
        per_instance[e.instance_id] = (n + 1, c + (e.bucket == "resolved"))
    full = [
        nc for nc in per_instance.values() if nc[0] == n_runs
    ]  # Pass@k needs all k samples of an instance
    pass_k = {str(k): round(mean_pass_at_k(full, k), 6) for k in default_ks(n_runs)} if full else {}
    repos: dict[str, dict[str, Any]] = defaultdict(lambda: {"episodes": 0, "resolved": 0})
    for e in episodes:
        repos[e.repo]["episodes"] += 1
        repos[e.repo]["resolved"] += e.bucket == "resolved"
    for v in repos.values():
        v["resolve_rate"] = round(v["resolved"] / v["episodes"], 6)
    # where the episodes ran (Ray evaluations): a node whose Docker or network is broken shows as its failures
    nodes: dict[str, dict[str, int]] = defaultdict(lambda: {"episodes": 0, "resolved": 0, "infra_failure": 0})
    for e in episodes:
        if e.node is not None:
            nodes[e.node]["episodes"] += 1
            nodes[e.node]["resolved"] += e.bucket == "resolved"
            nodes[e.node]["infra_failure"] += e.bucket == "infra_failure"
    return {
        **meta,
        "n_instances": len(instances),
        "n_runs": n_runs,
        "episodes": len(episodes),
        "counts": {b: sum(e.bucket == b for e in episodes) for b in BUCKETS},
        "resolve_rate": round(resolved / len(episodes), 6) if episodes else 0.0,
        "resolve_rate_ci95": [round(lo, 6), round(hi, 6)],
        "pass@1_mean_over_runs": round(sum(r["resolve_rate"] for r in runs) / n_runs, 6) if n_runs else 0.0,
        "pass@k": pass_k,
        "exit_status_counts": dict(sorted(Counter(e.exit_status for e in episodes).items())),
        "infra_failure_labels": dict(sorted(Counter(e.failure for e in episodes if e.failure).items())),
        # per label, the first such episode's error (its last line): what to fix before re-running them
        "infra_failure_examples": {
            label: next((e.error for e in episodes if e.failure == label and e.error), None)
            for label in sorted({e.failure for e in episodes if e.failure})
        },
        "patch_caused_labels": dict(
            sorted(Counter(e.patch_caused for e in episodes if e.patch_caused).items())
        ),
        "steps": _stats([e.steps for e in episodes]),
        "tokens": _stats([e.tokens for e in episodes]),
        "policy_tokens": _stats([e.policy_tokens for e in episodes]),
        "per_repo": dict(sorted(repos.items())),
        "per_node": dict(sorted(nodes.items())),
        "per_instance_resolved": {i: per_instance[i][1] for i in instances},
        # evaluation keeps a suspicious episode's verdict (reward policy `keep`) and lists it with its reasons
        "suspicious": [
            {"run": e.run, "instance_id": e.instance_id, "bucket": e.bucket, "reasons": list(e.suspicious)}
            for e in episodes
            if e.suspicious
        ],
        "runs": runs,
    }


def report_json(report: dict[str, Any]) -> str:
    return json.dumps(report, indent=2, sort_keys=False) + "\n"


def report_markdown(report: dict[str, Any], plots: list[str]) -> str:
    lo, hi = report["resolve_rate_ci95"]
    lines = [
        f"# Evaluation: {report.get('name', '')}",
        "",
        f"- dataset: `{report.get('dataset', '')}` · model: `{report.get('model_name', '')}` · "
        f"grader: `{report.get('grader', '')}`",
        f"- instances: {report['n_instances']} · runs (k): {report['n_runs']} · episodes: {report['episodes']}",
        f"- **resolve rate: {report['resolve_rate']:.1%}** (95% Wilson CI {lo:.1%} – {hi:.1%})",
        f"- Pass@1 (mean over runs): {report['pass@1_mean_over_runs']:.1%}",
    ]
    if report["pass@k"]:
        lines.append("- " + " · ".join(f"Pass@{k}: {v:.1%}" for k, v in report["pass@k"].items()))
    c = report["counts"]
    lines += [
        f"- resolved {c['resolved']} · unresolved {c['unresolved']} · empty patch {c['empty_patch']} · "
        f"infra failure {c['infra_failure']}",
        f"- steps per episode: mean {report['steps']['mean']:.1f} (max {report['steps']['max']}) · "
        f"tokens per episode: mean {report['tokens']['mean']:.0f}",
        "",
        "## Per repository",
        "",
        "| repo | episodes | resolved | resolve rate |",
        "|---|---:|---:|---:|",
    ]
    for repo, v in report["per_repo"].items():
        lines.append(f"| {repo or '(none)'} | {v['episodes']} | {v['resolved']} | {v['resolve_rate']:.1%} |")
    if len(report.get("per_node") or {}) > 1:  # one node (a single machine) says nothing
        lines += [
            "",
            "## Per node",
            "",
            "| node | episodes | resolved | infra failure |",
            "|---|---:|---:|---:|",
        ]
        lines += [f"| {n} | {v['episodes']} | {v['resolved']} | {v['infra_failure']} |"
                  for n, v in report["per_node"].items()]  # fmt: skip
    lines += ["", "## Exit reasons", "", "| exit status | episodes |", "|---|---:|"]
    lines += [f"| {k} | {v} |" for k, v in report["exit_status_counts"].items()]
    if report["infra_failure_labels"]:
        lines += [
            "",
            "Infrastructure failures: "
            + ", ".join(f"{k} ×{v}" for k, v in report["infra_failure_labels"].items()),
        ]
        examples = report.get("infra_failure_examples") or {}
        lines += [f"- {k}, the first: `{v}`" for k, v in examples.items() if v]
    if report.get("pool_losses"):
        lost = report["pool_losses"]
        lines += [
            "",
            f"Rollout pool losses ({lost.get('sessions', 0)} session(s)): actors died {lost.get('actors_died', 0)} · "
            f"actors unplaceable {lost.get('actors_unplaceable', 0)} · episodes re-run {lost.get('episodes_rerun', 0)}",
        ]
    if report.get("patch_caused_labels"):
        lines += [
            "",
            "Unresolved by what the patch caused (gold's grading here was clean): "
            + ", ".join(f"{k} ×{v}" for k, v in report["patch_caused_labels"].items()),
        ]
    if report.get("suspicious"):
        lines += [
            "",
            f"Suspicious episodes (reward hack suspected, verdict kept): {len(report['suspicious'])}",
        ]
        lines += [
            f"- run {s['run']} {s['instance_id']} ({s['bucket']}): {'; '.join(s['reasons'])}"
            for s in report["suspicious"]
        ]
    if report.get("validation"):  # instance validation (swe_rl.grading.validate): what each verdict measured
        lines += ["", "## What was graded", ""]
        lines += [f"- {iid}: {line}" for iid, line in report["validation"].items()]
    if plots:
        lines += ["", "## Plots", ""] + [f"![{p}]({p})" for p in plots]
    return "\n".join(lines) + "\n"
