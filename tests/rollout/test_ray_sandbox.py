"""RaySandbox on local Ray with a real Docker container behind the actor."""

from __future__ import annotations

import os

import pytest

from sandboxes.base import SandboxDiedError, SandboxStartError
from sandboxes.config import make_sandbox

pytestmark = [pytest.mark.docker, pytest.mark.ray]


def _containers(run_id: str) -> list:
    import docker

    return docker.from_env().containers.list(all=True, filters={"label": f"sandboxes.run_id={run_id}"})


async def test_protocol_round_trip_and_no_leftover(ray_local, tmp_path):
    (tmp_path / "pkg").mkdir()
    (tmp_path / "pkg" / "mod.py").write_text("X = 1\n")
    sb = make_sandbox({"backend": "ray", "resource": None}, run_id="rollout-raysb-1")
    async with sb:
        assert len(_containers("rollout-raysb-1")) == 1
        assert (await sb.exec("cd /tmp && echo $((6 * 7))")).output == "42\n"
        assert (await sb.exec("pwd")).output.strip() == "/tmp"  # one persistent shell behind the actor
        failing = await sb.exec("exit 3")
        assert failing.exit_code == 3 and not failing.ok
        # one-shot mode through the actor (grading runs the eval script so): a fresh process, its own output cap
        once = await sb.exec_once(
            "echo $((6 * 7)); head -c 5000 /dev/zero | tr '\\0' x; exit 5", output_limit=1000
        )
        assert once.exit_code == 5 and once.output.startswith("42\n") and once.output_total == 5003
        assert "bytes of output cut (limit 1000 bytes)" in once.output
        assert (await sb.exec_once("pwd")).output.strip() != "/tmp"  # no shell state
        await sb.write_file("/tmp/a.bin", b"\x00\xffdata")
        assert await sb.read_file("/tmp/a.bin") == b"\x00\xffdata"
        await sb.upload(str(tmp_path / "pkg"), "/tmp/up")
        assert "mod.py" in (await sb.exec("ls /tmp/up")).output
        await sb.download("/tmp/up", str(tmp_path / "back"))
        assert (tmp_path / "back" / "mod.py").read_text() == "X = 1\n"
    assert _containers("rollout-raysb-1") == []


async def test_missing_custom_resource_is_one_clear_error(ray_local):
    if "sandbox_absent_resource" in ray_local.cluster_resources():
        pytest.skip("resource unexpectedly advertised")
    sb = make_sandbox({"backend": "ray", "resource": "sandbox_absent_resource"})
    with pytest.raises(SandboxStartError, match="sandbox_absent_resource"):
        await sb.start()


def _remove_unless_going(container) -> None:
    """Remove a container that its owner lease may be removing already (its owner is dead): 404 or 409 then."""
    import docker

    try:
        container.remove(force=True)
    except docker.errors.APIError as e:
        if e.status_code not in (404, 409):
            raise


async def test_actor_death_is_sandbox_died(ray_local):
    sb = make_sandbox({"backend": "ray", "resource": None}, run_id="rollout-raysb-2")
    await sb.start()
    try:
        pid = await sb._actor.__ray_call__.remote(lambda self: os.getpid())
        os.kill(pid, 9)
        with pytest.raises(SandboxDiedError):
            await sb.exec("echo hi")
    finally:
        await sb.close()
        for c in _containers("rollout-raysb-2"):  # its owner was killed: what the reaper would remove
            _remove_unless_going(c)
