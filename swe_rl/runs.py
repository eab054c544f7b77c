"""Run directory convention: runs/<name>/{config.yaml, metrics.jsonl, trajectories/, checkpoints/, report/}, and
with held-out evaluation eval_tasks/ (per-task rewards) and eval_episodes/ (every episode) per evaluation."""

from __future__ import annotations

import json
import math
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pydantic import BaseModel

from swe_rl.config import save_config


@dataclass(frozen=True)
class RunDir:
    root: Path

    @classmethod
    def create(cls, base: str | Path, name: str) -> RunDir:
        run = cls(Path(base) / name)
        for sub in (run.trajectories, run.checkpoints, run.report):
            sub.mkdir(parents=True, exist_ok=True)
        return run

    @property
    def config(self) -> Path:
        return self.root / "config.yaml"

    @property
    def metrics(self) -> Path:
        return self.root / "metrics.jsonl"

    @property
    def trajectories(self) -> Path:
        return self.root / "trajectories"

    @property
    def eval_tasks(self) -> Path:
        return self.root / "eval_tasks"

    @property
    def eval_episodes(self) -> Path:
        return self.root / "eval_episodes"

    @property
    def checkpoints(self) -> Path:
        return self.root / "checkpoints"

    @property
    def report(self) -> Path:
        return self.root / "report"

    def save_config(self, cfg: BaseModel) -> Path:
        return save_config(cfg, self.config)

    def log_metrics(self, step: int, metrics: dict[str, Any]) -> None:
        """Append one JSON line; non-finite floats become null so the file stays valid JSON."""
        row = {"step": step, "time": time.time()}
        for k, v in metrics.items():
            if isinstance(v, float) and not math.isfinite(v):
                v = None
            row[k] = v
        with self.metrics.open("a") as f:
            f.write(json.dumps(row) + "\n")

    def read_metrics(self) -> list[dict[str, Any]]:
        if not self.metrics.exists():
            return []
        return [json.loads(line) for line in self.metrics.read_text().splitlines() if line.strip()]
