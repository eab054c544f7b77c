"""`make rehearsal-cluster` (issue 59 item 6): the rehearsal on a multi-node Ray cluster on this machine, one
sandbox node killed mid-step.

Nodes (ray.cluster_utils.Cluster, all on 127.0.0.1, a private RAY_TMPDIR as tests/cluster/conftest.py does): a head
with no `sandbox` and no GPU, a node declaring the fake GPUs the recipe places its vLLM engine and DeepSpeed actor
on, and two sandbox nodes (`sandbox: 8`). The agents' sandboxes are RaySandboxes (`agent.sandbox.backend: ray`): the
executor runs in the vLLM actor on the GPU node, each container's actor on a sandbox node. `NodeKiller` SIGKILLs
the sandbox node holding the most sandboxes once a step's episodes run; their samples end as infrastructure
failures (swe_rl_valid 0, a zero advantage) and training goes on.
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
import threading
import time
from typing import Any

LOOPBACK = {"node_ip_address": "127.0.0.1"}
SANDBOX_SLOTS = 8


class RehearsalCluster:
    def __init__(self, gpus: int, cpus: int = 8):
        # before Ray is imported: drivers keep 127.0.0.1 (tests/cluster/conftest.py LOOPBACK_ENV says why)
        os.environ["RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER"] = "0"
        self.temp_dir = tempfile.mkdtemp(prefix="swerl-rh-", dir="/tmp")
        os.environ["RAY_TMPDIR"] = self.temp_dir
        from ray.cluster_utils import Cluster

        self.cluster = Cluster(
            initialize_head=True,
            head_node_args={**LOOPBACK, "num_cpus": 1, "include_dashboard": False,
                            "_system_config": {"worker_niceness": 0}},
        )  # fmt: skip
        self.gpu_node = self.cluster.add_node(num_cpus=cpus, num_gpus=gpus, **LOOPBACK)
        self.sandbox_nodes = [
            self.cluster.add_node(num_cpus=2, resources={"sandbox": SANDBOX_SLOTS}, **LOOPBACK)
            for _ in range(2)
        ]
        self.cluster.wait_for_nodes()
        self.killer: NodeKiller | None = None

    @property
    def address(self) -> str:
        return str(self.cluster.address)

    def sandbox_actors(self) -> list[dict[str, Any]]:
        table = self.cluster.global_state.actor_table(None)
        return [a for a in table.values() if a["ActorClassName"] == "SandboxActor"]

    def shutdown(self) -> None:
        import ray

        if ray.is_initialized():
            ray.shutdown()
        self.cluster.shutdown()
        shutil.rmtree(self.temp_dir, ignore_errors=True)


class NodeKiller(threading.Thread):
    """Kills the busiest sandbox node once `min_alive` sandboxes run; records when and what it held."""

    def __init__(self, rc: RehearsalCluster, min_alive: int = 3):
        super().__init__(daemon=True)
        self.rc, self.min_alive = rc, min_alive
        self.killed_at: float | None = None
        self.held = 0
        self.dead_after: float | None = None
        self._stop = threading.Event()

    def run(self) -> None:
        while not self._stop.is_set():
            alive = [a for a in self.rc.sandbox_actors() if a["State"] == "ALIVE"]
            if len(alive) >= self.min_alive:
                break
            time.sleep(0.5)
        else:
            return
        by_node = {str(n.node_id): n for n in self.rc.sandbox_nodes}
        busiest = max(by_node, key=lambda nid: sum(a["Address"]["NodeID"] == nid for a in alive))
        self.held = sum(a["Address"]["NodeID"] == busiest for a in alive)
        self.killed_at = time.time()
        self.rc.cluster.remove_node(by_node[busiest], allow_graceful=False)
        self.rc.sandbox_nodes.remove(by_node[busiest])
        t0 = time.monotonic()
        while any(n["NodeID"] == busiest and n["Alive"] for n in self.rc.cluster.global_state.node_table()):
            time.sleep(0.2)
        self.dead_after = time.monotonic() - t0
        print(f"rehearsal-cluster: sandbox node {busiest[:8]} killed holding {self.held} sandboxes; seen dead "
              f"after {self.dead_after:.1f} s", flush=True)  # fmt: skip

    def stop(self) -> None:
        self._stop.set()

    def result(self, started: float) -> tuple[str, bool, str]:
        """The check line: a sandbox node holding sandboxes was killed during the run."""
        if self.killed_at is None:
            return ("a sandbox node killed mid-step", False, "no step ran sandboxes on the cluster")
        return ("a sandbox node killed mid-step", self.held > 0,
                f"{self.killed_at - started:.0f} s into the run, holding {self.held} sandboxes, seen dead after "
                f"{self.dead_after or float('nan'):.1f} s")  # fmt: skip


def cluster_overrides(rc: RehearsalCluster) -> list[str]:
    """The agents' sandboxes as RaySandboxes on the sandbox nodes; the launch joins this cluster."""
    sandbox = {"backend": "ray", "ray_address": rc.address, "startup_timeout": 180,
               "inner": {"backend": "docker", "image": "swe-rl/base:bookworm"}}  # fmt: skip
    return [f"cluster.ray_address={rc.address}", f"agent.sandbox={json.dumps(sandbox)}"]
