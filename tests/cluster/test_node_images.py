"""Issue 59 item 5: a sandbox node whose engine lacks an image is named, gets the image, and then runs it.

"A node lacks the image" is made real on one machine: the node added here runs its workers against a private
dockerd of its own (own socket, data root, exec root, containerd, bridge; started and removed by this test; the
shared engine is never touched) through the raylet's environment (DOCKER_HOST), which Ray's workers inherit.
Before: the preflight's per-node check (and `train-openrlhf --dry-run` joining the cluster) names that node, and
only it, as lacking the image, and a sandbox placed
there fails to start on the missing image. `ship_images` sends it through Ray's object store from the driver's
engine (`docker save` chunks to a `docker load` on the node); after: the check passes and a RaySandbox placed on
that node runs a command in a container on the private engine. Then the other way: an image only that node's
engine has (built there) goes from that node (a `docker save` streamed by an actor there) to the other nodes.
"""

from __future__ import annotations

import asyncio
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest

from sandboxes import DockerSandboxConfig, SandboxStartError, make_sandbox
from sandboxes.config import RaySandboxConfig

pytestmark = pytest.mark.docker
IMAGE = os.environ.get("SANDBOXES_TEST_IMAGE", "swe-rl/base:bookworm")
ROOT = Path(__file__).resolve().parents[2]
ONLY_HERE = "fresh_engine_node"  # a resource only the node with the private engine advertises


@pytest.fixture
def private_engine():
    if shutil.which("dockerd") is None or shutil.which("ip") is None:
        pytest.skip("dockerd or iproute2 is not installed")
    from tests.evaluation.test_engine_restart import PrivateDockerd

    d = PrivateDockerd(tempfile.mkdtemp(prefix="sbxn-", dir="/tmp"))  # short: unix socket paths are limited
    try:
        d.start()
        yield d
    finally:
        d.close()
        for _ in range(50):  # close() keeps the folder while the engine's mounts are still going away
            if not os.path.exists(d.root) or d.root not in Path("/proc/mounts").read_text():
                break
            time.sleep(0.2)
        if d.root not in Path("/proc/mounts").read_text():
            shutil.rmtree(d.root, ignore_errors=True)
        assert not os.path.exists(d.root), f"{d.root} left behind (still mounted?)"


def _node_on(cl, engine):
    """A sandbox node (also advertising ONLY_HERE) whose workers use `engine` (DOCKER_HOST of its raylet)."""
    node = cl.cluster.add_node(
        num_cpus=2,
        resources={"sandbox": 4, ONLY_HERE: 4},
        env_vars={"DOCKER_HOST": engine.host},
        node_ip_address="127.0.0.1",
    )
    cl.cluster.wait_for_nodes()
    return node


def _start(cfg: RaySandboxConfig):
    async def go():
        sb = make_sandbox(cfg, image=IMAGE, run_id=f"nodeimg-{os.getpid()}")
        try:
            await sb.start()
            return (await sb.exec("echo ran on $(hostname)")).output
        finally:
            await sb.close()

    return asyncio.run(go())


def _dry_run(cl, tmp_path: Path) -> str:
    from swe_rl.tasks.loaders import load_tasks
    from swe_rl.train.openrlhf.data import write_prompt_dataset

    rows = tmp_path / "rows.jsonl"
    write_prompt_dataset([t.model_copy(update={"image": IMAGE}) for t in load_tasks("micro")[:2]], rows)
    cmd = [str(Path(sys.executable).with_name("swe-rl")), "train-openrlhf", "-c", "configs/train/qwen25_coder_7b_grpo_aem.yaml",
           "--dry-run", "-o", f"data.prompt_dataset={rows}", "-o", f"cluster.ray_address={cl.address}"]  # fmt: skip
    out = subprocess.run(cmd, capture_output=True, text=True, env=cl.env(), cwd=ROOT, timeout=300)
    assert out.returncode == 0, out.stdout[-2000:] + out.stderr[-3000:]
    return out.stdout


def test_a_node_without_the_image_is_named_and_gets_it(cluster_driver, private_engine, tmp_path):
    import docker

    from swe_rl.rollout.nodes import node_image_checks, ship_images

    cl = cluster_driver
    node = _node_on(cl, private_engine)
    try:
        checks = node_image_checks([IMAGE])
        bad = [c for c in checks if not c[1]]
        print("\n" + "\n".join(f"{'OK  ' if ok else 'FAIL'} {name}: {detail}" for name, ok, detail in checks))
        assert len(checks) == 3 and len(bad) == 1, checks  # two fixture sandbox nodes + this one
        assert private_engine.host in bad[0][0] and str(node.node_id)[:8] in bad[0][0], bad
        assert f"missing ['{IMAGE}']" in bad[0][2]
        # the same through `swe-rl train-openrlhf --dry-run` joining the cluster, as a user types it
        fails = [ln for ln in _dry_run(cl, tmp_path).splitlines() if ln.startswith("# FAIL")]
        assert len(fails) == 1 and str(node.node_id)[:8] in fails[0] and IMAGE in fails[0], fails

        pinned = RaySandboxConfig(
            inner=DockerSandboxConfig(image=IMAGE, pull="never"), resource=ONLY_HERE, startup_timeout=120
        )
        with pytest.raises(SandboxStartError):
            _start(pinned)  # the image is on the shared engine, not on this node's

        lines: list[str] = []
        before, after = ship_images([IMAGE], echo=lines.append)
        print("\n".join(lines))
        assert [n.missing for n in before if n.node_id == str(node.node_id)] == [(IMAGE,)]
        assert all(not n.missing for n in after), after
        assert len(lines) == 1 and "from the driver's engine" in lines[0]
        assert all(ok for _, ok, _ in node_image_checks([IMAGE]))

        assert _start(pinned).startswith("ran on ")
        private = docker.DockerClient(base_url=private_engine.host)
        try:
            assert private.images.get(IMAGE).tags  # it is on the node's engine now
        finally:
            private.close()

        # an image only that node's engine has (nor the driver's): shipped from that node to the other two
        only = f"swe-rl/node-only:{os.getpid()}"
        build = ["docker", "build", "-q", "--network", "none", "-t", only, "-"]
        dockerfile = f"FROM {IMAGE}\nLABEL org.swe-rl.test=node-only\n"
        env = os.environ | {"DOCKER_HOST": private_engine.host}
        subprocess.run(build, input=dockerfile, text=True, env=env, check=True, capture_output=True)
        lines.clear()
        before, after = ship_images([only], echo=lines.append)
        print("\n".join(lines))
        assert sorted(bool(n.missing) for n in before) == [False, True, True], before
        assert all(not n.missing for n in after), after
        assert len(lines) == 2 and all(f"from node 127.0.0.1 {str(node.node_id)[:8]}" in ln for ln in lines)
    finally:
        cl.kill_node(node)
        subprocess.run(["docker", "rmi", f"swe-rl/node-only:{os.getpid()}"], capture_output=True)


def test_an_eval_on_the_cluster_loads_a_nodes_missing_images_first(ray_cluster, private_engine, tmp_path):
    """`swe-rl eval --ray-address` with the default Docker backend and its rollout actor pinned to the node whose
    engine has no image at all: the eval's start loads the task's image there (one line naming the node), and the
    episode then runs and resolves on that engine."""
    import docker

    from tests.cluster.cluster_eval import REPO, eval_cmd

    cl = ray_cluster
    node = _node_on(cl, private_engine)
    try:
        args = ["--ray-address", cl.address, "-i", "swe-rl-micro__confini-1", "pool.num_actors=1",
                "pool.episodes_per_actor=1", f"pool.actor_resources={{{ONLY_HERE}: 1}}"]  # fmt: skip
        res = subprocess.run(eval_cmd(tmp_path, "fresh-node", *args), cwd=REPO, env=cl.env(),
                             capture_output=True, text=True, timeout=480)  # fmt: skip
        assert res.returncode == 0, res.stderr[-3000:]
        loaded = [
            ln
            for ln in res.stderr.splitlines()
            if f"{str(node.node_id)[:8]} (engine {private_engine.host})" in ln
        ]
        print("\n" + "\n".join(loaded))
        assert len(loaded) == 1 and "loaded 1 image(s) from the driver's engine" in loaded[0], res.stderr[
            -3000:
        ]
        assert "resolved 1" in res.stdout, res.stdout[-2000:]
        private = docker.DockerClient(base_url=private_engine.host)
        try:
            assert private.images.get("swe-rl/micro:confini-1").tags
        finally:
            private.close()
    finally:
        cl.kill_node(node)


def test_a_node_lost_just_before_the_image_check_is_left_out(cluster_driver):
    """A node still listed alive when the check starts (Ray marks a SIGKILLed node dead seconds later) but gone
    when its probe is placed: the check leaves it out instead of failing `swe-rl eval` at its start
    (TaskUnschedulableError, seen when an eval began right after a node was lost)."""
    from swe_rl.rollout.nodes import image_report

    cl = cluster_driver
    node = cl.cluster.add_node(num_cpus=1, resources={"sandbox": 4}, node_ip_address="127.0.0.1")
    cl.cluster.wait_for_nodes()
    gone = str(node.node_id)
    assert gone in cl.alive_node_ids()
    cl.kill_node(node)
    print(f"\nkilled node listed alive at the check: {gone in cl.alive_node_ids()}")  # the race (Ray: ~4-5 s)
    report = image_report([IMAGE])
    assert gone not in {n.node_id for n in report}, report
    assert len(report) == 2 and all(not n.missing for n in report), report  # the fixture's two sandbox nodes
