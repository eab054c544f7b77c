"""Leak-proofing with real processes and containers: concurrent starts, signals, owner death, TTL, reap."""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import time

import pytest

from sandboxes import (
    EngineUnreachableError,
    SandboxDiedError,
    SandboxStartError,
    SandboxTimeoutError,
    make_sandbox,
)
from sandboxes.lifecycle import list_managed, reap

pytestmark = pytest.mark.docker

_HOLDER = """
import asyncio, sys
from sandboxes import DockerSandboxConfig, Limits, make_sandbox

lease = sys.argv[4] == "lease"  # without the owner lease (the reaper's case), a SIGKILLed holder leaves them
cfg = DockerSandboxConfig(image=sys.argv[1], ttl=600, limits=Limits(memory="128m", pids=64), owner_lease=lease)

async def main():
    boxes = [make_sandbox(cfg, run_id=sys.argv[2]) for _ in range(3)]
    await asyncio.gather(*(b.start() for b in boxes))
    print("READY", flush=True)
    await asyncio.sleep(300)

if sys.argv[3] == "async":
    asyncio.run(main())
else:  # sync facade: start() runs in the facade's loop thread, not the main thread
    import time
    from sandboxes import SyncSandbox
    boxes = [SyncSandbox(make_sandbox(cfg, run_id=sys.argv[2])) for _ in range(3)]
    for b in boxes:
        b.start()
    print("READY", flush=True)
    time.sleep(300)
"""


def _spawn_holder(image: str, run_id: str, mode: str = "async", lease: bool = True) -> subprocess.Popen:
    argv = [sys.executable, "-c", _HOLDER, image, run_id, mode, "lease" if lease else "no-lease"]
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, text=True)
    line = proc.stdout.readline()
    assert line.strip() == "READY", f"holder did not start: {line!r}"
    return proc


async def test_sixteen_concurrent_starts_with_short_timeout_leak_nothing(sbx_cfg, sbx_docker_client):
    run_id = f"burst-{os.getpid()}"
    cfg = sbx_cfg(startup_timeout=0.05, start_attempts=1)
    boxes = [make_sandbox(cfg, run_id=run_id) for _ in range(16)]
    results = await asyncio.gather(*(b.start() for b in boxes), return_exceptions=True)
    failed = [r for r in results if isinstance(r, BaseException)]
    assert failed and all(isinstance(r, SandboxStartError) for r in failed), failed
    await asyncio.gather(*(b.close() for b in boxes))
    assert list_managed(sbx_docker_client, run_id=run_id) == []


@pytest.mark.parametrize(
    ("sig", "mode"), [(signal.SIGINT, "async"), (signal.SIGTERM, "async"), (signal.SIGTERM, "sync")]
)
def test_signal_to_holder_removes_its_sandboxes(sbx_cfg, sbx_docker_client, sig, mode):
    run_id = f"sig{int(sig)}{mode}-{os.getpid()}"
    proc = _spawn_holder(sbx_cfg().image, run_id, mode)
    try:
        assert len(list_managed(sbx_docker_client, run_id=run_id)) == 3
        proc.send_signal(sig)
        proc.wait(timeout=60)
        assert list_managed(sbx_docker_client, run_id=run_id) == []
    finally:
        proc.kill()
        proc.wait()
        reap(sbx_docker_client, run_id=run_id)  # a failing run must not leak either


def test_reap_removes_sandboxes_of_a_dead_owner_and_expired_ones(sbx_cfg, sbx_docker_client):
    run_id = f"reap-{os.getpid()}"
    proc = _spawn_holder(sbx_cfg().image, run_id, lease=False)
    proc.kill()  # SIGKILL: no cleanup can run and no owner lease ends them, the containers stay behind
    proc.wait()
    left = list_managed(sbx_docker_client, run_id=run_id)
    assert len(left) == 3
    assert reap(sbx_docker_client, run_id=f"other-{run_id}") == []  # scoped: touches nothing else
    reaped = reap(sbx_docker_client, run_id=run_id)
    assert sorted(reason for _, reason in reaped) == ["owner gone"] * 3
    assert list_managed(sbx_docker_client, run_id=run_id) == []


async def test_live_sandbox_survives_reap_until_it_expires(sbx_cfg, sbx_docker_client):
    run_id = f"live-{os.getpid()}"
    async with make_sandbox(sbx_cfg(ttl=600), run_id=run_id) as sb:
        assert reap(sbx_docker_client, run_id=run_id) == []
        assert (await sb.exec("echo still here")).output == "still here\n"
        reaped = reap(sbx_docker_client, run_id=run_id, now=time.time() + 601)
        assert [reason for _, reason in reaped] == ["expired"]
        with pytest.raises(SandboxDiedError):
            await sb.exec("true")


async def test_container_expires_by_itself(sbx_cfg, sbx_docker_client):
    run_id = f"ttl-{os.getpid()}"
    async with make_sandbox(sbx_cfg(ttl=2), run_id=run_id) as sb:
        # an init, whose one child is the lease reader with the TTL as its read timeout
        r = await sb.exec("ps -o args= -p 1; ps -o args= --ppid 1")
        lines = r.output.split("\n")
        assert lines[0].startswith("/sbin/docker-init -- bash") and lines[0].endswith("sandbox-lease 2"), (
            r.output
        )
        assert lines[1].endswith("sandbox-lease 2") and len(lines) == 3, r.output
        deadline = time.monotonic() + 30
        while list_managed(sbx_docker_client, run_id=run_id) and time.monotonic() < deadline:
            await asyncio.sleep(0.5)
        assert list_managed(sbx_docker_client, run_id=run_id) == []  # the TTL ended, auto-removed
        with pytest.raises(SandboxTimeoutError, match="ttl=2s"):
            await sb.exec("true")
        with pytest.raises(SandboxTimeoutError):
            await sb.read_file("/etc/hostname")


async def test_start_errors_are_clear(sbx_cfg):
    sb = make_sandbox(sbx_cfg(docker_host="unix:///nonexistent/docker.sock", start_backoff=0.05))
    with pytest.raises(EngineUnreachableError, match="nonexistent"):
        await sb.start()
    # a registry on a closed loopback port: missing image, unreachable registry -> one clear error, no pull
    with pytest.raises(
        SandboxStartError, match=r"not present locally and registry 127\.0\.0\.1:1 is unreachable"
    ):
        await make_sandbox(sbx_cfg(), image="127.0.0.1:1/missing/image:v1").start()
    with pytest.raises(SandboxStartError, match="pull='never'"):
        await make_sandbox(sbx_cfg(pull="never"), image="swe-rl/definitely-missing:v0").start()
