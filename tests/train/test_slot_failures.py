"""Sandbox slots that cannot serve an episode stop the trainer with one message before the first episode, instead of
hanging or crashing later: through `swe-rl train` from the repository root, SandboxSlots with real Docker and
local sandboxes, and the repo check's shell as a user who cannot write `/`."""

from __future__ import annotations

import asyncio
import os
import shutil
import subprocess
import sys
import uuid
from pathlib import Path

import pytest

from swe_rl.tasks.generator import generate_tasks

REPO = Path(__file__).resolve().parents[2]
SWE_RL = str(Path(sys.executable).with_name("swe-rl"))
MISSING = {"backend": "docker", "image": "swe-rl/missing:never"}


@pytest.mark.docker
def test_train_with_a_missing_sandbox_image_is_one_error_before_the_first_episode():
    rel = Path("runs") / f"test-slot-failures-{uuid.uuid4().hex[:8]}"
    try:
        res = subprocess.run(
            [SWE_RL, "train", "-c", "configs/train/gpu_check.yaml", "-o", "device=cpu", "-o", "model.threads=2",
             "-o", f"out_dir={rel}", "-o", "sandbox=" + str(MISSING).replace("'", '"')],
            cwd=REPO, capture_output=True, text=True, timeout=300,
        )  # fmt: skip
        assert res.returncode == 1, res.stderr[-2000:]
        err = [x for x in res.stderr.splitlines() if x.startswith("error: ")]
        assert err and "sandbox slots (sandbox.backend docker)" in err[0], res.stderr[-2000:]
        assert "swe-rl/missing:never" in err[0] and "Traceback" not in res.stderr, res.stderr[-2000:]
        assert not (REPO / rel / "gpu_check" / "metrics.jsonl").exists()  # no step ran
    finally:
        shutil.rmtree(REPO / rel, ignore_errors=True)


@pytest.mark.docker
def test_leases_of_slots_that_cannot_start_each_fail_at_once_instead_of_waiting_for_ever():
    # A failed start used to leave an empty queue of free slots behind: every later lease waited on it for ever
    # (`swe-rl train` with a missing image hung after its first episode's error).
    from sandboxes.base import SandboxStartError
    from swe_rl.train.env import SandboxSlots

    tasks = generate_tasks(3, "train", seed=5)

    async def lease(slots, task):
        async with slots.lease(task):
            pass

    async def main():
        slots = SandboxSlots(2, MISSING)
        try:
            got = await asyncio.wait_for(
                asyncio.gather(*(lease(slots, t) for t in tasks), return_exceptions=True), timeout=60
            )
        finally:
            await slots.aclose()
        return got

    got = asyncio.run(main())
    assert all(isinstance(e, SandboxStartError) for e in got), got


def test_local_slots_whose_repo_folder_cannot_be_written_fail_at_start(tmp_path):
    from swe_rl.train.env import SandboxSlots, SlotsUnavailable

    blocker = tmp_path / "a_file"
    blocker.write_text("not a folder")
    slots = SandboxSlots(1, {"backend": "local"}, repo_dir=str(blocker / "testbed"))

    async def main():
        try:
            await slots.start()
        finally:
            await slots.aclose()

    with pytest.raises(SlotsUnavailable) as err:
        asyncio.run(main())
    msg = str(err.value)
    assert "sandbox.backend local" in msg and f"cannot write {blocker}" in msg, msg
    assert f"user {os.getuid()}" in msg and "run as root, or use sandbox.backend docker" in msg, msg


def test_local_slots_start_where_the_repo_folder_can_be_written(tmp_path):
    from swe_rl.train.env import SandboxSlots

    repo = tmp_path / "box" / "testbed"
    slots = SandboxSlots(1, {"backend": "local"}, repo_dir=str(repo))

    async def main():
        try:
            await slots.start()
            async with slots.lease(generate_tasks(1, "train", seed=5)[0]) as sb:
                res = await sb.exec("git log --oneline | wc -l && ls", cwd=str(repo))
        finally:
            await slots.aclose()
        return res

    res = asyncio.run(main())
    assert res.exit_code == 0 and res.output.split()[0] == "1", res.output


@pytest.mark.skipif(os.getuid() != 0 or shutil.which("runuser") is None, reason="needs root and runuser")
def test_the_repo_check_names_the_folder_a_user_cannot_write():
    # the check's shell as the user `nobody`, who cannot write `/` (this interpreter may sit where nobody cannot
    # reach it, so the shell runs alone; the slots run the same script through their sandbox)
    from swe_rl.train.env import repo_dir_check

    probe = f"/swe_rl_repo_check_{uuid.uuid4().hex[:8]}"
    res = subprocess.run(["runuser", "-u", "nobody", "--", "bash", "-c", repo_dir_check(probe)],
                         capture_output=True, text=True, timeout=60)  # fmt: skip
    assert res.returncode == 3 and res.stdout.split() == ["/", "65534"], (
        res.returncode,
        res.stdout,
        res.stderr,
    )
    assert not os.path.exists(probe)
    ok = subprocess.run(["bash", "-c", repo_dir_check(probe)], capture_output=True, text=True, timeout=60)
    assert ok.returncode == 0 and not os.path.exists(probe), ok.stdout  # root can; the check creates no repo


def test_the_repo_check_needs_git_where_the_episodes_run(tmp_path):
    # the lent GPU machines run the local backend on the host: a host without git would lose every episode's reset
    from swe_rl.train.env import repo_dir_check

    bindir = tmp_path / "bin"  # a PATH holding this host's programs except git
    bindir.mkdir()
    for d in ("/usr/local/bin", "/usr/bin", "/bin"):
        for prog in Path(d).iterdir() if Path(d).is_dir() else ():
            if prog.name != "git" and not (bindir / prog.name).exists():
                (bindir / prog.name).symlink_to(prog)
    env = {"PATH": str(bindir)}
    no_git = subprocess.run(["/bin/bash", "-c", repo_dir_check(str(tmp_path / "testbed"))], env=env,
                            capture_output=True, text=True, timeout=60)  # fmt: skip
    assert no_git.returncode == 4, (no_git.stdout, no_git.stderr)
    (bindir / "git").symlink_to(shutil.which("git"))
    ok = subprocess.run(["/bin/bash", "-c", repo_dir_check(str(tmp_path / "testbed"))], env=env,
                        capture_output=True, text=True, timeout=60)  # fmt: skip
    assert ok.returncode == 0, (ok.stdout, ok.stderr)
    # the slots say so before the first episode: a local sandbox whose shell finds no git
    from swe_rl.train.env import SandboxSlots, SlotsUnavailable

    (bindir / "git").unlink()
    slots = SandboxSlots(
        1, {"backend": "local", "env": {"PATH": str(bindir)}}, repo_dir=str(tmp_path / "testbed")
    )

    async def main():
        try:
            await slots.start()
        finally:
            await slots.aclose()

    with pytest.raises(SlotsUnavailable, match=r"cannot reset the task repo at .*: the sandbox has no `git`"):
        asyncio.run(main())
