"""The owner lease: a container ends by itself when the process that started it is gone, on whatever node that is.

The container's main process reads its own stdin until end of file, for at most the TTL (`read -t TTL`, a bash
builtin: one process, so the container's process tree is still init + one main process). The owner attaches to
that stdin right after the create and keeps the connection open for as long as the container is its. The
container is created with `StdinOnce`, so Docker closes the container's stdin when that one client's connection
ends; whatever ends the owner (close, SIGKILL, OOM, its Ray node lost: a node's workers die with its raylet) closes
the socket in the kernel, the main process reads EOF and exits, the init exits with it, and auto-remove deletes
the container. Nothing has to run on the driver or on a surviving node: the node's own engine does it, within
about a second (measured in tests/sandboxes/test_lease.py and tests/cluster/test_node_cleanup.py; see
docs/cluster.md). The reaper and the TTL stay as the layers under it (an owner killed between create and attach).

Limits: a process that forks without exec after the attach (multiprocessing's fork) inherits the socket, so the
container then lives until the last of them exits; the agent, being root in the container, can kill the main
process (which ends the container, as killing the TTL sleep always did).
"""

from __future__ import annotations

import contextlib
import shlex
from typing import Any

# `$1` is the TTL in seconds; `-d ''` reads to a NUL that never comes, so only EOF or the timeout ends it. The
# reader is renamed (argv and comm) and ignores HUP/INT/TERM, so an agent's `pkill bash`, `killall -f bash` or a
# SIGTERM to the init (forwarded to its child) does not end the sandbox; only a SIGKILL aimed at it does.
_READER = 'trap "" HUP INT TERM; printf sandbox-lease > /proc/self/comm; read -r -d "" -t "$1" _; exit 0'
_MAIN = f'trap "" HUP INT TERM; exec -a sandbox-lease bash --noprofile --norc -c {shlex.quote(_READER)} sandbox-lease "$1"'


def main_command(ttl: float, lease: bool) -> list[str]:
    """The container's main process: with a lease, read stdin until EOF (the owner is gone) or the TTL; without,
    `sleep TTL`."""
    if not lease:
        return ["sleep", str(int(ttl))]
    return ["bash", "--noprofile", "--norc", "-c", _MAIN, "sandbox-lease", str(int(ttl))]


def create_options(lease: bool) -> dict[str, Any]:
    """Extra `create_container` arguments: an open stdin that Docker closes when its one attached client leaves
    (the SDK sets StdinOnce for a non-detached container with stdin_open)."""
    return {"stdin_open": True, "detach": False} if lease else {}


def hold(api: Any, container_id: str) -> Any:
    """Attach to the container's stdin and return the connection; keep a reference to it for the container's
    lifetime (garbage collection would close it). Attach before start, and again after a restart (the new main
    process gets a new stdin)."""
    return api.attach_socket(container_id, params={"stdin": 1, "stream": 1})


def release(conn: Any) -> None:
    """Close the lease connection: the container's main process exits (call it when the container goes anyway)."""
    if conn is None:
        return
    for obj in (conn, getattr(conn, "_sock", None)):
        with contextlib.suppress(Exception):
            if obj is not None:
                obj.close()
