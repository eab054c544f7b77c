"""A multi-node Ray cluster on 127.0.0.1 for the `cluster`-marked tests (issue 59); `make test-cluster` runs them.

Fixtures
- `ray_cluster` (session): a `SimCluster` whose head advertises no `sandbox` resource (1 CPU) and two sandbox
  nodes with `sandbox: 4` and 2 CPUs each, all real raylets of `ray.cluster_utils.Cluster` on 127.0.0.1.
- `ray_cluster_gpu` (session): the same cluster plus one node declaring 2 fake `GPU`s and 4 CPUs (as the CPU
  rehearsal declares GPUs that are never used), added on first use, for the trainer paths.
- `cluster_driver` (function): this test process joined to the cluster as a Ray driver (`ray.init(address=...)`),
  disconnected after the test. Tests that run the CLI need no driver here: pass `cluster.env()` to the subprocess.

`SimCluster` (the `ray_cluster` value)
- `address`: the GCS address "127.0.0.1:<port>", what `--ray-address` / `ray.init(address=...)` take.
- `temp_dir`: this cluster's private RAY_TMPDIR. The head writes its `ray/ray_current_cluster` file there, not into
  /tmp/ray where other processes on this machine (other helpers' local Rays) would read it and try to join.
  Every node and driver stays on 127.0.0.1 (LOOPBACK_ENV: Ray would otherwise rewrite a driver's 127.0.0.1).
  `env()` is os.environ with RAY_TMPDIR set to it and RAY_ADDRESS removed: a CLI started with it sees this cluster
  as "the cluster running on this machine" (a head node's view), exactly as `ray start --head` would leave it.
- `head`, `sandbox_nodes` (list, alive ones), `gpu_node` (None until `ray_cluster_gpu`): `ray._private.node.Node`.
- `node_id(node)`: its hex node id; `alive_node_ids()`: the ids the GCS holds alive.
- `kill_node(node)`: SIGKILL every process of the node (raylet first: `Cluster.remove_node(allow_graceful=False)`),
  a machine lost; returns `time.monotonic()` of the kill. `wait_dead(node, timeout)`: seconds until the GCS marks it
  dead (its actors then fail with RayActorError). Health checks run every second here (5 misses = dead).
- `add_sandbox_node()`, `restore()`: a new sandbox node / back to two alive sandbox nodes (call after a kill test).
- `node_of_pid(pid)`: "head", "sandbox-<i>", "gpu" or None: the node whose raylet started that process (walks the
  parent chain; Ray workers are the raylet's children), e.g. for a container's owner-pid label.
- `leftover_processes()`: pids whose command line names `temp_dir` (checked empty at teardown).
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

CLUSTER_DIR = Path(__file__).parent
SANDBOX_SLOTS = 4
# Every node and driver on 127.0.0.1. Nodes get it as their node_ip_address; a driver's ray.init(address=
# "127.0.0.1:port") would be rewritten to the host's routable address (services.resolve_ip_for_localhost) where no
# node listens, unless Ray's cluster mode for local addresses is off: the variable set in this process and env().
LOOPBACK = {"node_ip_address": "127.0.0.1"}
LOOPBACK_ENV = {"RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER": "0"}
# Node death detected in ~5 s instead of Ray's default ~30 s (3 s period x 5 misses + timeouts): tests stay short.
SYSTEM_CONFIG = {
    "worker_niceness": 0,  # sandboxes/raystart.py: nice-15 actors starve beside busy sandboxes
    "health_check_period_ms": 1000,
    "health_check_failure_threshold": 5,
}


def pytest_collection_modifyitems(config: Any, items: list[Any]) -> None:
    """Every test under tests/cluster/ is `cluster`-marked (make test leaves them to make test-cluster)."""
    for item in items:
        if CLUSTER_DIR in Path(str(item.fspath)).parents:
            item.add_marker(pytest.mark.cluster)


@dataclass
class SimCluster:
    cluster: Any  # ray.cluster_utils.Cluster
    temp_dir: str
    sandbox_nodes: list[Any] = field(default_factory=list)
    gpu_node: Any = None

    @property
    def head(self) -> Any:
        return self.cluster.head_node

    @property
    def address(self) -> str:
        return str(self.cluster.address)

    def env(self, **extra: str) -> dict[str, str]:
        env = {k: v for k, v in os.environ.items() if k != "RAY_ADDRESS"}
        return {**env, "RAY_TMPDIR": self.temp_dir, **LOOPBACK_ENV, **extra}

    def node_id(self, node: Any) -> str:
        return str(node.node_id)

    def alive_node_ids(self) -> set[str]:
        return {n["NodeID"] for n in self.cluster.global_state.node_table() if n["Alive"]}

    def add_sandbox_node(self) -> Any:
        node = self.cluster.add_node(num_cpus=2, resources={"sandbox": SANDBOX_SLOTS}, **LOOPBACK)
        self.sandbox_nodes.append(node)
        return node

    def named_sandbox_nodes(self) -> list[tuple[str, Any]]:
        return [(f"sandbox-{i}", n) for i, n in enumerate(self.sandbox_nodes)]

    def add_gpu_node(self, num_gpus: int = 2) -> Any:
        if self.gpu_node is None:
            self.gpu_node = self.cluster.add_node(num_cpus=4, num_gpus=num_gpus, **LOOPBACK)
        return self.gpu_node

    def kill_node(self, node: Any) -> float:
        """SIGKILL the node's raylet and every other process of it (a lost machine); returns the kill time."""
        t = time.monotonic()
        self.cluster.remove_node(node, allow_graceful=False)
        if node in self.sandbox_nodes:
            self.sandbox_nodes.remove(node)
        if node is self.gpu_node:
            self.gpu_node = None
        return t

    def wait_dead(self, node: Any, timeout: float = 60.0) -> float:
        """Seconds until the GCS no longer holds `node` alive (its actors' calls then fail)."""
        t0, nid = time.monotonic(), self.node_id(node)
        while nid in self.alive_node_ids():
            if time.monotonic() - t0 > timeout:
                raise TimeoutError(f"node {nid[:8]} still alive after {timeout:.0f} s")
            time.sleep(0.2)
        return time.monotonic() - t0

    def restore(self) -> None:
        while len(self.sandbox_nodes) < 2:
            self.add_sandbox_node()

    def node_names(self) -> dict[int, str]:
        """raylet pid -> node name."""
        names = {_raylet_pid(self.head): "head"}
        names.update({_raylet_pid(n): f"sandbox-{i}" for i, n in enumerate(self.sandbox_nodes)})
        if self.gpu_node is not None:
            names[_raylet_pid(self.gpu_node)] = "gpu"
        return names

    def node_of_pid(self, pid: int) -> str | None:
        names = self.node_names()
        while pid > 1:
            if pid in names:
                return names[pid]
            try:
                stat = Path(f"/proc/{pid}/stat").read_text()
            except OSError:
                return None
            pid = int(stat.rsplit(")", 1)[1].split()[1])  # ppid: the field after the state
        return None

    def leftover_processes(self) -> list[int]:
        pids = []
        for p in Path("/proc").iterdir():
            if p.name.isdigit() and int(p.name) != os.getpid():
                with contextlib.suppress(OSError):
                    if self.temp_dir.encode() in (p / "cmdline").read_bytes():
                        pids.append(int(p.name))
        return pids


def _raylet_pid(node: Any) -> int:
    from ray._private import ray_constants

    return int(node.all_processes[ray_constants.PROCESS_TYPE_RAYLET][0].process.pid)


@pytest.fixture(scope="session")
def ray_cluster():
    import ray
    from ray.cluster_utils import Cluster

    if ray.is_initialized():  # a local Ray of an earlier test in this session: drivers join one Ray at a time
        ray.shutdown()
    # A short private dir: Ray's socket paths under it must stay below the 107-byte limit of unix sockets.
    temp_dir = tempfile.mkdtemp(prefix="swerl-rc-", dir="/tmp")
    saved = {k: os.environ.get(k) for k in ("RAY_TMPDIR", *LOOPBACK_ENV)}
    os.environ["RAY_TMPDIR"] = temp_dir  # where Cluster writes ray_current_cluster and its session folders
    os.environ.update(LOOPBACK_ENV)  # for Ray's processes started from here, and the CLIs of env()
    from ray._private import ray_constants

    # ... and this process, where Ray read the variable at import: the value it would have read
    saved_mode, ray_constants.ENABLE_RAY_CLUSTER = ray_constants.ENABLE_RAY_CLUSTER, False
    cluster = Cluster(
        initialize_head=True,
        head_node_args={
            **LOOPBACK,
            "num_cpus": 1,
            "include_dashboard": False,
            "_system_config": SYSTEM_CONFIG,
        },
    )
    sim = SimCluster(cluster, temp_dir)
    try:
        sim.restore()
        cluster.wait_for_nodes()
        yield sim
    finally:
        if ray.is_initialized():
            ray.shutdown()
        cluster.shutdown()  # also removes temp_dir/ray/ray_current_cluster (RAY_TMPDIR still points there)
        left = sim.leftover_processes()
        for pid in left:  # ours by their command line naming our private dir
            with contextlib.suppress(OSError):
                os.kill(pid, signal.SIGKILL)
        ray_constants.ENABLE_RAY_CLUSTER = saved_mode
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
        shutil.rmtree(temp_dir, ignore_errors=True)
        assert not left, f"Ray processes of the test cluster outlived its shutdown (killed): {left}"


@pytest.fixture(scope="session")
def ray_cluster_gpu(ray_cluster):
    ray_cluster.add_gpu_node()
    ray_cluster.cluster.wait_for_nodes()
    return ray_cluster


@pytest.fixture
def cluster_driver(ray_cluster):
    import ray

    if ray.is_initialized():
        ray.shutdown()
    ray.init(address=ray_cluster.address, log_to_driver=False, configure_logging=False)
    try:
        yield ray_cluster
    finally:
        ray.shutdown()
