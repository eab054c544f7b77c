"""Issue 35 item 1: the graded run is the official run, the probe run only adds labels.

- The graded run's script is swebench's eval script plus two lines: the exit-code file after the tests, and (pytest
  runs) the junit record's export just before the test output.
- The junit record changes a result only where it leaves a trace (log_rules.junit_footprint): shown on this
  host's pytest with each of the three ways it can (a property fixture's warning under -W error, properties it
  str()s, an error inside it), and with none of them the per-test results are identical; through the grader, a gold
  patch whose test hits one is graded on a run without the record (and resolves).
- A probe that does not start is `unavailable`: no label, the verdict stands, the metric counts it (broken on
  purpose: the plugin shipped is one that raises when pytest imports it).
"""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from swe_rl.grading.grader import docker_factory, grade
from swe_rl.grading.reward import integrity_metrics
from swe_rl.integrity import trusted_check
from swe_rl.integrity.guard import Guard
from swe_rl.integrity.log_rules import junit_footprint, junit_outcomes
from swe_rl.tasks.task import Task

PROPERTY_TESTS = """
import pytest


def test_records_a_property(record_property):
    record_property("build", "42")


def test_plain():
    assert 1 + 1 == 2


class Loud:
    def __str__(self):
        raise RuntimeError("no str for you")


def test_records_an_unprintable_property(record_property):
    record_property("value", Loud())
"""


def _pytest_run(
    tmp_path: Path, junit: bool, *args: str, strict: bool = False
) -> tuple[dict[str, str], str, str]:
    """(per-test outcomes from -rA, the log, the junit text, the exit code) of this host's pytest on PROPERTY_TESTS (`strict`:
    the repository's pytest.ini turns pytest's warnings into errors, as many do)."""
    (tmp_path / "test_props.py").write_text(PROPERTY_TESTS)
    ini = "[pytest]\n" + ("filterwarnings =\n    error::pytest.PytestWarning\n" if strict else "")
    (tmp_path / "pytest.ini").write_text(ini)
    xml = tmp_path / "junit.xml"
    xml.unlink(missing_ok=True)
    # (-p no:asyncio: this venv's pytest-asyncio warns at configure time, an error under the strict ini)
    cmd = [
        sys.executable,
        "-m",
        "pytest",
        "-rA",
        "-p",
        "no:cacheprovider",
        "-p",
        "no:asyncio",
        *args,
        "test_props.py",
    ]
    cmd += [f"--junitxml={xml}"] if junit else []
    res = subprocess.run(cmd, cwd=tmp_path, capture_output=True, text=True, timeout=120)
    log = res.stdout + res.stderr
    outcomes = {}
    for line in log.splitlines():
        for status in ("PASSED", "FAILED", "ERROR"):
            if line.startswith(f"{status} test_props.py::"):
                outcomes[line.split()[1]] = status
    return outcomes, log, xml.read_text() if xml.exists() else "", res.returncode


def test_the_junit_record_changes_a_result_only_where_it_leaves_a_trace(tmp_path: Path) -> None:
    # a property fixture warns only with --junitxml: under -W error the test errors with it, passes without it
    plain, *_ = _pytest_run(tmp_path, False, "-k", "records_a_property", strict=True)
    with_xml, log, xml, code = _pytest_run(tmp_path, True, "-k", "records_a_property", strict=True)
    assert plain == {"test_props.py::test_records_a_property": "PASSED"}
    assert with_xml != plain and junit_footprint(log, xml, code) is not None
    # a property whose str() raises: pytest's junitxml stops the session with an internal error
    plain, *_ = _pytest_run(tmp_path, False)
    with_xml, log, xml, code = _pytest_run(tmp_path, True)
    assert "INTERNALERROR" in log and junit_footprint(log, xml, code) is not None
    # without any of the three, the record changes nothing: same per-test results, no trace
    plain, *_ = _pytest_run(tmp_path, False, "-k", "plain")
    with_xml, log, xml, code = _pytest_run(tmp_path, True, "-k", "plain")
    assert plain == with_xml == {"test_props.py::test_plain": "PASSED"}
    assert junit_footprint(log, xml, code) is None and junit_outcomes(xml) == {
        "test_props.test_plain": "PASSED"
    }


def test_the_graded_script_is_swebench_s_plus_two_lines(tasks_micro) -> None:
    from swe_rl.tasks.eval_script import official_script

    task = tasks_micro["swe-rl-micro__textkit-5"]
    official = official_script(task)
    g = Guard("0123456789abcdef", frozenset())
    for junit in (True, False):
        added = set(g.eval_script(official, junit).splitlines()) - set(official.splitlines())
        assert len(added) == (2 if junit else 1), added
        assert any(a.startswith("printf '%s\\n' \"$SWEBENCH_TEST_EXIT_CODE\" >") for a in added)
        assert not junit or any(a.startswith('export PYTEST_ADDOPTS="--junitxml=') for a in added)
    script = g.eval_script(official, True)  # the export sits right before the test output starts
    assert script.index("export PYTEST_ADDOPTS") < script.index(": '>>>>> Start Test Output'")
    assert script.index("git apply") < script.index("export PYTEST_ADDOPTS")


def _property_task() -> Task:
    """A generated task whose graded test records a junit property, run with -W error::pytest.PytestWarning:
    it passes in the official run and fails when --junitxml is on."""
    files = {
        "calc.py": "def add(a, b):\n    return a - b\n",
        "tests/test_calc.py": textwrap.dedent("""
            from calc import add


            def test_add(record_property):
                record_property("case", "2+3")
                assert add(2, 3) == 5
        """),
    }
    gold = (
        "diff --git a/calc.py b/calc.py\n--- a/calc.py\n+++ b/calc.py\n@@ -1,2 +1,2 @@\n"
        " def add(a, b):\n-    return a - b\n+    return a + b\n"
    )
    return Task(
        instance_id="h1__junit-property", repo="swe-rl/junit", base_commit="", problem_statement="add() subtracts",
        patch=gold, test_patch="", FAIL_TO_PASS=["tests/test_calc.py::test_add"], PASS_TO_PASS=[], version="0",
        image="swe-rl/base:bookworm", log_parser="parse_log_pytest", metadata={"files": files},
        eval_script="cd /testbed && python3 -m pytest -rA -p no:cacheprovider -W error::pytest.PytestWarning tests",
    )  # fmt: skip


@pytest.mark.docker
@pytest.mark.timeout(600)
async def test_a_gold_whose_test_meets_the_record_is_graded_without_it():
    task = _property_task()
    gold = await grade(task, task.patch, docker_factory(run_id="tasks-probe-rule"))
    integrity = gold.tests["integrity"]
    assert gold.resolved and integrity["junit"].startswith("dropped: a test used a junit property"), (
        integrity,
        gold.log[-2000:],
    )
    assert gold.suspicious == () and integrity["probe"]["status"] == "ran", integrity


@pytest.mark.docker
@pytest.mark.timeout(600)
async def test_a_probe_that_does_not_start_is_unavailable_and_changes_nothing(
    tasks_micro_images, tmp_path, monkeypatch
):
    broken = tmp_path / "broken_plugin.py"
    broken.write_text("raise RuntimeError('this probe is broken on purpose')\n")
    task = tasks_micro_images["swe-rl-micro__textkit-3"]
    factory = docker_factory(run_id="tasks-probe-rule")
    monkeypatch.setattr(trusted_check, "PLUGIN", broken)
    gold = await grade(task, task.patch, factory)
    probe = gold.tests["integrity"]["probe"]
    assert (gold.reward, gold.resolved, gold.suspicious) == (1.0, True, ()), (probe, gold.log[-1500:])
    assert probe["status"] == "unavailable" and "did not start" in probe["reason"], probe
    assert integrity_metrics([gold])["integrity/probe_unavailable"] == 1.0
    monkeypatch.undo()
    fine = await grade(task, task.patch, factory)
    assert fine.tests["integrity"]["probe"]["status"] == "ran" and fine.suspicious == ()
    assert integrity_metrics([fine])["integrity/probe_unavailable"] == 0.0
