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

    def run(
        name: str, timeout: float = 10, *, _env=None, _prefix="", _style="swe_rl", **params
    ) -> tuple[int, str]:
        cmd = build_command(
            name,
            params,
            python=sys.executable,
            tools_dir=str(agent_tools),
            repo_dir=str(tmp_path),
            timeout=timeout,
            bash_style=_style,
        )
        env = {"PATH": "/usr/bin:/bin", "SWE_RL_EDITOR_STATE": str(tmp_path / "state"), **(_env or {})}
        res = subprocess.run(["bash", "-c", _prefix + cmd], capture_output=True, env=env, timeout=60)
        return res.returncode, (res.stdout + res.stderr).decode("utf-8", "replace")

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
    assert code == 1 and "occurs 2 times (starting at lines 1, 2)" in out
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
    (tmp_path / "bin.dat").write_bytes(b"\xff\xfe latin-1 text")  # no NUL: not binary, not UTF-8
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


# --- bounded, valid observations (issue 22: an ambiguous old_str listed every line of the file) ---------------
def test_ambiguous_or_empty_old_str_gets_one_short_error(run_tool, tmp_path):
    p = tmp_path / "big.py"
    p.write_text("x = 1\n" * 5000)
    code, out = run_tool("file_editor", command="str_replace", path=str(p), old_str="x = 1", new_str="y")
    assert code == 1 and "occurs 5000 times (starting at lines 1, 2, 3, ...)" in out and len(out) < 300
    code, out = run_tool("file_editor", command="str_replace", path=str(p), old_str="", new_str="y")
    assert code == 1 and "old_str is empty" in out and "insert" in out and len(out) < 300
    p.write_text(
        "a\nb = 1\nc\nb = 1\n"
    )  # the match lines are where old_str starts, not its first line's hits
    code, out = run_tool("file_editor", command="str_replace", path=str(p), old_str="b = 1\nc", new_str="z")
    assert code == 0 and p.read_text() == "a\nz\nb = 1\n"
    assert p.read_text().count("x = 1") == 0  # nothing was written by the refused edits


def test_binary_control_and_non_utf8_output_are_valid_text(run_tool, tmp_path):
    (tmp_path / "blob.bin").write_bytes(b"PK\x03\x04" + b"\x00" * 100)  # valid UTF-8, but binary
    code, out = run_tool("file_editor", command="view", path=str(tmp_path / "blob.bin"))
    assert code == 1 and "binary file (104 bytes)" in out and "\x00" not in out
    # an ASCII stdout (old task-image Pythons, C locale) must not crash on the replacement character
    code, out = run_tool("execute_bash", command="printf 'ok \\377\\376 \\000\\033[31m red\\n'",
                         _env={"PYTHONIOENCODING": "ascii"})  # fmt: skip
    assert code == 0 and "Traceback" not in out and "ok \ufffd\ufffd \\x00\\x1b[31m red" in out
    (tmp_path / "ctl.txt").write_text("a\x07b\n")
    code, out = run_tool("file_editor", command="view", path=str(tmp_path / "ctl.txt"),
                         _env={"PYTHONIOENCODING": "ascii"})  # fmt: skip
    assert code == 0 and "a\\x07b" in out and "\x07" not in out


def test_huge_output_and_long_lines_stay_bounded(run_tool, tmp_path):
    # 400 MB of output under a 300 MB address-space limit: read as it comes, only head and tail kept
    code, out = run_tool("execute_bash", command="head -c 400000000 /dev/zero | tr '\\0' a; echo; echo END",
                         timeout=60, _prefix="ulimit -v 300000; ")  # fmt: skip
    assert code == 0 and "MemoryError" not in out and "bytes omitted" in out and "END" in out
    assert len(out) < 20000 and "[exit code: 0]" in out
    line = "x" * 100_000 + " needle " + "y" * 100_000
    (tmp_path / "min.js").write_text(line + "\n" + line + "\n")
    code, out = run_tool("search", search_term="needle", path=str(tmp_path / "min.js"))
    assert code == 0 and out.count("needle") == 3 and "[line of 200008 characters]" in out and len(out) < 1000
    (tmp_path / "huge.txt").write_text("line of a big log file\n" * 1_000_000)
    code, out = run_tool("file_editor", command="view", path=str(tmp_path / "huge.txt"))
    assert code == 0 and "response clipped" in out and len(out) < 21000


def test_concise_view_and_r2e_parameter_names(run_tool, tmp_path):
    body = "".join(f"    v{i} = {i}\n" for i in range(6))
    src = f"import os\n\n\ndef long_one(a):\n{body}    return a\n\n\ndef short(b):\n    return b\n"
    (tmp_path / "m.py").write_text(src)
    code, out = run_tool("file_editor", command="view", path=str(tmp_path / "m.py"), concise=True)
    assert (
        code == 0 and "def long_one(a):" in out and "... lines 5-11 elided ..." in out and "v3 = 3" not in out
    )
    assert "def short(b):" in out and "return b" in out  # short bodies stay
    code, out = run_tool("file_editor", command="view", path=str(tmp_path / "m.py"), concise="false")
    assert "v3 = 3" in out and "elided" not in out
    code, out = run_tool("execute_bash", cmd="echo from-cmd")  # R2E-Gym's name for the command
    assert code == 0 and "from-cmd" in out and "[exit code: 0]" in out
    code, out = run_tool("execute_bash", cmd="echo out; echo err >&2; exit 3", _style="r2e")
    assert out.startswith("Exit code: Error: Exit code 3\n[STDOUT]\n\nout\n\n[STDERR]\n\nerr"), out
    kw = dict(python="python3", tools_dir="/t", repo_dir="/r", timeout=5)
    with pytest.raises(ValueError, match="given twice"):
        build_command("execute_bash", {"cmd": "ls", "command": "ls"}, **kw)
    assert "--auto_concise=110" in build_command(
        "file_editor", {"command": "view", "path": "/r"}, auto_concise=110, **kw
    )
