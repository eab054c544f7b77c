"""The owner lease (sandboxes/lease.py): a SIGKILLed owner's containers end by themselves, with no reap and long
before their TTL; without the lease they stay (the reaper's case). Real processes, real containers."""

from __future__ import annotations

import os
import subprocess
import sys
import time

import pytest

from sandboxes.lifecycle import list_managed, reap

pytestmark = pytest.mark.docker

_HOLDER = """
import asyncio, sys
from sandboxes import DockerSandboxConfig, Limits, make_sandbox

lease, restart = sys.argv[3] == "lease", sys.argv[4] == "restart"
cfg = DockerSandboxConfig(image=sys.argv[1], ttl=600, limits=Limits(memory="128m", pids=64), owner_lease=lease)

async def main():
    boxes = [make_sandbox(cfg, run_id=sys.argv[2]) for _ in range(3)]
    await asyncio.gather(*(b.start() for b in boxes))
    if restart:  # the runaway path's last resort (files kept, a new main process): the lease must follow it
        await asyncio.to_thread(boxes[0]._restart_blocking)
        assert (await boxes[0].exec_once("echo after")).output == "after\\n"
    print("READY", flush=True)
    await asyncio.sleep(300)

asyncio.run(main())
"""


def _holder(image: str, run_id: str, *, lease: bool, restart: bool = False) -> subprocess.Popen:
    argv = [
        sys.executable,
        "-c",
        _HOLDER,
        image,
        run_id,
        "lease" if lease else "off",
        "restart" if restart else "-",
    ]
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, text=True)
    assert proc.stdout is not None and proc.stdout.readline().strip() == "READY", "holder did not start"
    return proc


def _wait_gone(client, run_id: str, limit: float) -> float | None:
    """Seconds until no container of `run_id` is left (running or not), or None after `limit` seconds."""
    t0 = time.monotonic()
    while time.monotonic() - t0 < limit:
        if not list_managed(client, run_id=run_id):
            return time.monotonic() - t0
        time.sleep(0.05)
    return None


@pytest.mark.parametrize("restart", [False, True], ids=["fresh", "after-restart"])
def test_a_sigkilled_owners_containers_end_by_themselves(sbx_cfg, sbx_docker_client, restart):
    leased, plain = f"lease-{os.getpid()}-{int(restart)}", f"nolease-{os.getpid()}-{int(restart)}"
    owners = [_holder(sbx_cfg().image, leased, lease=True, restart=restart),
              _holder(sbx_cfg().image, plain, lease=False)]  # fmt: skip
    try:
        assert len(list_managed(sbx_docker_client, run_id=leased)) == 3
        for p in owners:
            p.kill()  # SIGKILL: no janitor, no signal handler; nobody calls reap here
        for p in owners:
            p.wait()
        took = _wait_gone(sbx_docker_client, leased, limit=30)  # the TTL is 600 s
        print(f"\nowner SIGKILLed -> its 3 leased containers gone in {took} s (restart={restart})")
        assert took is not None, list_managed(sbx_docker_client, run_id=leased)
        time.sleep(2)  # the same owner death without the lease: still there (only reap or the TTL end them)
        left = list_managed(sbx_docker_client, run_id=plain)
        assert len(left) == 3 and all(c.status == "running" for c in left), left
    finally:
        for p in owners:
            p.kill()
            p.wait()
        reap(sbx_docker_client, run_id=plain)
        reap(sbx_docker_client, run_id=leased)


async def test_closing_a_leased_sandbox_is_unchanged(sbx_cfg, sbx_docker_client):
    from sandboxes import make_sandbox

    run_id = f"lease-close-{os.getpid()}"
    async with make_sandbox(sbx_cfg(), run_id=run_id) as sb:
        r = await sb.exec(
            "ps -o args= --ppid 1"
        )  # the init's one child: the lease reader, the TTL its timeout
        assert r.output.endswith("sandbox-lease 900\n") and r.output.count("\n") == 1, r.output
        assert [c.status for c in list_managed(sbx_docker_client, run_id=run_id)] == ["running"]
    assert list_managed(sbx_docker_client, run_id=run_id) == []


async def test_the_lease_reader_survives_what_an_agent_kills(sbx_cfg, sbx_docker_client):
    from sandboxes import make_sandbox

    # what agents type to clean up: by name, by command line, a SIGTERM to everything or to the init
    kills = "pkill -9 -x bash; pkill -9 -f bash; killall -q bash; pkill sleep; kill -TERM -1; kill -TERM 1"
    async with make_sandbox(sbx_cfg(), run_id=f"lease-hostile-{os.getpid()}") as sb:
        await sb.exec(f"{kills}; sleep 1")  # the shell itself may go: it is replaced
        r = await sb.exec("ps -o comm= --ppid 1")
        assert r.output == "sandbox-lease\n", r.output


def test_a_holder_whose_fate_process_dies_removes_its_containers_and_exits(sbx_cfg, sbx_docker_client):
    # a Ray worker's fate process is its raylet (RAY_RAYLET_PID); here any process, via SANDBOXES_FATE_PID. The
    # holder runs without the owner lease and stays alive: only the fate watch can end its containers.
    run_id = f"fate-{os.getpid()}"
    fate = subprocess.Popen(["sleep", "300"])
    env = os.environ | {"SANDBOXES_FATE_PID": str(fate.pid)}
    argv = [sys.executable, "-c", _HOLDER, sbx_cfg().image, run_id, "off", "-"]
    holder = subprocess.Popen(argv, stdout=subprocess.PIPE, text=True, env=env)
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "READY"
        assert len(list_managed(sbx_docker_client, run_id=run_id)) == 3
        fate.kill()  # not reaped until later: a zombie (as a raylet whose parent has not waited for it) is gone too
        took = _wait_gone(sbx_docker_client, run_id, limit=30)
        print(f"\nfate process SIGKILLed -> the holder's 3 containers gone in {took} s")
        assert took is not None, list_managed(sbx_docker_client, run_id=run_id)
        assert holder.wait(timeout=30) != 0  # it got SIGTERM after the clean-up
    finally:
        for p in (fate, holder):
            p.kill()
            p.wait()
        reap(sbx_docker_client, run_id=run_id)
