"""Fail-fast test selection per runner (swe_rl.grading.failfast) and its verdicts against the full run.

The commands below are written the way swebench's specs write them (pytest ids, django's runtests.py labels,
sympy's bin/test files, tox with `--`); tests/real/test_real_failfast.py runs the same selection on the real
instances' own eval scripts. The Docker tests grade every micro-suite gold patch and every red-team exploit of
the suite with and without fail-fast and require the same verdict."""

from __future__ import annotations

import asyncio

import pytest

from swe_rl.grading import failfast as ff
from swe_rl.grading import install_skip as inst
from swe_rl.grading.plan import plan_grading
from swe_rl.tasks.task import Task

DJANGO = "./tests/runtests.py --verbosity 2 --settings=test_sqlite --parallel 1 migrations.test_optimizer"
SYMPY = (
    "PYTHONWARNINGS='ignore::UserWarning' bin/test -C --verbose sympy/physics/units/tests/test_quantities.py"
)
TOX = "tox --current-env -epy39 -v -- tests/test_directive_code.py"


def task(parser: str, f2p: list[str], version: str = "", command: str = "pytest -rA tests/test_a.py") -> Task:
    script = (
        "#!/bin/bash\nset -uxo pipefail\nsource /opt/miniconda3/bin/activate\nconda activate testbed\ncd /testbed\n"
        "git status\ngit show\ngit -c core.fileMode=false diff abc123\npython -m pip install -e .\n"
        f"git checkout abc123 tests/test_a.py\n: '>>>>> Start Test Output'\n{command}\n"
        ": '>>>>> End Test Output'\ngit checkout abc123 tests/test_a.py\n"
    )
    return Task(
        instance_id="x__y-1", FAIL_TO_PASS=f2p, log_parser=parser, version=version, eval_script=script
    )


def test_pytest_ids_are_selected_without_their_parameters():
    t = task(
        "parse_log_pytest",
        ["tests/test_a.py::test_x[a-b]", "tests/test_a.py::T::test_y", "tests/test_a.py::test_x[c"],
    )
    assert (
        ff.select_command(t, "pytest -rA tests/test_a.py")
        == "pytest -rA tests/test_a.py::test_x tests/test_a.py::T::test_y"
    )
    # an F2P test outside the command's paths, or a name that is no node id: no selection (the full run)
    assert ff.select_command(t, "pytest -rA tests/test_b.py") is None
    assert ff.select_command(task("parse_log_pytest", ["test_x"]), "pytest -rA tests/test_a.py") is None
    # a directory argument covers the files under it
    assert ff.select_command(t, "pytest tests") == "pytest tests/test_a.py::test_x tests/test_a.py::T::test_y"


def test_tox_passes_the_selection_after_the_double_dash():
    t = task("parse_log_sphinx", ["tests/test_directive_code.py::test_dedent"])
    assert (
        ff.select_command(t, TOX)
        == "tox --current-env -epy39 -v -- tests/test_directive_code.py::test_dedent"
    )
    assert ff.select_command(t, "tox --current-env -epy39 -v") is None


def test_django_labels_from_both_name_forms_and_no_selection_for_docstrings():
    old, new = (
        "test_a (migrations.test_optimizer.OptimizerTests)",
        "test_b (migrations.test_optimizer.OptimizerTests.test_b)",
    )
    t = task("parse_log_django", [old, new])
    assert ff.select_command(t, DJANGO) == DJANGO.rsplit(" ", 1)[0] + (
        " migrations.test_optimizer.OptimizerTests.test_a migrations.test_optimizer.OptimizerTests.test_b"
    )
    assert (
        ff.select_command(
            task("parse_log_django", [old, "AlterField should optimize into AddField."]), DJANGO
        )
        is None
    )
    assert (
        ff.select_command(task("parse_log_django", ["test_c (auth_tests.test_basic.T.test_c)"]), DJANGO)
        is None
    )


def test_sympy_keywords_and_old_bin_test():
    t = task("parse_log_sympy", ["test_issue_24211", "test_eq"], version="1.12")
    assert ff.select_command(t, SYMPY) == SYMPY + " -k test_issue_24211 test_eq"
    # before argparse, bin/test took one keyword: several F2P tests get no selection there, one still does
    assert ff.select_command(task("parse_log_sympy", ["test_a", "test_b"], version="1.1"), SYMPY) is None
    assert (
        ff.select_command(task("parse_log_sympy", ["test_a"], version="1.1"), SYMPY) == SYMPY + " -k test_a"
    )
    assert ff.select_command(task("parse_log_sympy", ["test_a (x)"], version="1.12"), SYMPY) is None


def test_other_runners_get_no_pre_run():
    assert ff.select_command(task("parse_log_gotest", ["TestX"]), "go test ./...") is None
    assert ff.select_command(task("parse_log_pytest", []), "pytest tests") is None
    assert (
        ff.pre_run_script(
            task("parse_log_gotest", ["TestX"], command="go test ./..."), task("x", []).eval_script, [], ""
        )
        is None
    )


def test_plan_skips_the_install_only_for_a_patch_it_cannot_concern():
    t = task("parse_log_pytest", ["tests/test_a.py::test_x"])
    setup_cfg = "[metadata]\nversion = attr: pkg.__version__\n[options]\npackages = find:\n"
    neutral = ff.pre_run_script(t, t.eval_script, ["pkg/core.py", "tests/test_a.py"], setup_cfg)
    assert neutral is not None and "python -I -c" in neutral.script and "pkg" in neutral.install
    assert (
        "else python -m pip install -e .; fi" in neutral.script
    )  # the install still runs when pkg is not at /testbed
    assert "\ngit status\n" not in neutral.script and "pytest -rA tests/test_a.py::test_x\n" in neutral.script
    for touched in (["setup.py"], ["pkg/__init__.py"], ["pkg/ext.pyx"], ["newmod.py"], ["src/x.py"]):
        p = ff.pre_run_script(t, t.eval_script, touched, setup_cfg)
        assert p is not None and p.install == "kept" and "python -I -c" not in p.script, touched
    assert (
        ff.pre_run_script(t, t.eval_script, None, setup_cfg).install == "kept"
    )  # no tree guard: nothing is known
    # setup.py reading a file by name (os.path.join('pkg', 'release.py')) keeps the install for that file
    assert (
        inst.packages_to_check(["pkg/release.py"], "exec(open(os.path.join('pkg', 'release.py')).read())")
        is None
    )
    assert inst.packages_to_check(["src/pkg/a.py", "docs/x.rst"], "") == ["pkg"]


def test_other_install_steps_always_run():
    t = task("parse_log_pytest", ["tests/test_a.py::test_x"])
    for line in (
        "python setup.py develop",
        "python -m pip install -v --no-build-isolation -e . && make",
        "pip install .",
    ):
        script = t.eval_script.replace("python -m pip install -e .", line)
        p = ff.pre_run_script(t, script, [], "")
        assert p is not None and p.install in ("kept", "none") and "python -I -c" not in p.script, line
    assert inst.install_lines(t.eval_script.replace("-e .", "--editable .[test]")) == [
        "python -m pip install --editable .[test]"
    ]


def log(lines: str, code: int = 1) -> str:
    return f"+ pytest\n+ : '>>>>> Start Test Output'\n{lines}\n+ : '>>>>> End Test Output'\n>>>>> Test Exit Code: {code}\n"


def test_only_an_explicit_failure_decides():
    t = task("parse_log_pytest", ["tests/test_a.py::test_x", "tests/test_a.py::test_y[p"])
    failed = ff.judge(
        t,
        plan_grading(t),
        "",
        log("PASSED tests/test_a.py::test_y[p1]\nFAILED tests/test_a.py::test_x - assert 0"),
        "none",
    )
    assert failed.outcome == "failed" and failed.failed == ("tests/test_a.py::test_x",)
    assert failed.report and failed.report["resolved"] is False
    assert failed.report["tests_status"]["PASS_TO_PASS"] == {"success": [], "failure": []}
    passed = ff.judge(
        t,
        plan_grading(t),
        "",
        log("PASSED tests/test_a.py::test_x\nPASSED tests/test_a.py::test_y[p1]", 0),
        "none",
    )
    assert passed.outcome == "passed"
    # missing or skipped: the full run decides; a truncated id fails only when every match fails
    assert (
        ff.judge(
            t,
            plan_grading(t),
            "",
            log("PASSED tests/test_a.py::test_x\nSKIPPED tests/test_a.py::test_y[p1]", 0),
            "",
        ).outcome
        == "passed"
    )
    assert (
        ff.judge(t, plan_grading(t), "", log("PASSED tests/test_a.py::test_y[p1]", 0), "").outcome == "passed"
    )
    mixed = "PASSED tests/test_a.py::test_x\nPASSED tests/test_a.py::test_y[p1]\nFAILED tests/test_a.py::test_y[p2]"
    assert ff.judge(t, plan_grading(t), "", log(mixed), "").outcome == "passed"
    assert (
        ff.judge(
            t,
            plan_grading(t),
            "",
            log("FAILED tests/test_a.py::test_y[p1]\nPASSED tests/test_a.py::test_x"),
            "",
        ).outcome
        == "failed"
    )
    # a log swebench rejects (no markers) or one that breaks a log guard decides nothing
    assert ff.judge(t, plan_grading(t), "", "FAILED tests/test_a.py::test_x\n", "").outcome == "undecided"
    twice = log("FAILED tests/test_a.py::test_x\nPASSED tests/test_a.py::test_x")
    assert ff.judge(t, plan_grading(t), "", twice, "").outcome == "undecided"


async def _cases(tasks_micro_images) -> list[tuple[Task, str, str]]:
    """(task, name, patch): every micro gold, and every red-team patch of tests/tasks on its task (issue 25's
    exploits and the reward hacks: none fixes the bug)."""
    from tests.tasks.test_integrity_exploits import EXPLOITS, TASK, _recipe_patches, _spelled
    from tests.tasks.test_reward_hacks import HACKS, _patches

    exploit_task = tasks_micro_images[TASK]
    exploits = _spelled() | await _recipe_patches(exploit_task, sorted(p.stem for p in EXPLOITS.glob("*.sh")))
    exploits |= await _patches(exploit_task.image, HACKS, exploit_task.patch)
    return [(t, "gold", t.patch) for t in tasks_micro_images.values()] + [
        (exploit_task, name, p) for name, p in exploits.items()
    ]


async def _grade_all(cases, fail_fast: bool):
    from swe_rl.grading.grader import docker_factory, grade

    factory, sem = docker_factory(run_id="tasks-failfast"), asyncio.Semaphore(2)

    async def one(t: Task, patch: str):
        async with sem:
            return await grade(t, patch, factory, fail_fast=fail_fast)

    return await asyncio.gather(*(one(t, p) for t, _, p in cases))


def _check_fast(cases, fast) -> None:
    """What fail-fast must report beside the verdict: golds went on to the full run, most exploits stopped
    in the pre-run (they leave the bug), a stop skipped the graded run, every report has its cost."""
    for (t, name, _), b in zip(cases, fast, strict=True):
        assert {"start", "close", "total"} <= set(b.tests["cost"]), (t.instance_id, name, b.tests["cost"])
        if "failed" in b.tests.get("fail_fast", {}):
            assert "failfast" in b.tests["cost"] and "test_run" not in b.tests["cost"], name
    golds = [b for (_, name, _), b in zip(cases, fast, strict=True) if name == "gold"]
    assert all(g.tests["fail_fast"]["pre_run"] == "passed" for g in golds)
    stopped = [
        n for (_, n, _), b in zip(cases, fast, strict=True) if "failed" in b.tests.get("fail_fast", {})
    ]
    assert len(stopped) >= (len(cases) - len(golds)) // 2, stopped


@pytest.mark.docker
@pytest.mark.slow  # make test's 15-minute budget (2026-12-05: 37 s, its heaviest test); .ci/run still runs it
@pytest.mark.ci_slow
@pytest.mark.timeout(1200)
async def test_fail_fast_gives_the_full_runs_verdicts_on_golds_and_exploits(tasks_micro_images):
    """The full run's verdicts on these patches are asserted by their own tests (test_integrity_exploits,
    test_reward_hacks: reward 0, no failure label; every gold resolves with no label): fail-fast gives the
    same. The slow test below grades both ways side by side."""
    cases = await _cases(tasks_micro_images)
    fast = await _grade_all(cases, fail_fast=True)
    for (t, name, _), b in zip(cases, fast, strict=True):
        want = (1.0, True, None, False) if name == "gold" else (0.0, False, None, None)
        got = (b.reward, b.resolved, b.failure, bool(b.suspicious) if name == "gold" else None)
        assert got == want, (t.instance_id, name, b.tests.get("fail_fast"), b.log[-800:])
    _check_fast(cases, fast)


@pytest.mark.slow
@pytest.mark.docker
@pytest.mark.timeout(2400)
async def test_fail_fast_verdicts_equal_the_full_run_side_by_side(tasks_micro_images):
    cases = await _cases(tasks_micro_images)
    full, fast = await _grade_all(cases, fail_fast=False), await _grade_all(cases, fail_fast=True)
    for (t, name, _), a, b in zip(cases, full, fast, strict=True):
        key = (t.instance_id, name)
        assert (a.reward, a.resolved, a.failure) == (b.reward, b.resolved, b.failure), (
            key,
            a.log[-800:],
            b.log[-800:],
        )
        assert bool(a.suspicious) == bool(b.suspicious), (key, a.suspicious, b.suspicious)
    _check_fast(cases, fast)


def test_sympy_pre_run_reads_its_last_test():
    """bin/test ends its last test's line with the file's verdict, which swebench's parser does not read: a pre-run
    selecting one test always ends on it (found on sympy__sympy-24661's no-op patch: the pre-run could not decide)."""
    t = task("parse_log_sympy", ["test_issue_24288"], version="1.12")
    body = "sympy/parsing/tests/test_sympy_parser.py[1] \ntest_issue_24288 F                              [FAIL]\n"
    assert ff.judge(t, plan_grading(t), "", log(body), "").outcome == "failed"
    assert (
        ff.judge(
            t, plan_grading(t), "", log(body.replace(" F ", " ok ").replace("FAIL", "OK"), 0), ""
        ).outcome
        == "passed"
    )
