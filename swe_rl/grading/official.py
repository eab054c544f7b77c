"""Run swebench's official `run_evaluation` offline on our Tasks and local images (for peer checks and bench).

The dataset is written as a local JSONL (swebench's `load_swebench_dataset` reads it), so the harness does not
rebuild images (it only builds from a task repo) and uses the ones already present; it runs in a subprocess
with its own working directory because it writes logs/ relative to the cwd. Every path handed to it is absolute
(`workdir` is resolved first): a relative one would be read against that working directory, not ours.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

from swe_rl.tasks.eval_script import instance_dict
from swe_rl.tasks.task import Task
from swe_rl.tasks.validation import graded_task, validation_of


def run_official(
    tasks: list[Task],
    patches: dict[str, str | None],
    workdir: str | Path,
    *,
    run_id: str = "peer",
    model: str = "peer-model",
    workers: int = 2,
    timeout: int = 1800,
) -> tuple[dict[str, Any], dict[str, dict[str, Any]]]:
    """(run summary, {instance_id: per-instance report or {} when the harness wrote none}).

    Each task goes to the harness as ours grades it (swe_rl.tasks.validation.graded_task): the PASS_TO_PASS
    tests its validation left out are left out of the official verdict too. An ungradeable task is not sent:
    its report is {"resolved": False, "ungradeable": why} (never resolved on the tests that remain)."""
    work = Path(workdir).resolve()  # the subprocess runs in `work`: relative paths would point inside it
    work.mkdir(parents=True, exist_ok=True)
    why = {t.instance_id: (validation_of(t) or {}).get("ungradeable") for t in tasks}
    tasks = [graded_task(t) for t in tasks if not why[t.instance_id]]
    patches = {i: p for i, p in patches.items() if not why.get(i)}
    if not patches:  # every instance ungradeable: nothing for the harness to run
        return {"resolved_ids": [], "ungradeable_ids": sorted(_ungradeable(why))}, _ungradeable(why)
    dataset = work / "dataset.jsonl"
    dataset.write_text("".join(json.dumps(instance_dict(t)) + "\n" for t in tasks))
    preds = work / "predictions.jsonl"
    rows = [{"instance_id": i, "model_patch": p, "model_name_or_path": model} for i, p in patches.items()]
    preds.write_text("".join(json.dumps(r) + "\n" for r in rows))
    cmd = [sys.executable, "-m", "swebench.harness.run_evaluation", "-d", str(dataset), "-p", str(preds),
           "-id", run_id, "--max_workers", str(workers), "-t", str(timeout), "--report_dir", str(work)]  # fmt: skip
    summary_path = work / f"{model}.{run_id}.json"
    for _ in range(3):
        proc = subprocess.run(cmd, cwd=work, capture_output=True, text=True)
        if proc.returncode == 0 or not _listing_race(proc.stderr):
            break
        # the instances ran and wrote their reports; only the run report failed. A rerun skips every instance with
        # a report (swebench's exclude_completed) and makes the run report again.
    if proc.returncode != 0 or not summary_path.is_file():
        raise RuntimeError(f"official run_evaluation failed (exit {proc.returncode}):\n{proc.stderr[-3000:]}")
    reports = _ungradeable(why)
    for iid in patches:
        path = work / "logs" / "run_evaluation" / run_id / model / iid / "report.json"
        reports[iid] = json.loads(path.read_text())[iid] if path.is_file() else {}
    return json.loads(summary_path.read_text()), reports


def _ungradeable(why: dict[str, str | None]) -> dict[str, dict[str, Any]]:
    """The reports of the ungradeable instances (never sent to the harness)."""
    return {i: {"resolved": False, "ungradeable": w} for i, w in why.items() if w}


def _listing_race(stderr: str) -> bool:
    """swebench's run report lists every container on the engine (`containers.list(all=True)` inspects each one):
    a container of another process removed in between fails the whole run with a 404, after its instances ran."""
    return "make_run_report" in stderr and "404 Client Error" in stderr and "/containers/" in stderr
