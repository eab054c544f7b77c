"""Load Tasks from HF datasets by name, local .json/.jsonl/.parquet files and SWE-bench 5.x task repos.

Reading is swebench's own (`load_swebench_dataset`, `swebench.task.repo.load_task_repo`); this module only
validates rows into `Task`s, with one error line per bad row naming the file, the row and the field, and routes
rows of other training sets (R2E-Gym, SWE-Gym) through their adapters.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from swe_rl.tasks.task import Task

# What grading needs from a SWE-bench 5.x row (make_test_spec reads all of these).
REQUIRED_FIELDS = ("instance_id", "FAIL_TO_PASS", "PASS_TO_PASS", "image", "eval_script", "log_parser")
EVAL_TYPES = ("pass_and_fail", "fail_only")
MICRO_SUITE = Path(__file__).resolve().parent / "micro_suite"
MICRO_NAMES = ("micro", "micro_suite", "swe-rl/micro")
# Row keys kept in Task.metadata instead of being dropped (task-repo bookkeeping, extra dataset columns).
KEEP_IN_METADATA = ("split", "datasets", "difficulty", "image_assets")


class TaskLoadError(ValueError):
    """Bad task source or rows: the message names the file, each bad row and field, and what was expected."""


def known_log_parsers() -> set[str]:
    from swebench.harness.log_parsers import PARSER_REGISTRY

    from swe_rl.tasks.adapters import R2E_LOG_PARSER

    return {*PARSER_REGISTRY, R2E_LOG_PARSER}  # swebench's parsers + R2E-Gym's (swe_rl/grading/r2e.py)


def _row_problems(row: dict[str, Any], parsers: set[str], require_grading: bool) -> list[str]:
    problems = []
    fields = REQUIRED_FIELDS if require_grading else ("instance_id",)
    # test lists may be empty (PASS_TO_PASS often is) but must be present; strings must be non-empty
    absent = [f for f in fields if (row.get(f) is None if f.endswith("_TO_PASS") else not row.get(f))]
    problems += [f"field {f!r}: missing (required for grading)" for f in absent]
    parser = row.get("log_parser")
    if parser and parser not in parsers:
        problems.append(
            f"field 'log_parser': unknown parser {parser!r} (expected a swebench PARSER_REGISTRY name)"
        )
    eval_type = row.get("eval_type")
    if eval_type and eval_type not in EVAL_TYPES:
        problems.append(f"field 'eval_type': {eval_type!r} is not one of {list(EVAL_TYPES)}")
    return problems


def task_from_row(
    row: dict[str, Any], *, where: str, parsers: set[str] | None = None, require_grading=True
) -> Task:
    """One row -> Task, or TaskLoadError listing every problem of the row prefixed with `where`."""
    if not isinstance(row, dict):
        raise TaskLoadError(f"{where}: expected an object with SWE-bench fields, got {type(row).__name__}")
    problems = _row_problems(row, parsers if parsers is not None else known_log_parsers(), require_grading)
    data = dict(row)
    meta = dict(data.get("metadata") or {})
    for key in KEEP_IN_METADATA:
        if key in data:
            meta[key] = data[key]
    data["metadata"] = meta
    if data.get("eval_type") in (None, ""):
        data.pop("eval_type", None)
    for key in ("version", "created_at"):  # HF parquet gives floats / timestamps for these
        if key in data and data[key] is not None and not isinstance(data[key], str):
            data[key] = str(data[key])
    try:
        task = Task.model_validate({k: v for k, v in data.items() if v is not None})
    except ValidationError as e:
        problems += [f"field {'.'.join(map(str, err['loc']))!r}: {err['msg']}" for err in e.errors()]
        task = None
    if problems:
        raise TaskLoadError("\n".join(f"{where}: {p}" for p in problems))
    assert task is not None
    return task


def tasks_from_rows(
    rows: Iterable[dict[str, Any]],
    source: str,
    *,
    require_grading: bool = True,
    places: list[str] | None = None,
) -> list[Task]:
    """Validate all rows; one TaskLoadError lists every bad row (file, row number, instance id, field).
    `places` names each row's location instead of "SOURCE: row i" (task repos: the task directory)."""
    from swe_rl.tasks.adapters import adapt_row

    parsers = known_log_parsers()
    tasks, errors = [], []
    for i, row in enumerate(rows):
        iid = row.get("instance_id") if isinstance(row, dict) else None
        where = places[i] if places else f"{source}: row {i}" + (f" ({iid})" if iid else "")
        try:
            tasks.append(
                task_from_row(adapt_row(row), where=where, parsers=parsers, require_grading=require_grading)
            )
        except TaskLoadError as e:
            errors.append(str(e))
    if errors:
        raise TaskLoadError(f"{len(errors)} bad row(s):\n" + "\n".join(errors))
    counts = Counter(t.instance_id for t in tasks)
    dupes = [iid for iid, n in counts.items() if n > 1]
    if dupes:
        raise TaskLoadError(f"{source}: duplicate instance_id(s): {', '.join(sorted(set(dupes)))}")
    return tasks


def _read_rows(path: Path) -> list[dict[str, Any]]:
    suffix = path.suffix.lower()
    if suffix == ".jsonl":
        rows = []
        for n, line in enumerate(path.read_text().splitlines()):
            if line.strip():
                try:
                    rows.append(json.loads(line))
                except json.JSONDecodeError as e:
                    raise TaskLoadError(f"{path}: line {n + 1}: not valid JSON ({e.msg})") from e
        return rows
    if suffix == ".json":
        try:
            data = json.loads(path.read_text())
        except json.JSONDecodeError as e:
            raise TaskLoadError(f"{path}: not valid JSON ({e.msg} at line {e.lineno})") from e
        if isinstance(data, dict):
            data = list(data.values()) if all(isinstance(v, dict) for v in data.values()) else [data]
        if not isinstance(data, list):
            raise TaskLoadError(f"{path}: expected a JSON list of rows, got {type(data).__name__}")
        return data
    if suffix == ".parquet":
        return _swebench_rows(str(path), "train")
    raise TaskLoadError(f"{path}: unsupported file type {suffix!r} (expected .json, .jsonl or .parquet)")


def load_task_repo(
    path: str | Path, instance_ids: list[str] | None = None, split: str | None = None
) -> list[Task]:
    """A SWE-bench 5.x task repo (tasks/<id>/{task.yaml, tests.json, ...}) via swebench's reader."""
    from swebench.task import repo as task_repo

    path = Path(path)
    try:
        rows = task_repo.load_task_repo(path, instance_ids)
    except FileNotFoundError as e:
        raise TaskLoadError(f"task repo {path}: {e}") from e
    except KeyError as e:  # swebench's reader: unknown ids are an error, not a silent omission
        raise TaskLoadError(f"task repo {path}: unknown instance id(s): {e.args[0]}") from e
    if split and not instance_ids:
        rows = [r for r in rows if r.get("split") in (split, None)]
    places = []
    for r in rows:
        task_dir = path / task_repo.TASKS_SUBDIR / str(r.get("instance_id"))
        r["metadata"] = {**(r.get("metadata") or {}), "task_dir": str(task_dir)}
        places.append(f"{task_dir}/ (task.yaml, tests.json)")
    return tasks_from_rows(rows, str(path / task_repo.TASKS_SUBDIR), places=places)


def _swebench_rows(name: str, split: str) -> list[dict[str, Any]]:
    """swebench's reader; rows without instance_id (R2E-Gym) trip its id check, so those are read the same way
    it reads them (datasets.load_dataset) without the check."""
    from swebench.harness.utils import load_swebench_dataset

    try:
        return [dict(r) for r in load_swebench_dataset(name, split)]
    except KeyError as e:
        if e.args != ("instance_id",):
            raise
    import datasets

    if name.endswith(".parquet"):
        return [dict(r) for r in datasets.load_dataset("parquet", data_files=name, split="train")]
    return [dict(r) for r in datasets.load_dataset(name, split=split)]


def load_hf(name: str, split: str = "test") -> list[Task]:
    """An HF dataset by name (SWE-bench/SWE-bench_Verified, R2E-Gym/R2E-Gym-Subset, SWE-Gym/SWE-Gym, ...);
    offline, a clear error that says how to point at local files instead."""
    try:
        rows = _swebench_rows(name, split)
    except Exception as e:
        raise TaskLoadError(
            f"could not load the HF dataset {name!r} (split {split!r}): {type(e).__name__}: {str(e)[:300]}\n"
            "If the hub is unreachable (offline machine), point --tasks at local files instead: a .json/.jsonl/"
            ".parquet export of the dataset, a SWE-bench task repo directory, or 'micro' for the bundled suite. "
            'Export on a connected machine with: python -c "import datasets; '
            f"datasets.load_dataset('{name}', split='{split}').to_parquet('{name.split('/')[-1]}.parquet')\""
        ) from e
    return tasks_from_rows(rows, f"{name}[{split}]")


def load_tasks(
    source: str | Path, *, split: str = "test", instance_ids: list[str] | None = None
) -> list[Task]:
    """Any task source: 'micro' (bundled suite), a task repo dir, a .json/.jsonl/.parquet file, or an HF name."""
    src = str(source)
    path = MICRO_SUITE if src in MICRO_NAMES else Path(src)
    if path.is_dir():
        if not (path / "tasks").is_dir():
            raise TaskLoadError(f"{path}: a directory source must be a task repo with a tasks/ subdirectory")
        return load_task_repo(path, instance_ids, split)
    if path.suffix.lower() in (".json", ".jsonl", ".parquet"):
        if not path.is_file():
            raise TaskLoadError(f"{path}: file not found")
        tasks = tasks_from_rows(_read_rows(path), str(path))
    elif "/" in src and not src.startswith((".", "/")):
        tasks = load_hf(src, split)
    else:
        raise TaskLoadError(
            f"task source {src!r}: not found. Expected 'micro', a task repo directory, a .json/.jsonl/.parquet "
            "file, or an HF dataset name such as SWE-bench/SWE-bench_Verified"
        )
    if instance_ids:
        wanted = set(instance_ids)
        missing = wanted - {t.instance_id for t in tasks}
        if missing:
            raise TaskLoadError(f"{src}: instance id(s) not found: {', '.join(sorted(missing))}")
        tasks = [t for t in tasks if t.instance_id in wanted]
    return tasks
