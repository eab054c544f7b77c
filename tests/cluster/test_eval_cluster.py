"""`swe-rl eval` on the simulated cluster, as a user runs it from the repo root (issue 59 failures 1, 3, 5).

Each test runs the CLI (`.venv/bin/swe-rl eval -c configs/eval/micro.yaml ...`, the scripted gold policy) against
the `ray_cluster` fixture and reads the cluster's own actor table (GCS) for where the rollout and sandbox actors ran.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import tempfile
from pathlib import Path

import pytest

from tests.cluster.cluster_eval import (
    REPO,
    actors_by_class,
    eval_cmd,
    new_actors,
    trajectory_files,
)

pytestmark = pytest.mark.docker
TWO = ["-i", "swe-rl-micro__confini-1", "-i", "swe-rl-micro__exprcalc-1"]


def test_ray_address_is_honoured_on_a_first_run_with_ray_sandboxes(ray_cluster, tmp_path):
    """Failure 1: no cached gold validation + sandbox.backend ray. The validation's RaySandbox started a private
    local Ray and the pool then ran everything there: 0 actors on the cluster, no word."""
    cl = ray_cluster
    before = set(new_actors(cl, set()))
    # every cluster user's first run (no validation cached), from a machine that runs no Ray node itself
    elsewhere = tempfile.mkdtemp(prefix="swerl-rx-", dir="/tmp")  # short: Ray's socket paths live under it
    env = cl.env(SWE_RL_VALIDATION_CACHE=str(tmp_path / "validation"), RAY_TMPDIR=elsewhere)
    cmd = eval_cmd(tmp_path, "first-run", "--ray-address", cl.address, *TWO, "sandbox.backend=ray")
    try:
        res = subprocess.run(cmd, cwd=REPO, env=env, capture_output=True, text=True, timeout=480)
    finally:
        shutil.rmtree(elsewhere, ignore_errors=True)
    assert res.returncode == 0, res.stderr[-3000:]
    assert "resolved 2" in res.stdout, res.stdout[-2000:]
    ran = actors_by_class(cl, new_actors(cl, before))
    sandbox_nodes = {cl.node_id(n) for n in cl.sandbox_nodes}
    # 2 validation gradings + 2 episodes, each with its sandbox (and the episodes' gradings)
    assert len(ran.get("SandboxActor", [])) >= 4, f"sandboxes on the cluster: {ran}"
    assert {a["node"] for a in ran["SandboxActor"]} <= sandbox_nodes, (
        "a sandbox ran on a node without `sandbox`"
    )
    assert ran.get("RolloutWorker"), f"the rollout pool never joined the cluster: {ran}"
    assert f"joined the Ray cluster at {cl.address}" in res.stderr


def test_docker_sandboxes_run_only_on_sandbox_nodes(ray_cluster, tmp_path):
    """Failure 3 (placement): with the default Docker backend, rollout actors (0 CPUs, no resource) and with them
    their containers landed on any node, the head included. And spread (pool.scheduling, default spread): two
    actors taking 1 of a node's 4 `sandbox` slots each went both to one node under Ray's default policy."""
    cl = ray_cluster
    before = set(new_actors(cl, set()))
    args = ["--ray-address", cl.address, *TWO, "pool.num_actors=2", "pool.episodes_per_actor=1"]
    res = subprocess.run(
        eval_cmd(tmp_path, "placement", *args),
        cwd=REPO,
        env=cl.env(),
        capture_output=True,
        text=True,
        timeout=480,
    )
    assert res.returncode == 0, res.stderr[-3000:]
    workers = actors_by_class(cl, new_actors(cl, before)).get("RolloutWorker", [])
    assert len(workers) == 2, workers
    names = {cl.node_id(n): name for name, n in [("head", cl.head), *cl.named_sandbox_nodes()]}
    placed = sorted(names.get(a["node"], a["node"][:8]) for a in workers)
    print(f"\nrollout actors (their containers with them) on: {placed}")
    assert "head" not in placed and all(p.startswith("sandbox-") for p in placed), placed
    assert placed[0] != placed[1], f"both rollout actors on one node: {placed}"
    # report.json's per_node: each episode counted on its actor's node ("127.0.0.1 <node id, 8 hex>")
    report = json.loads((tmp_path / "runs" / "placement" / "report" / "report.json").read_text())
    per_node = report["per_node"]
    assert {n.split()[1] for n in per_node} <= {a["node"][:8] for a in workers}, (per_node, workers)
    assert sum(v["episodes"] for v in per_node.values()) == 2 and all(
        n.startswith("127.0.0.1 ") for n in per_node
    )


def test_a_head_node_with_a_running_cluster_and_no_ray_address(ray_cluster, tmp_path):
    """Failure 5: where `ray start` runs a cluster (its ray_current_cluster file present), `swe-rl eval` without
    --ray-address stopped with Ray's "When connecting to an existing cluster, num_cpus and num_gpus must not be
    provided". Now: a private local Ray on purpose, and one line naming the cluster and how to join it."""
    cl = ray_cluster
    before = set(new_actors(cl, set()))
    res = subprocess.run(
        eval_cmd(tmp_path, "head", "-i", "swe-rl-micro__confini-1"),
        cwd=REPO, env=cl.env(), capture_output=True, text=True, timeout=480,
    )  # fmt: skip
    assert res.returncode == 0, res.stderr[-3000:]
    assert "must not be provided" not in res.stderr
    assert f"a Ray cluster runs on this machine ({cl.address})" in res.stderr, res.stderr[-2000:]
    assert len(trajectory_files(tmp_path, "head")) == 1
    assert not new_actors(cl, before), "it was told to run privately, yet used the cluster"


def test_a_stale_ray_current_cluster_file_is_not_joined(tmp_path):
    """Failure 5, second half: a cluster killed rather than stopped leaves ray_current_cluster naming it; every
    later `swe-rl eval` tried to join it."""
    from tests.cluster.conftest import LOOPBACK_ENV

    ray_tmp = Path(
        tempfile.mkdtemp(prefix="swerl-rs-", dir="/tmp")
    )  # short: Ray's socket paths live under it
    (ray_tmp / "ray").mkdir(parents=True)
    (ray_tmp / "ray" / "ray_current_cluster").write_text("127.0.0.1:9")  # discard port: nothing answers
    import os

    env = {k: v for k, v in os.environ.items() if k != "RAY_ADDRESS"} | {
        "RAY_TMPDIR": str(ray_tmp),
        **LOOPBACK_ENV,
    }
    try:
        res = subprocess.run(
            eval_cmd(tmp_path, "stale", "-i", "swe-rl-micro__confini-1"),
            cwd=REPO, env=env, capture_output=True, text=True, timeout=480,
        )  # fmt: skip
    finally:
        shutil.rmtree(ray_tmp, ignore_errors=True)
    assert res.returncode == 0, res.stderr[-3000:]
    report = json.loads((tmp_path / "runs" / "stale" / "report" / "report.json").read_text())
    assert report["complete"] and report["counts"]["resolved"] == 1, report["counts"]
