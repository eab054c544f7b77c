"""Instance validation: the gold patch graded in the sandbox exactly as any patch is, once per image, and what
that says about the instance here (swe_rl.tasks.validation: tests left out for a nameable environmental reason,
gold failing for no such reason, an ungradeable instance) put into the task row's `metadata["validation"]`.

Cached by a key over the image's id, the fields grading reads and the rules (`validation_key`): a rebuilt image, an
edited row or new rules validate again; nothing else does. A patch never reaches this: the record comes from the
gold patch alone, before any patch of a run is graded, and grading only reads it (swe_rl.grading.grader).
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from swe_rl.tasks.task import Task
from swe_rl.tasks.validation import assess, rules_digest, validation_of

RECORD_VERSION = 2  # 2: gold_test_s (records made before it are made again, once)
CACHE_ENV = "SWE_RL_VALIDATION_CACHE"  # where records are kept (default ~/.cache/swe-rl/validation)
_GRADED_FIELDS = ("instance_id", "patch", "test_patch", "FAIL_TO_PASS", "PASS_TO_PASS", "eval_script",
                  "log_parser", "eval_type", "base_commit", "image")  # fmt: skip


def cache_dir() -> Path:
    return Path(os.environ.get(CACHE_ENV) or Path.home() / ".cache" / "swe-rl" / "validation")


def image_id(image: str) -> str | None:
    """The local image's id (None: not present, or no Docker)."""
    try:
        proc = subprocess.run(["docker", "image", "inspect", "-f", "{{.Id}}", image], capture_output=True,
                              text=True, timeout=60)  # fmt: skip
    except (OSError, subprocess.TimeoutExpired):
        return None
    return (proc.stdout.strip() or None) if proc.returncode == 0 else None


def validation_key(task: Task, image: str) -> str:
    """What a validation was computed on: the image id, the row's graded fields and files, the rules."""
    fields = {k: getattr(task, k) for k in _GRADED_FIELDS}
    meta = {k: task.metadata.get(k) for k in ("files", "setup_script", "grader", "expected_output")}
    blob = json.dumps([image, fields, meta, rules_digest(), RECORD_VERSION], sort_keys=True, default=str)
    return hashlib.sha256(blob.encode()).hexdigest()[:32]


def without_validation(task: Task) -> Task:
    if "validation" not in task.metadata:
        return task
    return task.model_copy(update={"metadata": {k: v for k, v in task.metadata.items() if k != "validation"}})


def with_validation(task: Task, record: dict[str, Any]) -> Task:
    out = task.model_copy(update={"metadata": {**task.metadata, "validation": record}})
    validation_of(out)  # a record that does not fit the row fails here, naming the field
    return out


async def validate_task(task: Task, factory: Any, *, timeout: float = 1800.0) -> dict[str, Any] | None:
    """The validation record of `task` from one gold grading (every PASS_TO_PASS graded); None when the grading
    hit an infrastructure failure (no record: the next use tries again). A record that leaves tests out is
    confirmed by grading the gold once more with them left out: it must resolve."""
    from swe_rl.grading.grader import grade

    raw = without_validation(task)
    result = await grade(raw, raw.patch, factory, timeout=timeout, detect=False)  # tests only: no probe
    if result.reward is None:
        return None
    record = assess(raw, result.tests.get("tests_status") or {}, result.log)
    # how long gold's tests ran here: a patch's run that outlasts the limit by far is the patch's (grader)
    record["gold_test_s"] = float((result.tests.get("cost") or {}).get("test_run", 0.0))
    violations = list((result.tests.get("integrity") or {}).get("violations") or [])
    if violations and record["status"] in (
        "ok",
        "left_out",
    ):  # a grader defect on gold: say so, keep every test
        record.update(status="gold_unresolved", left_out=[], violations=violations)
    if record["status"] == "left_out":
        again = await grade(with_validation(raw, record), raw.patch, factory, timeout=timeout, detect=False)
        if again.reward is None:
            return None
        if not again.resolved:
            why = f"gold unresolved with the tests left out too (reward {again.reward})"
            record.update(status="gold_unresolved", left_out=[], confirm=why)
    return record


def _cached(key: str) -> dict[str, Any] | None:
    path = cache_dir() / f"{key}.json"
    try:
        return json.loads(path.read_text())
    except (OSError, json.JSONDecodeError):
        return None


def _store(key: str, record: dict[str, Any]) -> None:
    """Atomically (concurrent validations of one key write the same record); a cache that cannot be written only
    costs a validation on the next use, said on stderr."""
    d = cache_dir()
    try:
        d.mkdir(parents=True, exist_ok=True)
        tmp = d / f".{key}.{os.getpid()}.tmp"
        tmp.write_text(json.dumps(record, indent=2))
        os.replace(tmp, d / f"{key}.json")
    except OSError as e:
        print(
            f"validation cache {d}: not written ({e}); set {CACHE_ENV} to a writable folder", file=sys.stderr
        )


def validatable(task: Task) -> bool:
    """Tasks with a gold patch graded by swebench's report (R2E-Gym's exact-match rows have no PASS_TO_PASS)."""
    return bool(task.patch.strip()) and task.metadata.get("grader") != "r2e_gym"


def attach_cached(tasks: list[Task]) -> list[Task]:
    """`tasks` with the validation records the cache already holds for their current images (nothing is run)."""
    out = []
    for t in tasks:
        image = image_id(t.image) if validatable(t) and t.image else None
        record = _cached(validation_key(without_validation(t), image)) if image else None
        out.append(with_validation(without_validation(t), record) if record else t)
    return out


async def validate_tasks(
    tasks: list[Task],
    factory: Any,
    *,
    workers: int = 2,
    timeout: float = 1800.0,
    on_done: Callable[[Task], None] | None = None,
) -> list[Task]:
    """`tasks`, each with its validation record in `metadata["validation"]`: from the row when it was made on
    this image, else from the cache, else from a gold grading now (then cached). A task whose image is missing,
    or whose validation hit an infrastructure failure, comes back without a record (graded on every test)."""
    sem = asyncio.Semaphore(max(1, workers))

    async def one(task: Task) -> Task:
        if not validatable(task) or not task.image:
            return task
        image = await asyncio.to_thread(image_id, task.image)
        if image is None:
            return task
        raw = without_validation(task)
        key = validation_key(raw, image)
        have = task.metadata.get("validation")
        if isinstance(have, dict) and have.get("key") == key:
            return task
        record = _cached(key)
        if record is None:
            async with sem:
                record = await validate_task(raw, factory, timeout=timeout)
            if record is None:
                return raw
            record.update(key=key, image_id=image, rules=rules_digest())
            _store(key, record)
        out = with_validation(raw, record)
        if on_done is not None:
            on_done(out)
        return out

    return list(await asyncio.gather(*(one(t) for t in tasks)))


def validate_tasks_sync(tasks: list[Task], factory: Any, **kw: Any) -> list[Task]:
    """Blocking `validate_tasks` for sync callers (not from inside a running event loop)."""
    return asyncio.run(validate_tasks(tasks, factory, **kw))
