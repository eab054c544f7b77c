"""The one way into Ray for every command (`connect_ray`), and a local Ray start that survives a loaded host.

`connect_ray(address)` decides, the same for eval, train, train-openrlhf and its preflight, the rollout pool and a
RaySandbox (docs/cluster.md "Which Ray a command uses"):
1. Ray already initialized in this process: used as it is (the command's first start decided).
2. An address (`--ray-address`, `pool.ray_address`, `cluster.ray_address`: "auto", "host:port", "ray://..."), else
   RAY_ADDRESS (what `ray job submit` gives its entrypoint): that cluster is joined, and one line says so. Nothing
   is declared on a join (Ray refuses resources or CPU counts for an existing cluster).
3. Neither: a private local Ray, on purpose (`address="local"`). A cluster running on this machine (`ray start`
   on a head node) or a stale `ray_current_cluster` file of a killed one is never joined by accident; a live one
   is named in one line with the flag that joins it.

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

import os
import socket
import sys
from collections.abc import Callable
from typing import Any

RAYLET_TIMEOUT = "The current node timed out during startup"  # Ray's message; tests pin it in Ray's source


def init_local_ray(attempts: int = 3, **kwargs: Any) -> None:
    """`ray.init(**kwargs)` for a new local node, tried up to `attempts` times when its raylet start times out."""
    import ray

    kwargs["_system_config"] = {"worker_niceness": 0, **(kwargs.get("_system_config") or {})}
    kwargs.setdefault("address", "local")  # a new instance, never the cluster ray_current_cluster names
    for attempt in range(1, attempts + 1):
        try:
            ray.init(**kwargs)
            return
        except Exception as e:
            if RAYLET_TIMEOUT not in str(e) or attempt == attempts:
                raise
            ray.shutdown()  # stops the half-started node's processes before the next try


def _stderr(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


def running_cluster() -> str | None:
    """The address in this machine's `ray_current_cluster` file when a GCS answers there (a live `ray start`)."""
    try:
        from ray._common.utils import get_ray_address_file

        with open(get_ray_address_file(None)) as f:
            addr = f.read().strip()
        host, port = addr.rsplit(":", 1)
        with socket.create_connection((host, int(port)), timeout=0.5):
            return addr
    except (OSError, ValueError, ImportError):
        return None  # no file, a stale one (the cluster was killed), or an unreadable one


def connect_ray(
    address: str | None,
    *,
    purpose: str,
    local: dict[str, Any] | None = None,
    say: Callable[[str], None] = _stderr,
    **init_kwargs: Any,
) -> bool:
    """Join `address` (or RAY_ADDRESS), or start a private local Ray with the `local` settings (num_cpus,
    num_gpus, resources); init_kwargs (runtime_env, log_to_driver, ...) go to either. True if this call started
    or joined Ray (the caller then shuts it down), False if Ray was already initialized here."""
    import ray

    if ray.is_initialized():
        return False
    # Opt in to Ray's future behaviour (leave CUDA_VISIBLE_DEVICES alone for 0-GPU actors); silences its warning.
    os.environ.setdefault("RAY_ACCEL_ENV_VAR_OVERRIDE_ON_ZERO", "0")
    join = address or os.environ.get("RAY_ADDRESS") or None
    if join and join != "local":
        ray.init(address=join, **init_kwargs)
        nodes = sum(1 for n in ray.nodes() if n.get("Alive"))
        say(f"{purpose}: joined the Ray cluster at {join} ({nodes} nodes)")
        return True
    live = running_cluster()
    if live:
        say(f"{purpose}: a Ray cluster runs on this machine ({live}); this command starts a private local Ray "
            f"(--ray-address auto, or {live}, joins the cluster instead)")  # fmt: skip
    init_local_ray(address="local", include_dashboard=False, **(local or {}), **init_kwargs)
    return True
