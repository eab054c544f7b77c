"""The scripted gold policy replays ANY patch through the agent's own tools (real git, real tool scripts in a
LocalSandbox, the real agent loop): every kind of hunk git writes lands, and the tree equals `git apply`'s."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from swe_rl.agent.config import AgentConfig
from swe_rl.agent.loop import run_episode
from swe_rl.policy.scripted import ANCHOR, ScriptedGoldPolicy
from swe_rl.tasks.task import Task

pytestmark = pytest.mark.timeout(120)
ENV = {"GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@t", "GIT_COMMITTER_NAME": "t",
       "GIT_COMMITTER_EMAIL": "t@t", "PATH": "/usr/bin:/bin"}  # fmt: skip
SAME = "".join(
    "    pass\n" for _ in range(40)
)  # every line alike: a context-only str_replace matches everywhere
NUMBERED = "".join(f"line {i}\n" for i in range(1, 31))


def git(repo: Path, *args: str) -> str:
    res = subprocess.run(["git", *args], cwd=repo, capture_output=True, env=ENV)  # bytes: keep CRLF as it is
    assert res.returncode == 0, res.stderr
    return res.stdout.decode()


BASE = {
    "same.py": SAME,  # insert-only hunk whose context occurs everywhere (issue 22, defect 2)
    "dele.py": SAME,  # delete-only hunk in the same kind of file
    "start.txt": NUMBERED,  # edits at the first line and at the end
    "nonl.txt": "a\nb\nc",  # no final newline: edit the last line
    "addnl.txt": "x\ny",  # the fix adds the final newline
    "dropnl.txt": "x\ny\n",  # the fix drops it
    "crlf.txt": "one\r\ntwo\r\nthree\r\n",  # CRLF line ends stay CRLF
    "dashes.txt": "keep\n-- not a header\n--- nor this\nkeep\n",  # removed lines that look like diff headers
    "gone.py": "bye\n",
    "old/moved.py": NUMBERED,  # a pure rename
    "old/edited.py": NUMBERED,  # a rename with an edit
    "run.sh": "echo hi\n",  # mode change
    "multi.py": NUMBERED,  # several hunks in one file
}


def change(repo: Path) -> None:
    """The 'fix': one of each kind of change, made on disk; `git diff` then writes the patch."""
    lines = SAME.splitlines(keepends=True)
    (repo / "same.py").write_text("".join([*lines[:20], "    return 1\n", *lines[20:]]))
    (repo / "dele.py").write_text("".join(lines[:10] + lines[12:]))
    (repo / "start.txt").write_text("line 0\n" + NUMBERED.replace("line 1\n", "", 1) + "line 31\n")
    (repo / "nonl.txt").write_text("a\nb\nC")
    (repo / "addnl.txt").write_text("x\ny\n")
    (repo / "dropnl.txt").write_text("x\ny")
    (repo / "crlf.txt").write_bytes(b"one\r\nTWO\r\nthree\r\n")
    (repo / "dashes.txt").write_text("keep\nkeep\n")
    (repo / "gone.py").unlink()
    (repo / "new").mkdir()
    (repo / "new/mod.py").write_text("A = 1\n")
    (repo / "new/__init__.py").write_text("")
    git(repo, "mv", "old/moved.py", "moved.py")
    git(repo, "mv", "old/edited.py", "pkg_edited.py")
    (repo / "pkg_edited.py").write_text(NUMBERED.replace("line 15\n", "line fifteen\n"))
    os.chmod(repo / "run.sh", 0o755)
    (repo / "multi.py").write_text(NUMBERED.replace("line 2\n", "line two\n").replace("line 29\n", ""))


@pytest.fixture
def fixed_repo(tmp_path) -> tuple[Path, dict[str, str]]:
    """(base repo, {context lines: patch}) with the expected tree in git's index of a second copy."""
    repo = tmp_path / "repo"
    for name, text in BASE.items():
        (repo / name).parent.mkdir(parents=True, exist_ok=True)
        (repo / name).write_bytes(text.encode())
    git(repo, "init", "-q")
    git(repo, "add", "-A")
    git(repo, "commit", "-qm", "base")
    change(repo)
    git(repo, "add", "-A")
    patches = {n: git(repo, "diff", "--cached", "-M", f"-U{n}") for n in ("3", "0")}
    expected = git(repo, "write-tree").strip()
    git(repo, "reset", "-q", "--hard")
    return repo, {**patches, "tree": expected}


@pytest.mark.parametrize(("context", "fmt"), [("3", "xml"), ("3", "hermes"), ("0", "xml")])
async def test_gold_policy_lands_every_kind_of_hunk(fixed_repo, tiny_tokenizer, tmp_path, context, fmt):
    from sandboxes.config import LocalSandboxConfig
    from sandboxes.local import LocalSandbox

    repo, made = fixed_repo
    task = Task(instance_id="kinds", problem_statement="fix", patch=made[context])
    sb = LocalSandbox(LocalSandboxConfig(), copy_from=repo)
    await sb.start()
    try:
        cfg = AgentConfig(repo_dir=sb.root, tools_dir=str(tmp_path / "tools"), max_context_tokens=200_000,
                          max_wall_s=100, max_steps=100, action_format=fmt)  # fmt: skip
        policy = ScriptedGoldPolicy(
            task, tiny_tokenizer, repo_dir=sb.root, action_format=fmt, test_command="true"
        )
        traj = await run_episode(task, sb, policy, tiny_tokenizer, cfg)
        assert traj.exit_status == "submitted"
        errors = [m["content"] for m in traj.messages if m["role"] != "assistant" and "ERROR" in m["content"]]
        assert errors == []
        work = Path(sb.root)
        git(work, "add", "-A")
        assert (
            git(work, "write-tree").strip() == made["tree"]
        )  # contents, names and modes all as git applied them
        assert ANCHOR not in traj.patch
    finally:
        await sb.close()
