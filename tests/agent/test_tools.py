"""The tool scripts, run as the sandbox runs them: `python3 <script> ...` in a real directory (here on the host)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from swe_rl.agent.toolset import build_command, script_source

TOOLS = ("file_editor", "search", "execute_bash")


@pytest.fixture
def agent_tools(tmp_path) -> Path:
    d = tmp_path / "tools"
    d.mkdir()
    for name in TOOLS:
        (d / f"{name}.py").write_bytes(script_source(name))
    return d


@pytest.fixture
def run_tool(agent_tools, tmp_path):
    """Build the exact command line the loop builds and run it with bash; returns (exit code, output)."""

    def run(name: str, timeout: float = 10, **params) -> tuple[int, str]:
        cmd = build_command(
            name,
            params,
            python=sys.executable,
            tools_dir=str(agent_tools),
            repo_dir=str(tmp_path),
            timeout=timeout,
        )
        env = {"PATH": "/usr/bin:/bin", "SWE_RL_EDITOR_STATE": str(tmp_path / "state")}
        res = subprocess.run(["bash", "-c", cmd], capture_output=True, text=True, env=env, timeout=60)
        return res.returncode, res.stdout + res.stderr

    return run


def test_view_file_range_and_directory(run_tool, tmp_path):
    f = tmp_path / "pkg" / "mod.py"
    f.parent.mkdir()
    f.write_text("a = 1\nb = 2\nc = 3\n")
    (tmp_path / "pkg" / "deep" / "deeper" / "deepest").mkdir(parents=True)
    (tmp_path / ".hidden").mkdir()
    code, out = run_tool("file_editor", command="view", path=str(f))
    assert code == 0 and "     1\ta = 1\n     2\tb = 2" in out
    code, out = run_tool("file_editor", command="view", path=str(f), view_range="[2, -1]")
    assert "     2\tb = 2\n     3\tc = 3" in out and "a = 1" not in out
    code, out = run_tool("file_editor", command="view", path=str(f), view_range="[3, 1]")
    assert code == 1 and "Invalid view_range" in out
    code, out = run_tool("file_editor", command="view", path=str(tmp_path))
    assert code == 0 and "pkg/mod.py" in out and "pkg/deep/" in out
    assert "deeper/deepest" not in out and ".hidden" not in out  # two levels deep, hidden skipped


def test_create_replace_insert_undo(run_tool, tmp_path):
    p = str(tmp_path / "new" / "x.py")
    assert run_tool("file_editor", command="create", path=p, file_text="x = 1\ny = 2\n")[0] == 0
    code, out = run_tool("file_editor", command="create", path=p, file_text="again")
    assert code == 1 and "already exists" in out
    code, out = run_tool("file_editor", command="str_replace", path=p, old_str="x = 1", new_str="x = 10")
    assert code == 0 and "x = 10" in out and Path(p).read_text() == "x = 10\ny = 2\n"
    code, out = run_tool("file_editor", command="str_replace", path=p, old_str="nothing", new_str="-")
    assert code == 1 and "did not appear verbatim" in out
    Path(p).write_text("dup\ndup\n")
    code, out = run_tool("file_editor", command="str_replace", path=p, old_str="dup", new_str="-x")
    assert code == 1 and "Multiple occurrences" in out and "[1, 2]" in out
    Path(p).write_text("a\nb\n")
    code, out = run_tool("file_editor", command="insert", path=p, insert_line="1", new_str="--inserted")
    assert code == 0 and Path(p).read_text() == "a\n--inserted\nb\n"  # values may start with dashes
    assert run_tool("file_editor", command="undo_edit", path=p)[0] == 0
    assert Path(p).read_text() == "a\nb\n"
    code, out = run_tool("file_editor", command="insert", path=p, insert_line="9", new_str="z")
    assert code == 1 and "Invalid insert_line" in out


def test_editor_errors(run_tool, tmp_path):
    assert "not an absolute path" in run_tool("file_editor", command="view", path="rel.py")[1]
    assert "does not exist" in run_tool("file_editor", command="view", path=str(tmp_path / "nope"))[1]
    assert "Unknown command" in run_tool("file_editor", command="frobnicate", path=str(tmp_path))[1]
    (tmp_path / "bin.dat").write_bytes(b"\xff\xfe\x00")
    assert "not UTF-8" in run_tool("file_editor", command="view", path=str(tmp_path / "bin.dat"))[1]
    assert (
        "No edit history" in run_tool("file_editor", command="undo_edit", path=str(tmp_path / "bin.dat"))[1]
    )


def test_search_dir_file_and_cap(run_tool, tmp_path):
    repo = tmp_path / "repo"
    (repo / ".git").mkdir(parents=True)
    (repo / ".git" / "x").write_text("needle")  # hidden directories are skipped
    for i in range(105):
        (repo / f"f{i}.py").write_text("needle\nneedle\n" if i < 3 else "hay\n")
    (repo / "blob.bin").write_bytes(b"\x00needle")
    code, out = run_tool("search", search_term="needle", path=str(repo))
    assert code == 0 and "Found 6 matches" in out and "./f0.py (2 matches)" in out and "blob.bin" not in out
    code, out = run_tool("search", search_term="needle", path=str(repo / "f1.py"))
    assert "1:needle" in out and "2:needle" in out
    code, out = run_tool("search", search_term="hay", path=str(repo))
    assert "More than 100 files matched" in out and "Please narrow" in out
    assert "No matches found" in run_tool("search", search_term="absent", path=str(repo))[1]


@pytest.mark.parametrize(
    "command",
    ["pip install x", "ls && git checkout main", "FOO=1 git -c a=b reset --hard", "cat x | less", "python3 -m pip list",
     "echo $(vim)", "nohup sleep 1 &", "ipython"],
)  # fmt: skip
def test_bash_blocked_commands(run_tool, command):
    code, out = run_tool("execute_bash", command=command)
    assert code == 1 and "not allowed" in out


def test_bash_runs_in_repo_with_exit_code_timeout_and_cap(run_tool, tmp_path):
    code, out = run_tool(
        "execute_bash", command="pwd; git status >/dev/null 2>&1; echo out; echo err >&2; exit 7"
    )
    assert code == 0 and str(tmp_path) in out and "out" in out and "err" in out and "[exit code: 7]" in out
    code, out = run_tool("execute_bash", command="sleep 30 & sleep 30", timeout=1)
    assert code == 124 and "timed out after 1 seconds" in out
    code, out = run_tool("execute_bash", command="python3 -c \"print('x' * 50000)\"")
    assert "response clipped" in out and len(out) < 20000
    code, out = run_tool("execute_bash", command="read line; echo got:$line")
    assert "got:" in out  # stdin is closed: interactive reads end at once instead of hanging


def test_build_command_rejects_bad_calls():
    kw = dict(python="python3", tools_dir="/t", repo_dir="/r", timeout=5)
    with pytest.raises(ValueError, match="Unknown function"):
        build_command("nope", {}, **kw)
    with pytest.raises(ValueError, match="Unknown parameter"):
        build_command("search", {"search_term": "x", "bogus": 1}, **kw)
    with pytest.raises(ValueError, match="too long"):
        build_command("file_editor", {"command": "create", "path": "/a", "file_text": "x" * 200_000}, **kw)
    assert "file_editor.py" in build_command("str_replace_editor", {"command": "view", "path": "/a"}, **kw)
