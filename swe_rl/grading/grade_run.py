"""Grade a predictions file over many tasks: parallel, resumable, with per-instance reports and a run summary.

Layout of OUT (per instance, like swebench's logs/run_evaluation/<run>/<model>/<id>/):
    OUT/<instance_id>/report.json      swebench's get_eval_report dict ({id: {...}}) + reward / failure
    OUT/<instance_id>/test_output.txt  the eval script's output
    OUT/<instance_id>/patch.diff       the graded patch
    OUT/summary.json                   the run summary, with swebench make_run_report's keys (schema_version 2)
An instance with a report.json is finished and skipped on the next run; infrastructure failures write
failure.json instead, so they are retried. Empty patches are not run (as in swebench) and count as empty.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

from swe_rl.grading.cost import summary as cost_summary
from swe_rl.grading.grader import SandboxFactory, grade, validation_shown
from swe_rl.grading.reward import RewardResult
from swe_rl.grading.validate import validate_tasks
from swe_rl.tasks.task import Task

REPORT, FAILURE, TEST_OUTPUT, PATCH = "report.json", "failure.json", "test_output.txt", "patch.diff"


def load_predictions(path: str, tasks: list[Task]) -> dict[str, dict[str, Any]]:
    """instance_id -> prediction, read with swebench's reader; 'gold' means each task's gold patch."""
    if path == "gold":
        return {
            t.instance_id: {
                "instance_id": t.instance_id,
                "model_patch": t.patch,
                "model_name_or_path": "gold",
            }
            for t in tasks
        }
    from swebench.harness.utils import get_predictions_from_file

    try:
        preds = get_predictions_from_file(path, "", "test")
    except (OSError, ValueError, json.JSONDecodeError) as e:
        raise ValueError(f"predictions {path}: {e}") from e
    out = {}
    for i, p in enumerate(preds):
        iid = p.get("instance_id") if isinstance(p, dict) else None
        if not isinstance(iid, str) or not iid:
            raise ValueError(f"predictions {path}: row {i}: field 'instance_id': expected a non-empty string")
        if "model_patch" not in p:
            raise ValueError(f"predictions {path}: row {i} ({iid}): field 'model_patch': missing")
        if p["model_patch"] is not None and not isinstance(p["model_patch"], str):
            got = type(p["model_patch"]).__name__
            raise ValueError(
                f"predictions {path}: row {i} ({iid}): field 'model_patch': expected a diff (string) or null, got {got}"
            )
        out[iid] = p
    unknown = sorted(set(out) - {t.instance_id for t in tasks})
    if unknown:
        raise ValueError(
            f"predictions {path}: instance ids not in the task source: {', '.join(unknown[:10])}"
        )
    return out


def _write_instance(d: Path, pred: dict, result: RewardResult) -> None:
    d.mkdir(parents=True, exist_ok=True)
    (d / PATCH).write_text(pred.get("model_patch") or "")
    (d / TEST_OUTPUT).write_text(result.log)
    body = {"reward": result.reward, "failure": result.failure}
    if result.failure is not None:
        (d / FAILURE).write_text(json.dumps(body | {"tests": result.tests}, indent=2))
        return
    (d / FAILURE).unlink(missing_ok=True)
    report = {pred["instance_id"]: {**result.tests, "resolved": result.resolved, **body}}
    (d / REPORT).write_text(json.dumps(report, indent=4))


def summarize(tasks: list[Task], preds: dict[str, dict], out: Path) -> dict[str, Any]:
    """The run summary with the keys of swebench's make_run_report (schema_version 2), from OUT's reports."""
    ids = {t.instance_id for t in tasks}
    sets: dict[str, set[str]] = {
        k: set()
        for k in (
            "completed",
            "resolved",
            "unresolved",
            "empty_patch",
            "error",
            "incomplete",
            "infra",
            "suspicious",
        )
    }
    reasons: dict[str, str] = {}
    caused: dict[
        str, str
    ] = {}  # unresolved: a timeout or a sandbox death that was the patch's (grader._patch_caused)
    costs: list[dict[str, Any] | None] = []  # tests["cost"] of every graded instance (swe_rl.grading.cost)
    for iid in sorted(ids):
        pred = preds.get(iid)
        if pred is None:
            sets["incomplete"].add(iid)
            continue
        if pred.get("model_patch") in ("", None):
            sets["empty_patch"].add(iid)
            continue
        report, failure = out / iid / REPORT, out / iid / FAILURE
        if report.is_file():
            sets["completed"].add(iid)
            rep = json.loads(report.read_text())[iid]
            costs.append(rep.get("cost"))
            sets["resolved" if rep.get("resolved") else "unresolved"].add(iid)
            if rep.get("patch_caused"):
                caused[iid] = rep["patch_caused"]["failure"]
            if (rep.get("integrity") or {}).get(
                "suspicious"
            ):  # labelled, verdict kept (swe_rl.grading.reward)
                sets["suspicious"].add(iid)
        else:
            sets["error"].add(iid)
            if failure.is_file():
                sets["infra"].add(iid)
                body = json.loads(failure.read_text())
                reasons[iid] = body.get("failure") or "unknown"
                costs.append((body.get("tests") or {}).get("cost"))
    s = {k: sorted(v) for k, v in sets.items()}
    shown = {t.instance_id: validation_shown(t) for t in tasks}
    # what each validated instance's verdict measured (swe_rl.grading.validate), for any instance it changed
    validation = {i: v["summary"] for i, v in sorted(shown.items()) if v and v["status"] != "ok"}
    return {
        "total_instances": len(ids),
        "submitted_instances": len(preds),
        "completed_instances": len(s["completed"]),
        "resolved_instances": len(s["resolved"]),
        "unresolved_instances": len(s["unresolved"]),
        "infra_failure_instances": len(s["infra"]),
        "ambiguous_failure_instances": 0,
        "empty_patch_instances": len(s["empty_patch"]),
        "error_instances": len(s["error"]),
        "completed_ids": s["completed"],
        "incomplete_ids": s["incomplete"],
        "empty_patch_ids": s["empty_patch"],
        "submitted_ids": sorted(preds),
        "resolved_ids": s["resolved"],
        "unresolved_ids": s["unresolved"],
        "infra_failure_ids": s["infra"],
        "ambiguous_failure_ids": [],
        "failure_reasons": reasons,
        "patch_caused": caused,  # ours: instance -> the timeout / death its patch caused (unresolved, not infra)
        "error_ids": s["error"],
        "suspicious_instances": len(s["suspicious"]),  # ours, beyond make_run_report's keys
        "suspicious_ids": s["suspicious"],
        "ungradeable_ids": sorted(i for i, v in shown.items() if v and v["status"] == "ungradeable"),
        "validation": validation,  # ours: instance -> "graded on N of M PASS_TO_PASS; left out: ..."
        "grading_cost": cost_summary(costs),  # ours: gradings run, seconds, mean seconds per phase
        "schema_version": 2,
    }


async def grade_predictions(
    tasks: list[Task],
    preds: dict[str, dict[str, Any]],
    factory: SandboxFactory,
    out: str | Path,
    *,
    workers: int = 2,
    timeout: float = 1800.0,
    on_done: Callable[[str, RewardResult | None], None] | None = None,
    validate: bool = True,
) -> dict[str, Any]:
    """Grade every prediction not yet finished in OUT, `workers` at a time; write reports and the summary.
    `validate`: each task is validated first (swe_rl.grading.validate: once per image, cached), so that its
    verdict leaves out what the gold patch cannot pass here for a named environmental reason, and says so."""
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    if validate:
        mine = [t for t in tasks if t.instance_id in preds]
        checked = {
            t.instance_id: t for t in await validate_tasks(mine, factory, workers=workers, timeout=timeout)
        }
        tasks = [checked.get(t.instance_id, t) for t in tasks]
    todo = [t for t in tasks if t.instance_id in preds and not (out / t.instance_id / REPORT).is_file()]
    sem = asyncio.Semaphore(max(1, workers))

    async def one(task: Task) -> None:
        pred = preds[task.instance_id]
        patch = pred.get("model_patch")
        if patch in ("", None):  # swebench does not run these; recorded as empty patches
            if on_done:
                on_done(task.instance_id, None)
            return
        async with sem:
            try:
                result = await grade(task, patch, factory, timeout=timeout)
            except Exception as e:  # the one boundary per instance: record it, retried on the next run
                result = RewardResult(
                    None, False, {}, f"{type(e).__name__}: {e}", f"grader_error:{type(e).__name__}"
                )
        _write_instance(out / task.instance_id, pred, result)
        if on_done:
            on_done(task.instance_id, result)

    await asyncio.gather(*(one(t) for t in todo))
    summary = summarize(tasks, preds, out)
    (out / "summary.json").write_text(json.dumps(summary, indent=4))
    return summary


async def gold_false_positives(
    tasks: list[Task], factory: SandboxFactory, *, workers: int = 2, timeout: float = 1800.0
) -> dict[str, list[str]]:
    """Grade every task's gold patch through the guarded grader; {instance_id: reasons} for each gold that does
    not resolve or carries an integrity finding (violations, bytecode, writes in .git, a suspicious label).
    {} = no false positive. For any task source (the micro suite, real SWE-bench instances)."""
    sem = asyncio.Semaphore(max(1, workers))
    tasks = await validate_tasks(tasks, factory, workers=workers, timeout=timeout)

    async def one(task: Task) -> tuple[str, list[str]]:
        async with sem:
            r = await grade(task, task.patch, factory, timeout=timeout)
        integrity = r.tests.get("integrity") or {}
        reasons = [
            *integrity.get("violations", []),
            *(f"bytecode: {p}" for p in integrity.get("bytecode", [])),
        ]
        reasons += [f"git_dir: {p}" for p in integrity.get("git_dir", [])] + list(r.suspicious)
        if not r.resolved:
            reasons.insert(0, f"not resolved (reward {r.reward}, failure {r.failure})")
        return task.instance_id, reasons

    results = await asyncio.gather(*(one(t) for t in tasks))
    return {iid: reasons for iid, reasons in results if reasons}
