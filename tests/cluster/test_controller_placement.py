"""OpenRLHF's trainer controllers on a multi-node cluster (issue 59 item 6): `make rehearsal-cluster` lost its run
when upstream's PPOTrainer, a bare `@ray.remote`, had been placed on the sandbox node that was then killed.
With launch.py's placement, every controller class (and PPOTrainerAsync's VLLMLock and queues) lands on the
driver's node (here the head: no `sandbox`).
Without it (controller_main.py's `plain` mode, 2026-12-07, 3 of each class): 4 of 12 landed on sandbox nodes."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.cluster
ROOT = Path(__file__).resolve().parents[2]


def _placed(cluster, mode: str, tmp_path: Path) -> dict:
    out = tmp_path / f"{mode}.json"
    env = cluster.env(
        PYTHONPATH=f"{ROOT / 'tests/openrlhf/cuda_fakes'}:{ROOT}", RAY_raylet_start_wait_time_s="240"
    )
    proc = subprocess.run(
        [sys.executable, str(ROOT / "tests/cluster/controller_main.py"), cluster.address, mode, str(out)],
        capture_output=True, text=True, env=env, cwd=ROOT, timeout=540,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-6000:]
    got = json.loads(out.read_text())
    trainers = [n for n, _ in got["actors"] if n not in ("VLLMLock", "Queue")]
    assert sorted(got["ended"]) == sorted(trainers), got  # each trainer placed, then its __init__ failed
    table = cluster.cluster.global_state.actor_table(None)
    got["placed"] = [[name, table[aid]["Address"]["NodeID"]] for name, aid in got["actors"]]
    return got


def test_trainer_controllers_land_on_the_drivers_node_not_a_sandbox_node(ray_cluster_gpu, tmp_path):
    cl = ray_cluster_gpu
    head = cl.node_id(cl.head)
    got = _placed(cl, "ours", tmp_path)
    assert got["driver"] == head and got["chosen"] == head, got
    names = {cl.node_id(n): name for name, n in [("head", cl.head), ("gpu", cl.gpu_node)]} | {
        cl.node_id(n): f"sandbox-{i}" for i, n in enumerate(cl.sandbox_nodes)
    }
    where = [(cls, names.get(nid, nid)) for cls, nid in got["placed"]]
    want = {"PPOTrainer", "PPOTrainerAsync", "TrainingActor", "GenerateSamplesActor", "VLLMLock", "Queue"}
    assert {cls for cls, _ in where} == want
    assert all(node == "head" for _, node in where), [w for w in where if w[1] != "head"]
