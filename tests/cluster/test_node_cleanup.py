"""Issue 59 item 4: a lost node's containers are removed by that node itself, not by the driver or the TTL.

A sandbox node of the simulated cluster holds sandboxes (production RaySandbox actors, Docker inside): three with
the owner lease, one without. Its raylet alone is SIGKILLed (the host lives on, as when a raylet crashes or is
OOM-killed). Ray's workers there do NOT die with it: they live on, orphaned, so their containers' owners are alive
and the driver's reap (the pool's `reap_orphans`, which only looks at the driver's engine anyway) would leave them
to their TTL; the test checks that right after the kill. What removes them is each worker's janitor, which shares
its fate with its raylet (RAY_RAYLET_PID, sandboxes/lifecycle.py `watch_fate`): the node's own processes on the
node's own engine. (When the worker processes die too, e.g. the machine's Ray processes are all killed, the owner
lease ends the containers by itself: tests/sandboxes/test_lease.py.) Nothing here calls a reap; another node's
sandboxes are untouched.
"""

from __future__ import annotations

import asyncio
import os
import signal
import time

import pytest

from sandboxes import DockerSandboxConfig, make_sandbox
from sandboxes.config import RaySandboxConfig
from sandboxes.lifecycle import LABEL_PID, list_managed, owner_alive, remove_all

pytestmark = pytest.mark.docker
IMAGE = os.environ.get("SANDBOXES_TEST_IMAGE", "swe-rl/base:bookworm")
VICTIM = "victim_node"  # a resource only the node to be killed advertises, to pin sandboxes there


def _ray_cfg(resource: str, lease: bool = True) -> RaySandboxConfig:
    inner = DockerSandboxConfig(image=IMAGE, ttl=1800, owner_lease=lease)
    return RaySandboxConfig(inner=inner, resource=resource, startup_timeout=120)


def _wait(predicate, limit: float) -> float | None:
    t0 = time.monotonic()
    while time.monotonic() - t0 < limit:
        if predicate():
            return time.monotonic() - t0
        time.sleep(0.1)
    return None


def _all(coros) -> list:
    async def gather():
        return await asyncio.wait_for(asyncio.gather(*coros), 300)

    return asyncio.run(gather())


def _running(pid: int) -> bool:
    """A live process (not gone, not a zombie waiting for its parent)."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def _raylet_pid(node) -> int:
    from ray._private import ray_constants

    return int(node.all_processes[ray_constants.PROCESS_TYPE_RAYLET][0].process.pid)


def _child_of(pid: int, ancestor: int) -> bool:
    """Whether `ancestor` is in `pid`'s parent chain (Ray workers are their raylet's children)."""
    while pid > 1:
        if pid == ancestor:
            return True
        with open(f"/proc/{pid}/stat") as f:
            pid = int(f.read().rsplit(")", 1)[1].split()[1])
    return False


def test_a_lost_nodes_containers_are_removed_by_that_node(cluster_driver):
    from sandboxes.docker_sandbox import docker_client

    cl, client = cluster_driver, docker_client()
    run = f"nodeclean-{os.getpid()}"
    survivors = [make_sandbox(_ray_cfg("sandbox"), image=IMAGE, run_id=f"{run}-other") for _ in range(2)]
    _all(s.start() for s in survivors)
    # the victim: a sandbox node like the others, plus a resource that pins this test's sandboxes onto it
    victim = cl.cluster.add_node(num_cpus=2, resources={"sandbox": 4, VICTIM: 4}, node_ip_address="127.0.0.1")
    cl.cluster.wait_for_nodes()
    leased = [make_sandbox(_ray_cfg(VICTIM), image=IMAGE, run_id=f"{run}-lease") for _ in range(3)]
    control = make_sandbox(_ray_cfg(VICTIM, lease=False), image=IMAGE, run_id=f"{run}-nolease")
    try:
        _all(s.start() for s in [*leased, control])
        mine = list_managed(client, run_id=f"{run}-lease")
        assert len(mine) == 3
        assert all(
            _child_of(int(c.labels[LABEL_PID]), _raylet_pid(victim)) for c in mine
        )  # the victim's workers
        other_nodes = {
            cl.node_of_pid(int(c.labels[LABEL_PID])) for c in list_managed(client, run_id=f"{run}-other")
        }
        assert other_nodes <= {"sandbox-0", "sandbox-1"}, other_nodes

        # SIGKILL the raylet alone (the host lives on): its workers live on, orphaned, still holding the containers
        t_kill = time.monotonic()
        os.kill(_raylet_pid(victim), signal.SIGKILL)
        # so the driver's reap (owner gone or expired) would leave every one of them to its 30-minute TTL
        assert all(owner_alive(c.labels) for c in mine), "an owner died with its raylet"
        victims = (f"{run}-lease", f"{run}-nolease")
        gone = _wait(lambda: not any(list_managed(client, run_id=r) for r in victims), limit=120)
        took = None if gone is None else time.monotonic() - t_kill
        owners = {int(c.labels[LABEL_PID]) for c in mine}
        _wait(
            lambda: not any(_running(p) for p in owners), limit=30
        )  # then they exit (SIGTERM, then for sure)
        alive = [p for p in owners if _running(p)]
        print(
            f"\nraylet SIGKILLed -> the node's 4 containers (3 leased, 1 not) gone in {took} s; orphaned owners left: {alive}"
        )
        assert took is not None, [list_managed(client, run_id=r) for r in victims]
        assert not alive, f"orphaned workers still running: {alive}"
        others = list_managed(client, run_id=f"{run}-other")
        assert [c.status for c in others] == ["running", "running"], others
        for s in survivors:  # the other node's sandboxes still work
            assert asyncio.run(s.exec("echo alive")).output == "alive\n"
    finally:
        cl.kill_node(victim)  # the node's other processes (a lost machine); its raylet may already be gone
        for s in [*survivors, *leased, control]:
            asyncio.run(s.close())
        for suffix in ("lease", "nolease", "other"):  # what a failed run left (its owners may still live)
            remove_all(client, [c.id for c in list_managed(client, run_id=f"{run}-{suffix}")])
        client.close()
