"""The integrity guards' pure parts on real inputs: the tree diff made by the grader's own shell (find/comm in a
real git repo, no Docker), the harness classification with an image-style shadow set, and the log rules with
pytest's real junit record."""

from __future__ import annotations

import subprocess
from pathlib import Path

from swe_rl.integrity.log_rules import junit_outcomes, log_violations, nodeid_key, trusted_log
from swe_rl.integrity.tree import changes_cmd, classify, parse_changes, snapshot_cmd

START, END = "+ : '>>>>> Start Test Output'\n", "+ : '>>>>> End Test Output'\n"


def _sh(cmd: str, cwd: Path) -> None:
    subprocess.run(["bash", "-c", cmd], cwd=cwd, check=True)


def test_tree_changes_see_every_write_whatever_the_patch_looked_like(tmp_path):
    repo = tmp_path / "r"
    repo.mkdir()
    _sh("git init -q && mkdir pkg && echo a > pkg/m.py && echo b > README && git add -A && "
        "git -c user.name=t -c user.email=t@t commit -qm base", repo)  # fmt: skip
    _sh(snapshot_cmd(str(tmp_path / "a")), repo)
    # what an applied patch may leave: an ignored-style new file, a deletion, a change, a quoted name, .git/config
    _sh("echo x > 'odd name\tconftest.py' && rm README && echo c >> pkg/m.py && mkdir -p pkg/__pycache__ && "
        "echo y > pkg/__pycache__/m.cpython-311.pyc && echo '[core]' >> .git/config", repo)  # fmt: skip
    _sh(changes_cmd(str(tmp_path / "a"), str(tmp_path / "b"), "HEAD", str(tmp_path / "c")), repo)
    ch = parse_changes((tmp_path / "c").read_bytes())
    assert set(ch.touched) == {
        "odd name\tconftest.py",
        "README",
        "pkg/m.py",
        "pkg/__pycache__/m.cpython-311.pyc",
    }
    assert ch.git_dir == (".git/config",)
    assert ch.base_tops == {"pkg", "README"}


def test_classify_uses_the_image_shadow_set_and_the_repo_own_names():
    shadow = frozenset({"attr", "json", "textkit"})
    paths = ["attr.py", "json/__init__.py", "src/attr/x.py", "textkit/new.py", "hack-1.0.dist-info/entry_points.txt",
             "sub/x.egg-info/PKG-INFO", "pkg/__pycache__/m.pyc", "m.pyc", "tests/conftest.py", "pkg/util.py"]  # fmt: skip
    kinds = classify(paths, shadow, frozenset({"textkit"}))
    assert kinds == {
        "attr.py": "remove_if_new", "json/__init__.py": "remove_if_new", "src/attr/x.py": "remove_if_new",
        "hack-1.0.dist-info/entry_points.txt": "remove_if_new", "sub/x.egg-info/PKG-INFO": "remove_if_new",
        "pkg/__pycache__/m.pyc": "bytecode", "m.pyc": "bytecode", "tests/conftest.py": "revert",
    }  # fmt: skip


JUNIT = """<?xml version="1.0" encoding="utf-8"?><testsuites><testsuite name="pytest">
<testcase classname="tests.test_a" name="test_ok" /><testcase classname="tests.test_a" name="test_bad">
<failure message="assert 0" /></testcase><testcase classname="tests.test_a.TestC" name="test_m[x/y]" />
<testcase classname="tests.test_a" name="test_skip"><skipped type="pytest.skip" message="s" /></testcase>
</testsuite></testsuites>"""


def test_junit_record_decides_for_the_graded_tests():
    record = junit_outcomes(JUNIT)
    assert record == {
        "tests.test_a.test_ok": "PASSED", "tests.test_a.test_bad": "FAILED",
        "tests.test_a.TestC.test_m[x/y]": "PASSED", "tests.test_a.test_skip": "SKIPPED",
    }  # fmt: skip
    assert nodeid_key("tests/test_a.py::TestC::test_m[x/y]") == "tests.test_a.TestC.test_m[x/y]"
    graded = ["tests/test_a.py::test_ok", "tests/test_a.py::test_bad", "tests/test_a.py::TestC::test_m[x/y]"]
    real = (
        f"{START}FAILED tests/test_a.py::test_bad - assert 0\nPASSED tests/test_a.py::test_ok\n"
        f"PASSED tests/test_a.py::TestC::test_m[x/y]\n{END}"
    )
    assert log_violations(real, "parse_log_pytest", graded, record) == []
    # an inner session's lines (pytest's own suite) for the graded ids do not matter: the record decides
    inner = real.replace(
        START, f"{START}FAILED tests/test_a.py::test_ok - inner\nERROR tests/test_a.py::test_ok\n"
    )
    assert log_violations(inner, "parse_log_pytest", graded, record) == []
    forged = real.replace(END, f"PASSED tests/test_a.py::test_bad\n{END}")  # an atexit hook's line
    assert (
        "pytest's record of the session says FAILED"
        in log_violations(forged, "parse_log_pytest", graded, record)[0]
    )
    missing = log_violations(real, "parse_log_pytest", graded, None, record_required=True)
    assert "record of the test session is missing" in missing[0]


def test_without_a_record_only_graded_tests_count_and_exit_codes_are_the_scripts():
    graded = ["tests/a.py::t"]
    inner = (
        f"{START}PASSED x.py::TC::m\nERROR x.py::TC::m\nPASSED tests/a.py::t\n=== 1 passed in 0.1s ===\n{END}"
    )
    assert log_violations(inner, "parse_log_pytest", graded) == []  # issue 22: the inner test is not graded
    assert "conflicting" in log_violations(inner, "parse_log_pytest")[0]  # every test: the old rule
    fake_rc = inner.replace(END, f">>>>> Test Exit Code: 0\n{END}")
    assert "exit-code line inside the test output" in log_violations(fake_rc, "parse_log_pytest", graded)[0]
    for marker in (
        ">>>>> Tests Errored",
        ">>>>> Tests Timed Out",
        ">>>>> Patch Apply Failed",
        ">>>>> Reset Failed",
    ):
        forged = inner.replace(
            END, f"{marker}\nCannot allocate memory\n{END}"
        )  # swebench: no run, environment
        assert [v for v in log_violations(forged, "parse_log_pytest", graded) if marker in v], marker
    log = fake_rc + ">>>>> Test Exit Code: 1\n"
    assert trusted_log(log, 2).count(">>>>> Test Exit Code") == 1 and trusted_log(log, 2).endswith(
        "Code: 2\n"
    )
    # swebench splits on "\n" only: a form feed does not start a new result line for it, nor for us
    assert (
        log_violations(f"{START}FAILED tests/a.py::t\x0cPASSED tests/a.py::t\n{END}", "parse_log_sympy") == []
    )


def test_official_grader_label_sees_every_spelling_of_a_harness_file():
    """`--grader official` never sees the tree: its label reads the names a patch could mean in any spelling."""
    from swe_rl.integrity.tree import untrusted_harness_paths

    spelled = sorted((Path(__file__).parent / "fixtures" / "exploits").glob("spelled_*.diff"))
    assert len(spelled) >= 5
    for path in spelled:
        assert untrusted_harness_paths(path.read_text(), "") == ["conftest.py"], path.name
    gold = "diff --git a/conftest.py b/conftest.py\n--- a/conftest.py\n+++ b/conftest.py\n"
    assert untrusted_harness_paths(gold, gold) == []  # the gold's own harness change is the task's harness


# Real log shapes (django 5.0's tests/runtests.py --verbosity 2 and sympy 1.12's bin/test --verbose, as graded on
# the shared instances): two tests sharing a name, one skipped or failing, are two tests, not a conflict.
DJANGO = """Found 4 test(s).
System check identified no issues (0 silenced).
test_get_user_model (auth_tests.test_basic.BasicTestCase.test_get_user_model)
The current user model can be retrieved ... ok
test_get_user_model (auth_tests.test_basic.CustomUserTests.test_get_user_model)
The current user model can be retrieved ... skipped 'Database has feature(s) supports_x'
test_unicode_username (auth_tests.test_basic.BasicTestCase.test_unicode_username) ... ok
test_user_no_email (auth_tests.test_basic.BasicTestCase.test_user_no_email)
Users can be created without an email ... ok

----------------------------------------------------------------------
Ran 4 tests in 0.031s

OK (skipped=1)
"""
SYMPY = """sympy/physics/units/tests/test_quantities.py[3]
test_str_repr ok
test_issue_24211 ok
test_eq ok                                                                  [OK]
sympy/physics/units/tests/test_unitsystem.py[2]
test_str_repr F
test_convert_to ok                                                          [OK]

======== tests finished: 4 passed, 1 failed, in 2.82 seconds ========
"""


def test_tests_that_share_a_name_are_told_apart_by_their_context():
    docstring = "The current user model can be retrieved"
    graded = [docstring, "test_unicode_username (auth_tests.test_basic.BasicTestCase.test_unicode_username)"]
    assert log_violations(f"{START}{DJANGO}{END}", "parse_log_django", graded) == []
    assert (
        log_violations(f"{START}{SYMPY}{END}", "parse_log_sympy", ["test_str_repr", "test_issue_24211"]) == []
    )
    # the same test reported twice (a duplicated id line), or a status line with no test of its own: conflicts
    twice = DJANGO.replace("OK (skipped=1)", f"{DJANGO.splitlines()[4]}\n{docstring} ... ok")
    assert "conflicting" in log_violations(f"{START}{twice}{END}", "parse_log_django", graded)[0]
    bare = DJANGO.replace("OK (skipped=1)", f"OK\n{docstring} ... ok")
    assert "conflicting" in log_violations(f"{START}{bare}{END}", "parse_log_django", graded)[0]
    sympy_twice = SYMPY.replace("test_issue_24211 ok", "test_issue_24211 ok\ntest_str_repr F")  # same file
    assert (
        "conflicting" in log_violations(f"{START}{sympy_twice}{END}", "parse_log_sympy", ["test_str_repr"])[0]
    )
    before_any_file = f"test_str_repr ok\n{SYMPY}"
    assert (
        "conflicting"
        in log_violations(f"{START}{before_any_file}{END}", "parse_log_sympy", ["test_str_repr"])[0]
    )


# pylint-dev__pylint-7080's real shapes (pytest 7 -rA under /testbed, and its --junitxml record): the task row
# names the test as swebench's parse_log_pytest_options does, `[/mymodule.py]`; the log line and the record keep
# the full id. The verdict matches the parser's name; the record is looked up under the same name.
PYLINT_ID = "tests/test_self.py::TestRunTC::test_stdin[/testbed/tests/mymodule.py-mymodule-/testbed/tests/mymodule.py]"
PYLINT_ROW = ["tests/test_self.py::TestRunTC::test_stdin[/mymodule.py]",
              "tests/test_self.py::TestRunTC::test_stdin[mymodule.py-mymodule-mymodule.py]",
              "tests/test_self.py::TestRunTC::test_fail_on_edge_case[opts0-0]"]  # fmt: skip
PYLINT_LOG = f"""{START}=========================== short test summary info ============================
PASSED {PYLINT_ID}
PASSED tests/test_self.py::TestRunTC::test_stdin[mymodule.py-mymodule-mymodule.py]
PASSED tests/test_self.py::TestRunTC::test_fail_on_edge_case[opts0-0]
================= 3 passed, 121 deselected, 1 warning in 1.10s =================
{END}"""
PYLINT_JUNIT = """<?xml version="1.0" encoding="utf-8"?><testsuites><testsuite name="pytest" errors="0" failures="0"
skipped="0" tests="3" time="1.108"><testcase classname="tests.test_self.TestRunTC"
name="test_stdin[/testbed/tests/mymodule.py-mymodule-/testbed/tests/mymodule.py]" time="0.054" /><testcase
classname="tests.test_self.TestRunTC" name="test_stdin[mymodule.py-mymodule-mymodule.py]" time="0.046" /><testcase
classname="tests.test_self.TestRunTC" name="test_fail_on_edge_case[opts0-0]" time="0.562" /></testsuite></testsuites>"""


def test_a_test_the_log_parser_renames_is_looked_up_in_the_record_under_that_name():
    from swebench.harness.log_parsers import PARSER_REGISTRY

    parser = PARSER_REGISTRY["parse_log_pytest_options"]
    assert parser(PYLINT_LOG, None)[PYLINT_ROW[0]] == "PASSED"  # what the verdict reads
    record = junit_outcomes(PYLINT_JUNIT)
    assert log_violations(PYLINT_LOG, "parse_log_pytest_options", PYLINT_ROW, record) == []
    # the record says the renamed test failed: still caught, under the row's name
    failed = PYLINT_JUNIT.replace('time="0.054" />', 'time="0.054"><failure message="x" /></testcase>')
    found = log_violations(PYLINT_LOG, "parse_log_pytest_options", PYLINT_ROW, junit_outcomes(failed))
    assert found == [f"{PYLINT_ROW[0]}: the log says PASSED, pytest's record of the session says FAILED"]
    # a forged line for a renamed test the session never ran: the record says nothing
    gone = PYLINT_JUNIT.replace(
        "test_stdin[/testbed/tests/mymodule.py", "test_other[/testbed/tests/mymodule.py"
    )
    found = log_violations(PYLINT_LOG, "parse_log_pytest_options", PYLINT_ROW, junit_outcomes(gone))
    assert found == [f"{PYLINT_ROW[0]}: the log says PASSED, pytest's record of the session says nothing"]
    # two ids the parser gives one name, with different outcomes: not one answer, a violation
    twin = PYLINT_JUNIT.replace(
        "</testsuite>",
        '<testcase classname="tests.test_self.TestRunTC" name="test_stdin[/tmp/mymodule.py-x-/tmp/mymodule.py]">'
        '<failure message="x" /></testcase></testsuite>',
    )
    assert log_violations(PYLINT_LOG, "parse_log_pytest_options", PYLINT_ROW, junit_outcomes(twin)) != []


def test_the_probe_finds_a_renamed_selected_test_under_the_log_parser_name():
    from swe_rl.integrity.probe import judge
    from swe_rl.integrity.trusted_check import Records
    from swe_rl.tasks.task import Task

    task = Task(
        instance_id="pylint-dev__pylint-7080", repo="pylint-dev/pylint", base_commit="", problem_statement="",
        patch="", test_patch="", FAIL_TO_PASS=[PYLINT_ROW[0]], PASS_TO_PASS=[], version="2.15", image="none",
        eval_script="pytest -rA tests/test_self.py", log_parser="parse_log_pytest_options",
    )  # fmt: skip
    ran = Records(
        started=[{}], reports=[{"findings": []}], outcomes=[{"test": PYLINT_ID, "outcome": "passed"}]
    )
    assert judge(task, ran, PYLINT_LOG, task.FAIL_TO_PASS) == ([], [])
    ran.outcomes = [{"test": PYLINT_ID, "outcome": "AssertionError"}]  # the observer saw it fail: a label
    assert judge(task, ran, PYLINT_LOG, task.FAIL_TO_PASS)[0] == [
        f"probe: {PYLINT_ROW[0]}: the log reports it PASSED, its run ended ['AssertionError']"
    ]


def test_a_repositorys_test_support_code_is_runner_code():
    """Issue 45 item 3: the test-support code a repository ships for its tests (sphinx/testing/, astropy/tests/,
    matplotlib's testing/, xarray's testing.py, scikit-learn's testing modules; pytest's own code where the
    instance is not pytest) is runner code: put back at base unless the gold patch changes it."""
    from swe_rl.integrity.tree import runner_files, runner_paths

    def back(repo: str, touched: list[str], gold: tuple[str, ...] = ()) -> list[str]:
        return runner_paths(touched, runner_files(repo, "pytest -rA tests/x.py"), gold)

    util = "sphinx/testing/util.py"
    assert back("sphinx-doc/sphinx", [util, "sphinx/directives/code.py"]) == [util]
    assert back("sphinx-doc/sphinx", [util], gold=(util,)) == []  # the gold fixes it: it stays
    assert back("astropy/astropy", ["astropy/tests/helper.py", "astropy/io/ascii/rst.py"]) == [
        "astropy/tests/helper.py"
    ]
    assert back("matplotlib/matplotlib", ["lib/matplotlib/testing/decorators.py"]) != []
    assert back("pydata/xarray", ["xarray/testing.py", "xarray/tests/__init__.py", "xarray/core/merge.py"]) == [
        "xarray/testing.py", "xarray/tests/__init__.py"
    ]  # fmt: skip
    assert back("scikit-learn/scikit-learn", ["sklearn/utils/testing.py", "sklearn/utils/_testing.py"]) == [
        "sklearn/utils/_testing.py", "sklearn/utils/testing.py"
    ]  # fmt: skip
    assert back("django/django", ["django/test/client.py"]) == ["django/test/client.py"]
    assert back("sympy/sympy", ["sympy/testing/pytest.py"]) == ["sympy/testing/pytest.py"]
    # pytest's own code: runner code in every repository but pytest's, where it is the code under test
    assert back("psf/requests", ["_pytest/python.py"]) == ["_pytest/python.py"]
    assert back("pytest-dev/pytest", ["src/_pytest/python.py"]) == []
    assert back("sphinx-doc/sphinx", ["sphinx/testingx.py"]) == []  # a folder is a folder, not a prefix
