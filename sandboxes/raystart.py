"""Start a local Ray that survives a loaded host.

Ray 2.55 waits a hard-coded 30 s for a new node's raylet to register with the GCS (`ray/_private/node.py`, no
setting changes it); on a 2-core host at load ~24 it did not, and `ray.init` raised "The current node timed out
during startup". Such a start is shut down and tried again; any other error is raised at once.

Ray also starts its workers at nice 15 (`worker_niceness`), below every ordinary process. Our actors are the
agent loops that drive the sandboxes; beside CPU-bound neighbours at nice 0 (the sandboxes' own test runs, four
busy loops in `make test-stress`) a nice-15 actor got ~2% of a core and took minutes to import and start an
episode. A local node we start runs its workers at the driver's priority (`worker_niceness: 0`, unless
the caller's `_system_config` says otherwise). On a cluster started with `ray start`, set
`RAY_worker_niceness=0` in that command's environment for the same effect.
"""

from __future__ import annotations

from typing import Any

RAYLET_TIMEOUT = "The current node timed out during startup"  # Ray's message; tests pin it in Ray's source


def init_local_ray(attempts: int = 3, **kwargs: Any) -> None:
    """`ray.init(**kwargs)` for a new local node, tried up to `attempts` times when its raylet start times out."""
    import ray

    kwargs["_system_config"] = {"worker_niceness": 0, **(kwargs.get("_system_config") or {})}
    for attempt in range(1, attempts + 1):
        try:
            ray.init(**kwargs)
            return
        except Exception as e:
            if RAYLET_TIMEOUT not in str(e) or attempt == attempts:
                raise
            ray.shutdown()  # stops the half-started node's processes before the next try
