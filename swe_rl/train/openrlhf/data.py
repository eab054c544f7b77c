"""Tasks ↔ OpenRLHF prompt rows. OpenRLHF's PromptDataset reads `prompt` (input_key) and `label` (label_key);
the label reaches our agent instance's `reset`, so it carries the whole Task as JSON."""

from __future__ import annotations

import json
from collections.abc import Iterable
from pathlib import Path

from swe_rl.tasks.task import Task


def task_to_row(task: Task) -> dict[str, str]:
    return {"prompt": task.instance_id, "label": task.model_dump_json()}


def task_from_label(label: str) -> Task:
    """The Task of one OpenRLHF sample; a clear error when the dataset was not made by `write_prompt_dataset`."""
    try:
        return Task.model_validate_json(label)
    except ValueError as e:
        raise ValueError(
            f"OpenRLHF label: expected the Task JSON written by `swe-rl openrlhf-data` (got {label[:80]!r}…): {e}"
        ) from e


def write_prompt_dataset(tasks: Iterable[Task], path: str | Path) -> int:
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    n = 0
    with path.open("w") as f:
        for task in tasks:
            f.write(json.dumps(task_to_row(task)) + "\n")
            n += 1
    return n
