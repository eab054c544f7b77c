"""Sandboxes dealt over the sandbox nodes, not packed onto one (`sandbox.scheduling` / `pool.scheduling`).

`make rehearsal-cluster` lost all 8 samples of a step with one sandbox node: Ray's default (hybrid) policy fills a
node to half its resources before it uses the next, so two sandboxes asking for 1 of a node's 4 `sandbox` slots
both land on the first node. With `scheduling: spread` (the default) they land on two nodes. Where each sandbox ran
is read from its container's owner-pid label (the Ray worker that started it, a child of that node's raylet).
"""

from __future__ import annotations

import asyncio
import os

import pytest

from sandboxes import DockerSandboxConfig, make_sandbox
from sandboxes.config import RaySandboxConfig
from sandboxes.lifecycle import LABEL_PID, list_managed, remove_all

pytestmark = pytest.mark.docker
IMAGE = os.environ.get("SANDBOXES_TEST_IMAGE", "swe-rl/base:bookworm")


def _nodes_of_two_sandboxes(cl, scheduling: str) -> list[str | None]:
    from sandboxes.docker_sandbox import docker_client

    client, run = docker_client(), f"spread-{scheduling}-{os.getpid()}"
    inner = DockerSandboxConfig(image=IMAGE, ttl=600)
    cfg = RaySandboxConfig(inner=inner, startup_timeout=120, scheduling=scheduling)
    boxes = [make_sandbox(cfg, image=IMAGE, run_id=run) for _ in range(2)]

    async def start_all() -> None:
        await asyncio.wait_for(asyncio.gather(*(b.start() for b in boxes)), 300)

    try:
        asyncio.run(start_all())
        return sorted(
            cl.node_of_pid(int(c.labels[LABEL_PID])) or "?" for c in list_managed(client, run_id=run)
        )
    finally:
        for b in boxes:
            asyncio.run(b.close())
        remove_all(client, [c.id for c in list_managed(client, run_id=run)])
        client.close()


def test_ray_sandboxes_are_spread_over_the_sandbox_nodes(cluster_driver):
    placed = _nodes_of_two_sandboxes(cluster_driver, "spread")
    print(f"\nscheduling=spread: two sandboxes on {placed}")
    assert len(placed) == 2 and all(p.startswith("sandbox-") for p in placed), placed
    assert placed[0] != placed[1], f"both sandboxes on one node: {placed}"
