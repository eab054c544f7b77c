"""Progress of long phases (RL steps, rollouts, held-out evaluation, SFT): rich bars on a terminal, plain lines in
logs.

`RunProgress` shows one bar per phase (done/total, the phase's own fields such as reward, elapsed, ETA) while both
stdout and its console (stderr) are terminals. Otherwise (CI logs, `make demo > log`) it prints one plain line per
phase: its first update, then at most one every `every_s` seconds, every logged update, and its end, so a long run
is never silent and a phase whose episodes are still being graded after the last one finished does not print a
line per graded episode. `EpisodeProgress` is the bar of streamed episodes (the rollout pools), built on it.
"""

from __future__ import annotations

import sys
import threading
import time
from collections.abc import Callable
from contextlib import AbstractContextManager
from dataclasses import dataclass
from typing import Any

from swe_rl.agent.trajectory import Trajectory


def default_console() -> Any:
    """A rich Console on stderr that counts as a terminal only when stdout is one too: a live display moves what
    the program prints to stdout onto its own stream, which would take it out of a redirected stdout."""
    from rich.console import Console

    return Console(stderr=True, force_terminal=None if sys.stdout.isatty() else False)


def clock(seconds: float) -> str:
    """0:07:03-style duration (h:mm:ss)."""
    s = int(seconds)
    return f"{s // 3600}:{s // 60 % 60:02d}:{s % 60:02d}"


@dataclass
class _Phase:
    name: str
    total: int
    done: int
    every_s: float
    fields: dict[str, str]
    clock: Callable[[], float]
    t0: float
    last_line: float | None = None  # monotonic time of the last plain line
    last_state: tuple[int, str] | None = None  # (done, fields) the last line showed
    task: Any = None  # rich TaskID in live mode

    def info(self) -> str:
        return " · ".join(f"{k.replace('_', ' ')} {v}" for k, v in self.fields.items())

    def line(self) -> str:
        elapsed = self.clock() - self.t0
        eta = ""
        if 0 < self.done < self.total:
            eta = f" · eta {clock(elapsed * (self.total - self.done) / self.done)}"
        info = f" · {self.info()}" if self.fields else ""
        return f"{self.name} {self.done}/{self.total}{info} · elapsed {clock(elapsed)}{eta}"


class RunProgress(AbstractContextManager["RunProgress"]):
    """`with RunProgress() as p: i = p.add("RL steps", 24); p.update(i, advance=1, reward="0.41"); p.finish(i)`.

    console: where bars and lines go (default: `default_console()`); bars when it is a terminal, else lines.
    clock: seconds for elapsed, ETA and the line interval (tests pass their own). Thread-safe; the rich bars
    refresh from their own thread.
    """

    def __init__(
        self, console: Any = None, *, every_s: float = 30.0, clock: Callable[[], float] = time.monotonic
    ):
        self.console = console if console is not None else default_console()
        self.live = bool(self.console.is_terminal)
        self.every_s = every_s
        self.clock = clock
        self._phases: dict[int, _Phase] = {}
        self._next = 0
        self._lock = threading.Lock()
        self._progress: Any = None

    def __enter__(self) -> RunProgress:
        if self.live:
            from rich.errors import LiveError
            from rich.progress import (
                BarColumn,
                MofNCompleteColumn,
                Progress,
                TextColumn,
                TimeElapsedColumn,
                TimeRemainingColumn,
            )

            self._progress = Progress(
                TextColumn("[bold]{task.description}"), BarColumn(), MofNCompleteColumn(),
                TextColumn("{task.fields[info]}"), TimeElapsedColumn(), TimeRemainingColumn(),
                console=self.console, transient=True,
            )  # fmt: skip
            try:
                self._progress.start()
            except LiveError:  # another live display is active in this process: plain lines instead
                self._progress, self.live = None, False
        return self

    def __exit__(self, *exc: object) -> None:
        for pid in list(self._phases):  # phases still open (an interrupted run): say where they stopped
            self._end(pid)
        if self._progress is not None:
            self._progress.stop()
            self._progress = None

    def add(self, name: str, total: int, completed: int = 0, *, every_s: float | None = None,
            **fields: str) -> int:  # fmt: skip
        """A new phase; `every_s` overrides the plain-line interval (0 = a line at every update)."""
        with self._lock:
            pid, self._next = self._next, self._next + 1
            every = self.every_s if every_s is None else every_s
            ph = _Phase(name, total, completed, every, dict(fields), self.clock, self.clock())
            self._phases[pid] = ph
            if self._progress is not None:
                ph.task = self._progress.add_task(name, total=total, completed=completed, info=ph.info())
        return pid

    def update(self, pid: int, *, advance: int = 0, completed: int | None = None, log: bool = False,
               **fields: str) -> None:  # fmt: skip
        """Advance a phase and set its fields; `log` also prints its line (live: above the bars)."""
        with self._lock:
            ph = self._phases.get(pid)
            if ph is None:
                return
            ph.done = completed if completed is not None else ph.done + advance
            ph.fields.update(fields)
            if self._progress is not None:
                self._progress.update(ph.task, completed=ph.done, info=ph.info())
            now = self.clock()
            # Not "done >= total": a rollout phase's episodes all end before the last ones are graded, and each
            # grade updates the phase; its end prints the final line (finish / _end).
            due = ph.last_line is None or now - ph.last_line >= ph.every_s
            if log or (self._progress is None and due):
                self._print(ph)
                ph.last_line = now

    def finish(self, pid: int, **fields: str) -> None:
        """End a phase: its final line is printed and its bar removed."""
        with self._lock:
            ph = self._phases.get(pid)
            if ph is not None:
                ph.fields.update(fields)
        self._end(pid)

    def _end(self, pid: int) -> None:
        with self._lock:
            ph = self._phases.pop(pid, None)
            if ph is None:
                return
            if self._progress is not None:
                self._progress.remove_task(ph.task)
            if ph.last_state != (ph.done, ph.info()):  # not the line just printed again
                self._print(ph)

    def _print(self, ph: _Phase) -> None:
        ph.last_state = (ph.done, ph.info())
        self.console.print(ph.line(), markup=False, highlight=False, soft_wrap=True)


class EpisodeProgress(AbstractContextManager["EpisodeProgress"]):
    """`with EpisodeProgress(total, enabled) as p: p.advance(traj)`; a no-op when disabled or total is 0."""

    def __init__(self, total: int, enabled: bool = True, description: str = "rollouts", console: Any = None):
        self.total = total
        self.enabled = enabled and total > 0
        self.description = description
        self.console = console
        self.resolved = 0
        self.errors = 0
        self._bars: RunProgress | None = None
        self._pid = 0

    def __enter__(self) -> EpisodeProgress:
        if self.enabled:
            self._bars = RunProgress(self.console).__enter__()
            self._pid = self._bars.add(self.description, self.total, resolved="0", errors="0")
        return self

    def advance(self, traj: Trajectory) -> None:
        self.resolved += int(bool(traj.resolved))
        self.errors += int(traj.exit_status == "error" or (traj.reward is None and traj.error is not None))
        if self._bars is not None:
            self._bars.update(self._pid, advance=1, resolved=str(self.resolved), errors=str(self.errors))

    def __exit__(self, *exc: object) -> None:
        if self._bars is not None:
            self._bars.__exit__(None, None, None)
            self._bars = None
