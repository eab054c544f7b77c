"""Starting a run first removes this host's sandboxes whose owner process is gone, and says how many (issue 38).

A holder process starts a sandbox and is SIGKILLed (no janitor runs, the container stays until its TTL); then each
entry point is started the way a user starts it, from the repository root, and must have removed it before it
goes on (the commands are given a bad input after the reap point, so each stops right after its start-up). The
warm pool does the same when it is created. Other owners' containers are never touched: a live holder survives.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
import uuid
from pathlib import Path

import pytest

from sandboxes.lifecycle import LABEL_RUN, list_managed

pytestmark = pytest.mark.docker

REPO = Path(__file__).resolve().parents[2]
SWE_RL = str(Path(sys.executable).with_name("swe-rl"))
IMAGE = "swe-rl/base:bookworm"

_HOLDER = """
import asyncio, sys
from sandboxes import DockerSandboxConfig, make_sandbox

async def main():
    # no owner lease: a SIGKILLed holder's sandbox then stays until its TTL, the case the start-up reap is for
    sb = make_sandbox(DockerSandboxConfig(image=sys.argv[1], ttl=900, owner_lease=False), run_id=sys.argv[2])
    await sb.start()
    print("READY", sb.name if hasattr(sb, "name") else "", flush=True)
    await asyncio.sleep(600)

asyncio.run(main())
"""

# (name, argv after `swe-rl`): each reaches its start-up reap, then stops on the bad input that follows it
ENTRY_POINTS = [
    ("grade", ["grade", "--tasks", "micro", "--predictions", "gold", "--out", "runs/never", "--id", "no-such-id"]),
    ("eval", ["eval", "-c", "configs/eval/micro.yaml", "--name", "reap-test-never", "-i", "no-such-id*"]),
    ("train", ["train", "-o", "no_such_key=1"]),
    ("train-openrlhf", ["train-openrlhf", "-c", "configs/train/qwen25_coder_7b_grpo_aem.yaml",
                        "-o", "model.path=runs/no-such-model"]),
    ("demo", ["demo", "-o", "no_such_key=1"]),
]  # fmt: skip


def _holder(run_id: str) -> subprocess.Popen:
    proc = subprocess.Popen([sys.executable, "-c", _HOLDER, IMAGE, run_id], stdout=subprocess.PIPE, text=True)
    assert proc.stdout is not None and proc.stdout.readline().startswith("READY"), "holder did not start"
    return proc


@pytest.fixture(scope="module")
def sbx_docker_client():
    from sandboxes.docker_sandbox import docker_client

    return docker_client()


def _left(client, run_id: str) -> list:
    return [c for c in list_managed(client) if c.labels.get(LABEL_RUN) == run_id]


@pytest.fixture(scope="module")
def live_owner(sbx_docker_client):
    """The run id of a sandbox whose owner stays alive through every start-up reap here (it must survive)."""
    live = f"reap-live-{uuid.uuid4().hex[:8]}"
    alive = _holder(live)
    yield live
    alive.terminate()  # its janitor removes its sandbox
    alive.wait(timeout=60)
    assert _left(sbx_docker_client, live) == []


@pytest.fixture
def dead_owner(sbx_docker_client, live_owner):
    """The run id of a sandbox whose owner was SIGKILLed (no janitor ran: it stays until its TTL)."""
    dead = f"reap-dead-{uuid.uuid4().hex[:8]}"
    killed = _holder(dead)
    killed.kill()
    killed.wait()
    assert len(_left(sbx_docker_client, dead)) == 1
    yield dead
    assert len(_left(sbx_docker_client, live_owner)) == 1  # a live owner's sandbox is never touched


@pytest.mark.parametrize(("name", "argv"), ENTRY_POINTS, ids=[n for n, _ in ENTRY_POINTS])
def test_a_run_removes_dead_owners_sandboxes_when_it_starts(name, argv, dead_owner, sbx_docker_client):
    try:
        proc = subprocess.run([SWE_RL, *argv], cwd=REPO, capture_output=True, text=True, timeout=300)
    finally:
        shutil.rmtree(REPO / "runs" / "reap-test-never", ignore_errors=True)  # eval saves its config first
    assert proc.returncode != 0  # stopped by the bad input, after the start-up reap
    said = f"{name}: removed " in proc.stderr and "of processes that are gone" in proc.stderr
    assert said, proc.stderr[-2000:]
    assert _left(sbx_docker_client, dead_owner) == []


def test_creating_a_warm_pool_removes_dead_owners_sandboxes(dead_owner, sbx_docker_client, capsys):
    from sandboxes import DockerSandboxConfig
    from sandboxes.pool import WarmPool

    WarmPool(DockerSandboxConfig(image=IMAGE, warm_pool={"size": 1}))
    assert _left(sbx_docker_client, dead_owner) == []
    assert "sandbox pool: removed " in capsys.readouterr().err
