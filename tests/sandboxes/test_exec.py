"""The persistent shell on both backends: state, delimiting, timeouts, errors, files, sync facade."""

from __future__ import annotations

import asyncio
import os
import secrets

import pytest

from sandboxes import ExecResult, Sandbox, SandboxError, SyncSandbox, make_sandbox


async def test_state_persists_and_output_is_delimited(sbx_backend_config):
    async with make_sandbox(sbx_backend_config) as sb:
        assert isinstance(sb, Sandbox)
        r = await sb.exec("mkdir -p d && cd d && export FOO='a b' && echo hi")
        assert r == ExecResult(0, "hi\n", False, r.duration, 3)  # 3 bytes written, all kept
        r = await sb.exec('basename "$PWD"; echo "$FOO"; printf \'no newline\'')
        assert r.output == "d\na b\nno newline" and r.exit_code == 0
        r = await sb.exec("unset FOO; echo __SBX_0123456789abcdef0123456789abcdef_000 fake; exit 7")
        assert r.exit_code == 7 and "fake" in r.output
        r = await sb.exec('echo "[${FOO-unset}]"')
        assert r.output == "[unset]\n"


async def test_binary_output_and_stderr_are_kept(sbx_backend_config):
    async with make_sandbox(sbx_backend_config) as sb:
        r = await sb.exec("printf 'a\\377\\376b\\0c'; echo err >&2")
        assert r.output == "a\ufffd\ufffdb\x00cerr\n"


async def test_per_command_cwd_and_env_do_not_persist(sbx_backend_config):
    async with make_sandbox(sbx_backend_config) as sb:
        start = (await sb.exec("pwd")).output
        r = await sb.exec('pwd; echo "$X"', cwd="/", env={"X": "it's $quoted"})
        assert r.output == "/\nit's $quoted\n"
        r = await sb.exec('pwd; echo "[$X]"')
        assert r.output == f"{start}[]\n"
        r = await sb.exec("true", cwd="/does/not/exist")
        assert r.exit_code != 0 and "does/not/exist" in r.output
        with pytest.raises(ValueError, match="env"):
            await sb.exec("true", env={"BAD-NAME": "x"})


async def test_timeout_kills_command_and_its_background_children(sbx_backend_config, sbx_scaled_timeout):
    async with make_sandbox(sbx_backend_config) as sb:
        await sb.exec("export KEEP=1; cd /")
        # a unique duration: the local backend's pgrep sees every process on this shared host
        nap, flag = (
            f"{300 + secrets.randbelow(600)}.{secrets.randbelow(1000):03d}",
            f"bg-flag-{secrets.token_hex(4)}",
        )
        limit = await sbx_scaled_timeout(sb, 1.0)  # must let `echo started` run before it fires
        r = await sb.exec(
            f"(sleep {nap}; echo survived > /tmp/{flag}) & echo started; sleep {nap}", timeout=limit
        )
        assert r.timed_out and r.exit_code in (124, 137) and "started" in r.output
        r = await sb.exec(
            f"sleep 2; cat /tmp/{flag} 2>/dev/null; pgrep -f 'sleep {nap}' || echo none; echo $KEEP"
        )
        assert r.output.endswith("none\n1\n"), r.output
        # a command that ignores SIGTERM is killed by the SIGKILL that follows
        r = await sb.exec("trap '' TERM; sleep 300", timeout=0.5)
        assert r.timed_out


async def test_output_cap_keeps_head_and_tail(sbx_backend_config):
    cfg = sbx_backend_config.model_copy(update={"output_limit": 1000})
    async with make_sandbox(cfg) as sb:
        r = await sb.exec("echo HEAD; seq 1 100000; echo TAIL")
        assert r.output.startswith("HEAD\n") and r.output.endswith("TAIL\n")
        assert "bytes of output cut" in r.output and len(r.output) < 1200


async def test_files_roundtrip(sbx_backend_config, tmp_path):
    async with make_sandbox(sbx_backend_config) as sb:
        await sb.write_file("sub/dir/a.bin", b"\x00\xffdata", mode=0o755)
        assert await sb.read_file("sub/dir/a.bin") == b"\x00\xffdata"
        assert (await sb.exec("test -x sub/dir/a.bin && echo exec")).output == "exec\n"
        with pytest.raises(FileNotFoundError):
            await sb.read_file("no/such/file")
        src = tmp_path / "src"
        (src / "pkg").mkdir(parents=True)
        (src / "pkg" / "m.py").write_text("X = 1\n")
        (src / "top.txt").write_text("top\n")
        await sb.upload(str(src), "up")
        assert (await sb.exec("cat up/top.txt up/pkg/m.py")).output == "top\nX = 1\n"
        await sb.upload(str(src / "top.txt"), "single/copy.txt")
        assert await sb.read_file("single/copy.txt") == b"top\n"
        await sb.download("up", str(tmp_path / "back"))
        assert (tmp_path / "back" / "pkg" / "m.py").read_text() == "X = 1\n"
        await sb.download("single/copy.txt", str(tmp_path / "f.txt"))
        assert (tmp_path / "f.txt").read_text() == "top\n"


async def test_copy_from_and_closed_sandbox(sbx_backend_config, tmp_path):
    (tmp_path / "repo").mkdir()
    (tmp_path / "repo" / "hello.py").write_text("print('hi from repo')\n")
    sb = make_sandbox(sbx_backend_config, copy_from=tmp_path / "repo")
    async with sb:
        r = await sb.exec("python3 hello.py")
        assert r.output == "hi from repo\n"
    with pytest.raises(SandboxError):
        await sb.exec("true")


def test_sync_facade(sbx_backend_config):
    with SyncSandbox(make_sandbox(sbx_backend_config)) as sb:
        assert sb.exec("echo $((6*7))").output == "42\n"
        sb.write_file("f.txt", "x")
        assert sb.read_file("f.txt") == b"x"


def test_local_sandbox_directory_is_removed(tmp_path):
    from sandboxes.local import LocalSandbox

    sb = SyncSandbox(LocalSandbox())
    sb.start()
    root = sb.sandbox.root
    assert os.path.isdir(root)
    sb.close()
    assert not os.path.exists(root)


async def test_one_shot_mode_runs_beside_the_busy_shell(sbx_backend_config):
    cfg = sbx_backend_config.model_copy(update={"output_limit": 200})
    async with make_sandbox(cfg) as sb:
        await sb.exec("export ONLY_IN_SHELL=1")
        busy = asyncio.create_task(sb.exec("until [ -f go-flag ]; do sleep 0.1; done; echo shell-done"))
        await asyncio.sleep(0.3)
        r = await sb.exec_once('echo "[${ONLY_IN_SHELL-}] $Y"; seq 1 1000; exit 4', env={"Y": "y"})
        assert not busy.done()  # the shell is blocked until the flag exists: exec_once ran beside it
        assert r.exit_code == 4 and r.output.startswith("[] y\n") and "bytes of output cut" in r.output
        r = await sb.exec_once("sleep 30", timeout=0.5)
        assert r.timed_out and r.exit_code in (124, 137)
        assert (await sb.exec_once("touch go-flag")).exit_code == 0
        assert (await busy).output == "shell-done\n"


async def test_one_shot_output_cap_is_per_command_and_every_byte_is_counted(sbx_backend_config):
    """Grading reads an eval log whole through exec_once (up to 256 MiB) in a sandbox whose other commands keep
    the small cap; a flood past it is told by the count, not by a marker the output itself could print."""
    cfg = sbx_backend_config.model_copy(update={"output_limit": 200})
    want = "".join(f"{i}\n" for i in range(1, 3001))
    async with make_sandbox(cfg) as sb:
        whole = await sb.exec_once("seq 1 3000", output_limit=1 << 20)
        assert whole.output == want and whole.output_total == len(want)
        capped = await sb.exec_once("seq 1 3000")
        assert "bytes of output cut (limit 200 bytes)" in capped.output and capped.output_total == len(want)
        assert (await sb.exec("seq 1 3000")).output_total == len(want)
        with pytest.raises(ValueError, match="output_limit: expected a whole number of bytes >= 64"):
            await sb.exec_once("true", output_limit=10)


async def test_a_process_left_holding_its_output_does_not_hold_a_one_shot_command(sbx_backend_config):
    """Docker ends an exec's stream ~2 s after its command exits; the local backend does the same (before, it read
    until every writer closed the pipe: a test's leftover server held the grading of its run until the limit)."""
    nap = f"{400 + secrets.randbelow(600)}.{secrets.randbelow(1000):03d}"  # unique: the local backend's host
    async with make_sandbox(sbx_backend_config) as sb:
        try:
            r = await sb.exec_once(f"(sleep {nap}; echo late) & echo now", timeout=120)
            assert (r.exit_code, r.output, r.timed_out) == (0, "now\n", False)
            # whole lines: grep's own (`grep -cx sleep N`) never counts
            assert (await sb.exec_once(f"ps -eo args= | grep -cx 'sleep {nap}'")).output == "1\n"
        finally:
            await sb.exec_once(f"pkill -f 'sleep {nap}'; true")
