"""A host-wide cap on sandboxes *starting* at once, shared by every process on the host (Ray actors, CLIs, tests).

The cap is `slots` lock files in one directory; a start holds an exclusive `flock` on one of them from container
create until its shell is ready. flock locks belong to an open file description, so two starts in one process
exclude each other just as two processes do, and the kernel drops a dead process's locks: a crashed or SIGKILLed
starter never keeps a slot. A start that gets no slot within its budget raises SandboxStartError (never hangs).
"""

from __future__ import annotations

import asyncio
import contextlib
import fcntl
import hashlib
import os
import random
import tempfile
import time
from collections.abc import AsyncIterator

from sandboxes.base import SandboxStartError


def default_gate_dir(engine: str | None) -> str:
    """One directory per Docker engine under the host's temp dir: starts on different engines do not queue."""
    where = engine or os.environ.get("DOCKER_HOST", "unix:///var/run/docker.sock")
    return os.path.join(
        tempfile.gettempdir(), f"sandboxes-start-{hashlib.sha1(where.encode()).hexdigest()[:10]}"
    )


def default_slots() -> int:
    """Starts at once when the config says 0: two per CPU core, at least 4 (the engine serializes much of it)."""
    return max(4, 2 * (os.cpu_count() or 1))


class StartGate:
    """`async with gate.slot(deadline):` waits (polling with jittered backoff) for one of `slots` host-wide locks."""

    def __init__(self, directory: str, slots: int) -> None:
        if slots < 1:
            raise ValueError(f"slots: expected at least 1, got {slots}")
        self.directory = directory
        self.slots = slots
        self.waited_s = 0.0  # seconds the last acquisition waited; exactly 0.0 when a slot was free at once

    def _try_one(self) -> int | None:
        os.makedirs(self.directory, mode=0o1777, exist_ok=True)
        order = list(range(self.slots))
        random.shuffle(order)  # spread contention over the files
        for i in order:
            fd = os.open(os.path.join(self.directory, f"slot-{i}.lock"), os.O_RDWR | os.O_CREAT, 0o666)
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                return fd
            except BlockingIOError:
                os.close(fd)
        return None

    @contextlib.asynccontextmanager
    async def slot(self, deadline: float) -> AsyncIterator[None]:
        """Hold one start slot; `deadline` is a time.monotonic() value after which waiting raises."""
        t0, delay = time.monotonic(), 0.01
        fd = self._try_one()
        queued = fd is None
        while fd is None:
            left = deadline - time.monotonic()
            if left <= 0:
                raise SandboxStartError(
                    f"no start slot free within the start budget ({time.monotonic() - t0:.1f}s waited; "
                    f"{self.slots} sandboxes may start at once on this host, lock dir {self.directory})"
                )
            await asyncio.sleep(min(left, delay * random.uniform(0.5, 1.5)))
            delay = min(delay * 1.5, 0.25)
            fd = self._try_one()
        # 0.0, not the microseconds of one try, when nothing was queued: "did it wait?" has an exact answer
        self.waited_s = time.monotonic() - t0 if queued else 0.0
        try:
            yield
        finally:
            os.close(fd)  # closing the descriptor releases the lock
