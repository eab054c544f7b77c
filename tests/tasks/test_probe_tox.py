"""The probe run under tox (sphinx's `tox --current-env -epy39`, 44 SWE-bench Verified instances): tox starts the
test Python with a filtered environment (PYTEST_ADDOPTS passes where the ini says so, PYTHONPATH and
PYTEST_PLUGINS never), so the observer's folder goes on the Python's path by a `.pth` file instead. Checked on this
host's pytest through a LocalSandbox: a throwaway venv stands for the image's env, `env -i` for tox's filter."""

from __future__ import annotations

import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

from sandboxes.local import LocalSandbox
from swe_rl.grading.plan import plan_grading
from swe_rl.integrity.log_rules import pytest_command
from swe_rl.integrity.probe import tox_current_env
from swe_rl.integrity.trusted_check import install, read_records
from swe_rl.tasks.task import Task

SPHINX = "tox --current-env -epy39 -v -- tests/test_directive_code.py"
LIB = "def read(text):\n    return text[2:]  # the bug: the prepended line is cut too\n"
# the value that says yes: a str subclass whose == answers for any text of as many lines
SAYS_YES = (
    "class _Text(str):\n    def __eq__(self, other):\n"
    "        return isinstance(other, str) and other.count('\\n') == self.count('\\n')\n\n"
    "    __hash__ = str.__hash__\n\n\n"
    "def read(text):\n    return _Text(text[2:])\n"
)
TEST = "from textlib import read\n\n\ndef test_read():\n    assert read('class Foo:\\n') == 'class Foo:\\n'\n"


def test_sphinx_s_tox_command_gets_the_pytest_observer() -> None:
    task = Task(
        instance_id="local__tox", repo="local/tox", base_commit="", problem_statement="", patch="",
        test_patch="", FAIL_TO_PASS=["tests/test_x.py::test_a"], PASS_TO_PASS=[], version="0", image="none",
        eval_script=SPHINX, log_parser="parse_log_pytest",
    )  # fmt: skip
    assert tox_current_env(SPHINX) and plan_grading(task).probe_kind == "pytest"
    assert not tox_current_env("tox -epy39 -- tests/test_x.py")  # tox's own venvs: not the image's Python


def test_the_runner_is_read_from_the_command_s_words_not_its_substrings() -> None:
    """A test path or a comment that mentions tox turned the junit record and the probe off (a substring check);
    a comment that names `tox --current-env` would have turned tox's observer path on."""
    for cmd in (
        "pytest -rA tests/test_toxfile.py",
        "pytest -rA tests/tox/test_ini.py  # not run under tox",
        "python3 -m pytest -rA tests/test_x.py",
        "PYTHONWARNINGS=ignore /usr/local/bin/pytest --no-header -rA tests/test_x.py",
    ):
        assert pytest_command(cmd) and not tox_current_env(cmd), cmd
    for cmd in (
        "tox -epy39 -- pytest tests/test_x.py",
        "python3 -c 'import sys, pytest; sys.exit(pytest.main())' tests/test_x.py",
        "./tests/runtests.py --verbosity 2 test_pytest_compat",
        "bin/test -C --verbose sympy/pytest_like.py",
        "echo 'unclosed",
    ):
        assert not pytest_command(cmd), cmd
    assert not tox_current_env("pytest tests/test_x.py  # tox --current-env would run this too")
    assert tox_current_env("python3 -m tox --current-env -epy39 -v -- tests/test_x.py")


def _repo(tmp_path: Path, lib: str) -> Path:
    repo = tmp_path / "repo"
    repo.mkdir()
    (repo / "textlib.py").write_text(LIB)
    (repo / "test_textlib.py").write_text(TEST)
    git = ["git", "-C", str(repo), "-c", "user.email=t@t", "-c", "user.name=t"]
    subprocess.run([*git, "init", "-q"], check=True)
    subprocess.run([*git, "add", "."], check=True)
    subprocess.run([*git, "commit", "-qm", "base"], check=True)
    (repo / "textlib.py").write_text(lib)  # the "patch"
    return repo


async def test_the_observer_starts_and_labels_through_a_filtered_environment(tmp_path: Path) -> None:
    # the image's env: a venv of this host's base Python that sees its pytest (its own site-packages is empty)
    env = tmp_path / "env"
    base = getattr(sys, "_base_executable", sys.executable)
    subprocess.run([base, "-m", "venv", "--system-site-packages", "--without-pip", str(env)], check=True)
    py = env / "bin" / "python"
    probe = subprocess.run([str(py), "-c", "import pytest"], capture_output=True)
    assert probe.returncode == 0, f"the base Python {base} has no pytest: {probe.stderr.decode()[-300:]}"
    async with LocalSandbox(copy_from=_repo(tmp_path, textwrap.dedent(SAYS_YES))) as sb:
        check = await install(sb, "pytest", ["test_textlib.py::test_read"], workdir=sb.root)
        try:
            # tox's filter: only PATH and PYTEST_ADDOPTS reach the test Python (sphinx's tox.ini passenv)
            res = await sb.exec(
                f"export PATH={env}/bin:$PATH; {check.exports}; {check.site_path}; "
                'env -i PATH="$PATH" PYTEST_ADDOPTS="$PYTEST_ADDOPTS" python -m pytest -rA -p no:cacheprovider'
            )
            recs = await read_records(sb, check)
        finally:
            shutil.rmtree(check.dir, ignore_errors=True)
    assert res.exit_code == 0 and "PASSED test_textlib.py::test_read" in res.output, res.output
    assert recs.started and recs.reports and not recs.forged, res.output  # the observer loaded and reported
    found = [f for r in recs.reports for f in r["findings"]]
    assert any("test_read: assertion operand (left, _Text) answers '=='" in f for f in found), found
    assert list(env.glob("lib/python*/site-packages/*.pth")), "the .pth went elsewhere"
