"""SWE-ReX's own runtime interface (sessions, commands, files, close) over our sandboxes, via SandboxDeployment.

Every call goes through a fresh `asyncio.run`, as SWE-agent's SWEEnv and mini-swe-agent's swerex environments
call a runtime: the deployment must not be tied to the caller's event loop.
"""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys

import pytest

pytest.importorskip("swerex")

from swerex.deployment.abstract import AbstractDeployment
from swerex.exceptions import (
    BashIncorrectSyntaxError,
    CommandTimeoutError,
    DeploymentNotStartedError,
    DeploymentStartupError,
    NonZeroExitCodeError,
    SessionDoesNotExistError,
    SessionExistsError,
)
from swerex.runtime.abstract import (
    AbstractRuntime,
    BashAction,
    BashInterruptAction,
    CloseBashSessionRequest,
    Command,
    CreateBashSessionRequest,
    ReadFileRequest,
    UploadRequest,
    WriteFileRequest,
)

from sandboxes.adapters.swerex_deployment import (
    SandboxDeployment,
    SandboxDeploymentConfig,
    SandboxDeploymentPool,
)
from sandboxes.lifecycle import list_managed

run = asyncio.run


def _bash(rt, command: str, session: str = "default", **kw):
    kw = {"check": "silent"} | kw
    return run(rt.run_in_session(BashAction(command=command, session=session, **kw)))


def _sessions(rt) -> None:
    """Two named sessions: cwd and exports persist per session and never cross; failures are swe-rex's."""
    run(rt.create_session(CreateBashSessionRequest()))
    run(rt.create_session(CreateBashSessionRequest(session="other")))
    with pytest.raises(SessionExistsError):
        run(rt.create_session(CreateBashSessionRequest(session="other")))
    assert _bash(rt, "mkdir -p w/sub && cd w/sub && export GREETING=hi && X=local").exit_code == 0
    obs = _bash(rt, 'echo "$GREETING ${X:-unset} $(basename $PWD)"')
    assert (obs.output.strip(), obs.exit_code) == ("hi unset sub", 0)  # exported persists, unexported not
    other = _bash(rt, 'echo "[${GREETING:-}]" && cd / && export O=1', session="other")
    assert other.output.strip() == "[]"
    assert _bash(rt, 'echo "$(basename $PWD) ${O:-none}"').output.strip() == "sub none"
    assert _bash(rt, "cd .. && export LEFT=1 && exit 3").exit_code == 3  # exit keeps the state
    assert _bash(rt, 'echo "$(basename $PWD) $LEFT"').output.strip() == "w 1"
    # a save torn mid-write (here: no file may grow, as a kill would cut it) keeps the previous state whole
    _bash(rt, "cd sub && export TORN=1; ulimit -f 0")
    assert _bash(rt, 'echo "$(basename $PWD) $LEFT ${TORN:-none}"').output.strip() == "w 1 none"
    heredoc = "cat <<'EOF' > h.txt\nline $HOME\nEOF\ncat h.txt"
    assert _bash(rt, heredoc).output.strip() == "line $HOME"
    with pytest.raises(NonZeroExitCodeError, match="no-such-file"):
        run(rt.run_in_session(BashAction(command="cat no-such-file", error_msg="reading")))
    assert _bash(rt, "false", check="ignore").exit_code is None
    with pytest.raises(BashIncorrectSyntaxError):
        _bash(rt, "if then fi (")
    with pytest.raises(CommandTimeoutError):
        _bash(rt, "export SLOW=1; sleep 30", timeout=1)
    assert run(rt.run_in_session(BashInterruptAction())).exit_code == 0  # nothing left running
    # the session survives its killed command (whether `export SLOW` was saved depends on where SIGTERM landed)
    assert _bash(rt, 'echo "$(basename $PWD) ${LEFT}"').output.strip() == "w 1"
    run(rt.close_session(CloseBashSessionRequest(session="other")))
    with pytest.raises(SessionDoesNotExistError):
        _bash(rt, "true", session="other")


def _commands_and_files(rt, tmp_path) -> None:
    # absolute paths under the test's own folder: with backend local they are the host's, and fixed /tmp names
    # stayed behind after every run (and were shared by runs side by side); in a container the folder is new
    top = str(tmp_path / "abs")
    r = run(rt.execute(Command(command=["sh", "-c", "echo out; echo err >&2; exit 4"])))
    assert (r.stdout, r.stderr, r.exit_code) == ("out\n", "err\n", 4)
    r = run(rt.execute(Command(command="echo a; echo b >&2", shell=True, merge_output_streams=True)))
    assert sorted(r.stdout.split()) == ["a", "b"] and r.stderr == ""
    r = run(
        rt.execute(Command(command='echo "[${GREETING:-}] $K $PWD"', shell=True, env={"K": "v"}, cwd="/tmp"))
    )
    assert r.stdout == "[] v /tmp\n"  # fresh process, env replaced, no session state
    with pytest.raises(NonZeroExitCodeError):
        run(rt.execute(Command(command="exit 1", shell=True, check=True)))
    with pytest.raises(CommandTimeoutError):
        run(rt.execute(Command(command="sleep 30", shell=True, timeout=1)))
    run(rt.write_file(WriteFileRequest(path=f"{top}/deep/dir/f.txt", content="héllo\n")))
    assert run(rt.read_file(ReadFileRequest(path=f"{top}/deep/dir/f.txt"))).content == "héllo\n"
    with pytest.raises(FileNotFoundError):
        run(rt.read_file(ReadFileRequest(path="/tmp/none.txt")))
    (tmp_path / "tools" / "bin").mkdir(parents=True)
    (tmp_path / "tools" / "bin" / "hello").write_text("#!/bin/sh\necho tool says $1\n")
    (tmp_path / "tools" / "bin" / "hello").chmod(0o755)
    run(rt.upload(UploadRequest(source_path=str(tmp_path / "tools"), target_path=f"{top}/tools")))
    run(rt.upload(UploadRequest(source_path=str(tmp_path / "tools/bin/hello"), target_path=f"{top}/one/hi")))
    assert _bash(rt, f"export PATH={top}/tools/bin:$PATH && hello x && {top}/one/hi y").output.split("\n")[
        :2
    ] == [
        "tool says x",
        "tool says y",
    ]


def test_runtime_interface(sbx_backend_config, tmp_path):
    state = tmp_path / "state"  # on the host with backend: local, inside the container with docker
    dep = SandboxDeployment(
        sandbox=sbx_backend_config.model_dump(), run_id="swerex-test", state_dir=str(state)
    )
    assert isinstance(dep, AbstractDeployment)
    with pytest.raises(DeploymentNotStartedError):
        dep.runtime  # noqa: B018
    run(dep.start())
    try:
        assert isinstance(dep.runtime, AbstractRuntime) and run(dep.is_alive())
        _sessions(dep.runtime)
        _commands_and_files(dep.runtime, tmp_path)
    finally:
        run(dep.stop())
    with pytest.raises(DeploymentNotStartedError):
        run(dep.is_alive())
    assert not state.exists() or not any(state.iterdir())  # session state removed at close


@pytest.mark.docker
def test_deployment_is_a_hardened_labelled_sandbox(sbx_cfg, sbx_docker_client):
    cfg = SandboxDeploymentConfig(sandbox=sbx_cfg().model_dump(), run_id="swerex-hard", labels={"who": "t"})
    dep = cfg.get_deployment()
    run(dep.start())
    try:
        attrs = sbx_docker_client.api.inspect_container(dep.sandbox.id)
        host, labels = attrs["HostConfig"], attrs["Config"]["Labels"]
        assert host["NetworkMode"] == "none" and host["Memory"] == 256 * 2**20 and host["PidsLimit"] == 128
        assert labels["sandboxes.managed"] == "1" and labels["sandboxes.run_id"] == "swerex-hard"
        assert labels["sandboxes.owner_pid"] == str(os.getpid()) and labels["who"] == "t"  # what reap reads
        r = run(
            dep.runtime.execute(
                Command(
                    command="python3 -c 'import socket; socket.create_connection((\"1.1.1.1\", 53), 2)'",
                    shell=True,
                )
            )
        )
        assert r.exit_code != 0 and "unreachable" in r.stderr.lower()
        # the runtime's close() (what swe-rex callers call) removes the container
        run(dep.runtime.close())
        assert not list_managed(sbx_docker_client, run_id="swerex-hard")
    finally:
        run(dep.stop())


@pytest.mark.docker
def test_start_failure_is_a_deployment_startup_error(sbx_cfg, sbx_docker_client):
    cfg = sbx_cfg(pull="never", start_attempts=1).model_dump()
    dep = SandboxDeployment(image="swe-rl/no-such-image:1", sandbox=cfg, run_id="swerex-missing")
    with pytest.raises(DeploymentStartupError, match="no-such-image"):
        run(dep.start())
    assert not list_managed(sbx_docker_client, run_id="swerex-missing")


@pytest.mark.docker
def test_pool_serves_deployments(sbx_cfg, sbx_docker_client):
    box = sbx_cfg(warm_pool={"size": 1}).model_dump()
    pool = SandboxDeploymentPool(sandbox=box, run_id="swerex-pool")
    try:
        run(pool.warm([box["image"]]))
        assert pool.pool.idle(box["image"]) == 1
        dep = pool.deployment()
        run(dep.start())
        labels = sbx_docker_client.api.inspect_container(dep.sandbox.id)["Config"]["Labels"]
        assert labels["sandboxes.pool"] == "1" and pool.pool.stats["hits"] == 1
        run(dep.runtime.create_session(CreateBashSessionRequest()))
        assert _bash(dep.runtime, "echo pooled").output == "pooled\n"
        run(dep.stop())
    finally:
        pool.close()
    assert not list_managed(sbx_docker_client, run_id="swerex-pool")  # drained


def test_sandboxes_imports_without_swerex():
    code = (
        "import sys, pkgutil, importlib, sandboxes, sandboxes.adapters\n"
        "mods = [m.name for m in pkgutil.walk_packages(sandboxes.__path__, 'sandboxes.')]\n"
        "for m in mods:\n"
        "    if 'swerex' not in m and 'ray_backend' not in m: importlib.import_module(m)\n"
        "print(sorted(k for k in sys.modules if k.split('.')[0] in ('swerex', 'swe_rl', 'torch')))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


async def test_runtime_on_a_sandbox_the_caller_owns():
    """SandboxRuntime over a sandbox started in the caller's own loop (no loop thread); close() keeps it."""
    from sandboxes import LocalSandboxConfig, make_sandbox
    from sandboxes.adapters.swerex_runtime import SandboxRuntime

    async with make_sandbox(LocalSandboxConfig(exec_timeout=30)) as sb:
        rt = SandboxRuntime(sb)
        await rt.create_session(CreateBashSessionRequest(session="s", startup_source=["/dev/null"]))
        obs = await rt.run_in_session(BashAction(session="s", command="cd /tmp && export A=1 && pwd"))
        assert (obs.output, obs.exit_code) == ("/tmp\n", 0)
        await rt.close()
        assert not await rt.is_alive()
        assert (await sb.exec("echo ${A:-unset}")).output == "unset\n"  # still open; the session did not leak


class _ProtocolOnly:
    """A real sandbox seen through the Sandbox protocol alone (no exec_once), as a third-party backend may be."""

    def __init__(self, sb) -> None:
        self._sb, self.id = sb, sb.id

    async def exec(self, cmd, *, timeout=None, cwd=None, env=None):
        return await self._sb.exec(cmd, timeout=timeout, cwd=cwd, env=env)

    async def close(self) -> None:
        await self._sb.close()


async def test_execute_without_one_shot_mode_leaves_the_shell_alone():
    from sandboxes import LocalSandboxConfig, make_sandbox
    from sandboxes.adapters.swerex_runtime import SandboxRuntime

    async with make_sandbox(LocalSandboxConfig(exec_timeout=30)) as sb:
        rt = SandboxRuntime(_ProtocolOnly(sb))
        r = await rt.execute(Command(command="cd /tmp && export B=1 && echo o && echo e >&2", shell=True))
        assert (r.stdout, r.stderr, r.exit_code) == ("o\n", "e\n", 0)
        assert (await sb.exec('echo "${B:-unset} $PWD"')).output == f"unset {sb.root}\n"
