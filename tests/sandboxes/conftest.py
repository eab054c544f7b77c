"""Fixtures for the sandboxes tests (names prefixed `sbx_`), and the session-end leak check.

The leak check only looks at containers labelled with THIS pytest process as owner: other engineers' tests run
containers on the same engine at the same time.
"""

from __future__ import annotations

import os
import time

import pytest

from sandboxes import DockerSandboxConfig, Limits, LocalSandboxConfig

SBX_IMAGE = os.environ.get("SANDBOXES_TEST_IMAGE", "swe-rl/base:bookworm")


def sbx_small_config(**overrides) -> DockerSandboxConfig:
    """Docker config for tests: small limits so hostile tests are fast and cheap."""
    limits = Limits(**({"memory": "256m", "pids": 128, "cpus": 1.0} | overrides.pop("limits", {})))
    base = {"image": SBX_IMAGE, "ttl": 900, "exec_timeout": 30, "startup_timeout": 60, "limits": limits}
    return DockerSandboxConfig(**(base | overrides))


@pytest.fixture(scope="session")
def sbx_cfg():
    """The small-limits Docker config factory, as a fixture (test modules cannot import conftest)."""
    return sbx_small_config


@pytest.fixture(scope="session")
def sbx_docker_client():
    from sandboxes.docker_sandbox import docker_client

    return docker_client()


@pytest.fixture(scope="session", autouse=True)
def sbx_no_leaked_containers(request):
    """At session end: no container owned by this pytest process may be left (running or not)."""
    yield
    if not any(item.get_closest_marker("docker") for item in request.session.items):
        return
    try:
        from sandboxes.docker_sandbox import docker_client
        from sandboxes.lifecycle import list_managed

        client = docker_client()
    except Exception:
        return  # no engine: the docker tests were skipped (or failed loudly under CI)
    left = list_managed(client, owner_pid=os.getpid())
    assert not left, f"containers leaked by this test session: {[(c.name, c.status) for c in left]}"


@pytest.fixture(scope="session")
def sbx_scaled_timeout():
    """`await sbx_scaled_timeout(sb, floor)`: `floor` seconds, or 20 round trips of a trivial command on `sb`
    measured now when that is longer. For a timeout that must let a command start before it fires: on a loaded
    host a command had not run 0.84 s after its exec (issue 27), so such a limit follows the host's speed."""

    async def scaled(sb, floor: float) -> float:
        t0 = time.monotonic()
        await sb.exec("true")
        return max(floor, 20 * (time.monotonic() - t0))

    return scaled


@pytest.fixture(params=["local", pytest.param("docker", marks=pytest.mark.docker)])
def sbx_backend_config(request):
    """Both backends; the docker one carries the docker marker so it skips/fails like every docker test."""
    if request.param == "docker":
        return sbx_small_config()
    return LocalSandboxConfig(exec_timeout=30)
