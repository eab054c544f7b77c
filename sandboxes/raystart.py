"""Start a local Ray that survives a loaded host.

Ray 2.55 waits a hard-coded 30 s for a new node's raylet to register with the GCS (`ray/_private/node.py`, no
setting changes it); on a 2-core host at load ~24 it did not, and `ray.init` raised "The current node timed out
during startup" (issue 27). Such a start is shut down and tried again; any other error is raised at once.
"""

from __future__ import annotations

from typing import Any

RAYLET_TIMEOUT = "The current node timed out during startup"  # Ray's message; tests pin it in Ray's source


def init_local_ray(attempts: int = 3, **kwargs: Any) -> None:
    """`ray.init(**kwargs)` for a new local node, tried up to `attempts` times when its raylet start times out."""
    import ray

    for attempt in range(1, attempts + 1):
        try:
            ray.init(**kwargs)
            return
        except Exception as e:
            if RAYLET_TIMEOUT not in str(e) or attempt == attempts:
                raise
            ray.shutdown()  # stops the half-started node's processes before the next try
