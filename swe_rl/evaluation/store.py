"""The evaluation run directory, written so that an interrupted run can be resumed and trusted.

    runs/<name>/config.yaml                          resolved config (the run's identity)
    runs/<name>/trajectories/run_00/<id>.json        one episode, written atomically: its existence = done
    runs/<name>/trajectories/run_00.jsonl            all episodes of a run (derived, rewritten atomically)
    runs/<name>/predictions/run_00.jsonl             SWE-bench predictions: instance_id, model_name_or_path, model_patch
    runs/<name>/grading/run_00/<id>.json             per-instance grading: resolved, reward, failure, tests
    runs/<name>/report/{report.json, report.md, *.png}

Every trusted file is written to a temporary name in the same folder, fsynced and renamed, so a Ctrl-C or crash
leaves either the old file, the new one, or a `*.tmp` that readers ignore — never half a file that looks done.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from swe_rl.agent.trajectory import Trajectory
from swe_rl.runs import RunDir

_SAFE = re.compile(r"[^A-Za-z0-9._-]")


def atomic_write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    with open(tmp, "w") as f:
        f.write(text)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)
    return path


def file_key(instance_id: str) -> str:
    """A file name for an instance id (ids like `django__django-11099` are already safe; others get escaped)."""
    return _SAFE.sub("_", instance_id)


class EvalRun:
    def __init__(self, root: str | Path):
        self.dir = RunDir.create(Path(root).parent, Path(root).name)
        self.root = self.dir.root
        for stale in self.root.rglob(".*.tmp"):  # left by an interrupted write; never read, so just tidy up
            stale.unlink(missing_ok=True)

    def traj_path(self, run: int, instance_id: str) -> Path:
        return self.dir.trajectories / f"run_{run:02d}" / f"{file_key(instance_id)}.json"

    def grading_path(self, run: int, instance_id: str) -> Path:
        return self.root / "grading" / f"run_{run:02d}" / f"{file_key(instance_id)}.json"

    def predictions_path(self, run: int) -> Path:
        return self.root / "predictions" / f"run_{run:02d}.jsonl"

    def has_trajectory(self, run: int, instance_id: str) -> bool:
        return self.load_trajectory(run, instance_id) is not None

    def load_trajectory(self, run: int, instance_id: str) -> Trajectory | None:
        path = self.traj_path(run, instance_id)
        if not path.is_file():
            return None
        try:
            return Trajectory.from_json(path.read_text())
        except (ValueError, TypeError):
            return None  # unreadable (should not happen with atomic writes): treat as missing, it is re-run

    def save_trajectory(self, traj: Trajectory) -> Path:
        return atomic_write(self.traj_path(traj.sample_idx, traj.task_id), traj.to_json())

    def save_grading(self, run: int, instance_id: str, record: dict[str, Any]) -> Path:
        return atomic_write(self.grading_path(run, instance_id), json.dumps(record, sort_keys=True))

    def load_grading(self, run: int, instance_id: str) -> dict[str, Any] | None:
        path = self.grading_path(run, instance_id)
        if not path.is_file():
            return None
        try:
            return json.loads(path.read_text())
        except ValueError:
            return None

    @property
    def pool_losses_path(self) -> Path:
        return self.root / "pool_losses.jsonl"

    def add_pool_losses(self, lost: dict[str, int], episodes: int) -> None:
        """One line per pool session that lost actors (issue 59): a resumed run keeps the earlier sessions' lines."""
        with self.pool_losses_path.open("a") as f:
            f.write(json.dumps({"episodes": episodes, **lost}, sort_keys=True) + "\n")

    def pool_losses(self) -> dict[str, int]:
        """The pool sessions' losses summed: actors died / unplaceable, episodes re-run ({} when none)."""
        total: dict[str, int] = {}
        if not self.pool_losses_path.is_file():
            return total
        for line in self.pool_losses_path.read_text().splitlines():
            try:
                row = json.loads(line)
            except ValueError:
                continue  # a line cut short by a crash mid-write
            for k, v in row.items():
                if k != "episodes" and isinstance(v, int):
                    total[k] = total.get(k, 0) + v
            total["sessions"] = total.get("sessions", 0) + 1
        return total

    def write_jsonl(self, path: Path, rows: Iterable[dict[str, Any] | str]) -> Path:
        lines = [r if isinstance(r, str) else json.dumps(r) for r in rows]
        return atomic_write(path, "".join(line + "\n" for line in lines))

    def write_run_files(self, run: int, trajs: list[Trajectory], model_name: str) -> None:
        """The derived per-run files: trajectories JSONL and SWE-bench predictions JSONL (sorted by id)."""
        trajs = sorted(trajs, key=lambda t: t.task_id)
        self.write_jsonl(self.dir.trajectories / f"run_{run:02d}.jsonl", [t.to_json() for t in trajs])
        self.write_jsonl(
            self.predictions_path(run),
            [
                {"instance_id": t.task_id, "model_name_or_path": model_name, "model_patch": t.patch}
                for t in trajs
            ],
        )
