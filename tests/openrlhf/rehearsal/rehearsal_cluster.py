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
from pathlib import Path
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


def cluster_overrides(rc: RehearsalCluster, work: Path) -> list[str]:
    """The agents' sandboxes as RaySandboxes on the sandbox nodes; the launch joins this cluster; the trainer's
    metrics.jsonl (what each step masked) for `cluster_checks`."""
    sandbox = {"backend": "ray", "ray_address": rc.address, "startup_timeout": 180,
               "inner": {"backend": "docker", "image": "swe-rl/base:bookworm"}}  # fmt: skip
    return [f"cluster.ray_address={rc.address}", f"agent.sandbox={json.dumps(sandbox)}",
            f"logging.metrics_jsonl={work / 'metrics.jsonl'}"]  # fmt: skip


# the trainers, and what PPOTrainerAsync makes between its halves (VLLMLock, its two ray.util.queue Queues)
CONTROLLER_CLASSES = ("SweRlPPOTrainer", "PPOTrainerAsync", "SweRlTrainingActor", "SweRlGenerateSamplesActor",
                      "VLLMLock", "_QueueActor")  # fmt: skip


def cluster_checks(rc: RehearsalCluster, work: Path) -> list[tuple[str, bool, str]]:
    """Before the cluster goes: the trainer controllers ran on the head (the driver's node, launch.py's placement),
    not on the killed node; the step during which the node died masked its lost samples (swe_rl_valid < 1, their
    advantages zeroed) and training went on to the last step."""
    head = str(rc.cluster.head_node.node_id)
    table = rc.cluster.global_state.actor_table(None).values()
    ctl = [
        (a["ActorClassName"], a["Address"]["NodeID"])
        for a in table
        if a["ActorClassName"] in CONTROLLER_CLASSES
    ]
    out = [("trainer controllers on the driver's node", bool(ctl) and all(n == head for _, n in ctl),
            f"{', '.join(sorted({c for c, _ in ctl})) or 'none found'} on "
            f"{sorted({'head' if n == head else n[:8] for _, n in ctl})}")]  # fmt: skip
    path = work / "metrics.jsonl"
    rows = [json.loads(x) for x in path.read_text().splitlines()] if path.is_file() else []
    lost = [r for r in rows if r.get("swe_rl_valid", 1.0) < 1.0]
    out.append(("the lost samples masked, training went on", bool(lost) and all(r.get("swe_rl_adv_zeroed", 0) > 0 for r in lost),
                "; ".join(f"step {r['step']}: valid {r.get('swe_rl_valid'):.2f}, advantage zeroed "
                          f"{r.get('swe_rl_adv_zeroed', 0):.2f}" for r in rows) or f"no {path}"))  # fmt: skip
    return out
