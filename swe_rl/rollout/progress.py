"""A rich progress bar for streamed episodes: done/total, resolved so far, errors, elapsed and ETA."""

from __future__ import annotations

from contextlib import AbstractContextManager
from typing import Any

from swe_rl.agent.trajectory import Trajectory


class EpisodeProgress(AbstractContextManager["EpisodeProgress"]):
    """`with EpisodeProgress(total, enabled) as p: p.advance(traj)`; a no-op when disabled or total is 0."""

    def __init__(self, total: int, enabled: bool = True, description: str = "rollouts"):
        self.total = total
        self.enabled = enabled and total > 0
        self.description = description
        self.resolved = 0
        self.errors = 0
        self._progress: Any = None
        self._task: Any = None

    def __enter__(self) -> EpisodeProgress:
        if self.enabled:
            from rich.console import Console
            from rich.progress import (
                BarColumn,
                MofNCompleteColumn,
                Progress,
                TextColumn,
                TimeElapsedColumn,
                TimeRemainingColumn,
            )

            self._progress = Progress(
                TextColumn("[bold]{task.description}"),
                BarColumn(),
                MofNCompleteColumn(),
                TextColumn("resolved {task.fields[resolved]} · errors {task.fields[errors]}"),
                TimeElapsedColumn(),
                TimeRemainingColumn(),
                console=Console(stderr=True),
                transient=False,
            )
            self._progress.__enter__()
            self._task = self._progress.add_task(self.description, total=self.total, resolved=0, errors=0)
        return self

    def advance(self, traj: Trajectory) -> None:
        self.resolved += int(bool(traj.resolved))
        self.errors += int(traj.exit_status == "error" or (traj.reward is None and traj.error is not None))
        if self._progress is not None:
            self._progress.update(self._task, advance=1, resolved=self.resolved, errors=self.errors)

    def __exit__(self, *exc: object) -> None:
        if self._progress is not None:
            self._progress.__exit__(None, None, None)
            self._progress = None
