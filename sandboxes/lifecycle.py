"""Leak-proofing: ownership labels, the per-process janitor (close on SIGINT/SIGTERM/exit), and the reaper.

Three layers, so a container outlives its owner only until the first of them fires:
1. the janitor removes every container this process still holds at interpreter exit and on SIGINT/SIGTERM, and
   when the process this one shares its fate with is gone (a Ray worker's raylet: `watch_fate`);
2. each container's main process reads its owner's lease stream under an init (sandboxes/lease.py): it exits when
   the owner is gone (any death, on any node) or after TTL, and the container is auto-removed when it exits;
3. `reap()` (CLI `sandboxes reap`) removes containers whose owner process is gone or whose expiry passed;
   `reap_at_start()`, which every run and pool calls when it starts, removes this host's dead owners' containers.
"""

from __future__ import annotations

import atexit
import contextlib
import os
import signal
import socket
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

LABEL_MANAGED = "sandboxes.managed"  # "1" on every container we create
LABEL_RUN = "sandboxes.run_id"  # run id the sandbox belongs to
LABEL_PID = "sandboxes.owner_pid"  # pid of the creating process
LABEL_START = "sandboxes.owner_start"  # that process's start time (clock ticks since boot): guards pid reuse
LABEL_HOST = "sandboxes.owner_host"  # hostname of the creating process: pids only mean something there
LABEL_EXPIRES = "sandboxes.expires_at"  # unix time after which the container may be removed by anyone


def process_start_ticks(pid: int) -> str:
    """Field 22 of /proc/<pid>/stat (start time), or "" where /proc is unavailable."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            stat = f.read().decode(errors="replace")
        return stat.rsplit(")", 1)[1].split()[19]
    except (OSError, IndexError):
        return ""


def owner_labels(run_id: str, ttl: float) -> dict[str, str]:
    pid = os.getpid()
    return {
        LABEL_MANAGED: "1",
        LABEL_RUN: run_id,
        LABEL_PID: str(pid),
        LABEL_START: process_start_ticks(pid),
        LABEL_HOST: socket.gethostname(),
        LABEL_EXPIRES: str(int(time.time() + ttl)),
    }


def owner_alive(labels: dict[str, str]) -> bool | None:
    """True/False when the owner can be checked from here; None when it lives on another host."""
    if labels.get(LABEL_HOST) != socket.gethostname():
        return None
    try:
        pid = int(labels.get(LABEL_PID, ""))
    except ValueError:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        pass  # exists, owned by someone else
    start = labels.get(LABEL_START, "")
    return not start or process_start_ticks(pid) in ("", start)


@dataclass(frozen=True)
class ManagedContainer:
    id: str  # full container id
    name: str  # container name
    status: str  # Docker status (running, exited, created ...)
    labels: dict[str, str]  # all labels

    @property
    def expires_at(self) -> float:
        try:
            return float(self.labels.get(LABEL_EXPIRES, "inf"))
        except ValueError:
            return float("inf")


def list_managed(
    client: Any, *, owner_pid: int | None = None, run_id: str | None = None
) -> list[ManagedContainer]:
    """Containers carrying our labels (all states); optionally only one run's, or `owner_pid`'s on this host."""
    filters: dict[str, Any] = {"label": [f"{LABEL_MANAGED}=1"]}
    if run_id is not None:
        filters["label"].append(f"{LABEL_RUN}={run_id}")
    if owner_pid is not None:
        filters["label"] += [f"{LABEL_PID}={owner_pid}", f"{LABEL_HOST}={socket.gethostname()}"]
    rows = client.api.containers(all=True, filters=filters)
    return [
        ManagedContainer(
            r["Id"], (r.get("Names") or ["?"])[0].lstrip("/"), r.get("State", "?"), r.get("Labels") or {}
        )
        for r in rows
    ]


def reap(
    client: Any, *, run_id: str | None = None, now: float | None = None, dry_run: bool = False
) -> list[tuple[ManagedContainer, str]]:
    """Remove managed containers (of one run, or all) whose owner is gone or whose expiry passed.

    Returns (container, reason) pairs. `now` (unix time) lets a caller reap what will have expired by then.
    """
    now = time.time() if now is None else now
    doomed = []
    for c in list_managed(client, run_id=run_id):
        if c.expires_at <= now:
            doomed.append((c, "expired"))
        elif owner_alive(c.labels) is False:
            doomed.append((c, "owner gone"))
        elif c.status in ("exited", "dead"):
            doomed.append((c, f"container {c.status}"))
    if not dry_run:
        remove_all(client, [c.id for c, _ in doomed])
    return doomed


def reap_at_start(who: str, docker_host: str | None = None) -> int:
    """Remove this host's sandbox containers whose owner process is gone (a SIGKILLed run leaves them until their
    TTL); print how many to stderr when any. The one start-up reap: `swe-rl eval|grade|train`, the demo and
    WarmPool call it. Live owners' containers and other hosts' are never touched; no engine, nothing to do."""
    import sys

    try:
        import docker

        client = docker.DockerClient(base_url=docker_host) if docker_host else docker.from_env()
        doomed = [c for c in list_managed(client) if owner_alive(c.labels) is False]
        remove_all(client, [c.id for c in doomed])
        client.close()
    except Exception:  # no engine reachable: the run itself will say so when it needs one
        return 0
    if doomed:
        names = ", ".join(c.name for c in doomed[:5]) + (" ..." if len(doomed) > 5 else "")
        print(f"{who}: removed {len(doomed)} sandbox container(s) of processes that are gone ({names})",
              file=sys.stderr, flush=True)  # fmt: skip
    return len(doomed)


def remove_all(client: Any, ids: list[str]) -> None:
    """Force-remove containers in parallel; missing ones are fine (auto-remove may have won the race)."""

    def rm(cid: str) -> None:
        with contextlib.suppress(Exception):
            client.api.remove_container(cid, force=True)

    if ids:
        with ThreadPoolExecutor(max_workers=min(8, len(ids))) as pool:
            list(pool.map(rm, ids))


class Janitor:
    """Removes the containers this process still holds at exit or on SIGINT/SIGTERM (then re-raises the signal)."""

    def __init__(self) -> None:
        self._pid = (
            os.getpid()
        )  # a forked child inherits this object but must not remove the parent's containers
        self._lock = threading.RLock()  # reentrant: a signal handler may interrupt a holder of the lock
        self._held: dict[str, str | None] = {}  # container name/id -> engine URL (None = from environment)
        self._atexit = False  # exit hook registered
        self._signals = False  # SIGINT/SIGTERM handlers installed
        self._previous: dict[int, Any] = {}

    def hold(self, name: str, docker_host: str | None) -> None:
        with self._lock:
            self._held[name] = docker_host
        self.install()

    def install(self) -> None:
        """Register the exit hook once, and the signal handlers once from the main thread (sandboxes call this at
        construction, which for SyncSandbox users happens in the main thread even though start() does not)."""
        with self._lock:
            if not self._atexit:
                self._atexit = True
                atexit.register(self.cleanup)
                watch_fate(self)
            if self._signals or threading.current_thread() is not threading.main_thread():
                return  # signal handlers can only be set from the main thread; atexit and reap still cover us
            self._signals = True
            for sig in (signal.SIGINT, signal.SIGTERM):
                with contextlib.suppress(ValueError, OSError):
                    self._previous[sig] = signal.signal(sig, self._on_signal)

    def release(self, name: str) -> None:
        with self._lock:
            self._held.pop(name, None)

    def held(self) -> list[str]:
        with self._lock:
            return list(self._held)

    def cleanup(self) -> None:
        if os.getpid() != self._pid:
            return
        with self._lock:
            held, self._held = dict(self._held), {}
        by_host: dict[str | None, list[str]] = {}
        for name, host in held.items():
            by_host.setdefault(host, []).append(name)
        for host, names in by_host.items():
            with contextlib.suppress(Exception):
                import docker

                client = docker.DockerClient(base_url=host) if host else docker.from_env()
                remove_all(client, names)
                client.close()

    def _on_signal(self, signum: int, frame: Any) -> None:
        self.cleanup()
        previous = self._previous.get(signum)
        if callable(previous):
            previous(signum, frame)
        elif previous == signal.SIG_IGN:
            return
        else:  # default action: restore it and re-deliver, so the exit status says "killed by signal"
            signal.signal(signum, signal.SIG_DFL)
            os.kill(os.getpid(), signum)


FATE_POLL_S = 1.0  # seconds between checks that the process this one shares its fate with is alive
FATE_EXIT_GRACE_S = 5.0  # seconds a SIGTERM gets to end this process once its fate process is gone


def fate_pid() -> int | None:
    """The process whose death should end this process's sandboxes: SANDBOXES_FATE_PID, else RAY_RAYLET_PID (Ray sets
    it in every worker: a Ray node's workers outlive a SIGKILLed raylet, orphaned, holding their containers)."""
    for var in ("SANDBOXES_FATE_PID", "RAY_RAYLET_PID"):
        with contextlib.suppress(ValueError):
            pid = int(os.environ.get(var, ""))
            if pid > 1 and pid != os.getpid():
                return pid
    return None


def _running(pid: int, start: str) -> bool:
    """`pid` is still the process that had start time `start` and has not exited (a zombie whose parent has not
    reaped it yet counts as gone)."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            fields = f.read().decode(errors="replace").rsplit(")", 1)[1].split()
        return fields[0] not in ("Z", "X") and (not start or fields[19] == start)
    except (OSError, IndexError):
        try:
            os.kill(pid, 0)  # no /proc: existence only
            return True
        except ProcessLookupError:
            return False
        except PermissionError:
            return True


def watch_fate(janitor: Janitor, poll: float = FATE_POLL_S) -> threading.Thread | None:
    """A daemon thread: when the fate process is gone (or its pid reused), the janitor removes this process's
    containers and the process gets SIGTERM, then exits after FATE_EXIT_GRACE_S if it has not (Ray's own agents
    exit with their raylet the same way; its workers do not, and would hold their containers until the TTL)."""
    pid = fate_pid()
    if pid is None:
        return None
    start = process_start_ticks(pid)

    def watch() -> None:
        while _running(pid, start):
            time.sleep(poll)
        janitor.cleanup()
        os.kill(os.getpid(), signal.SIGTERM)
        time.sleep(
            FATE_EXIT_GRACE_S
        )  # a handler (Ray's worker has one) may keep it from exiting: it is orphaned
        os._exit(128 + signal.SIGTERM)

    thread = threading.Thread(target=watch, name="sandboxes-fate", daemon=True)
    thread.start()
    return thread


_JANITORS: dict[
    int, Janitor
] = {}  # pid -> janitor; the one deliberate global: signal handlers are per process


def default_janitor() -> Janitor:
    """This process's janitor, created on first use (a forked child gets its own, never its parent's)."""
    pid = os.getpid()
    if pid not in _JANITORS:
        _JANITORS[pid] = Janitor()
    return _JANITORS[pid]
