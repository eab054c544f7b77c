"""Grading: every gold patch resolves and the empty patch does not (the CI check), policy failures score 0,
infrastructure failures give reward None with a label; grading logic on logs with swebench's real functions."""

from __future__ import annotations

import asyncio

import pytest

from swe_rl.grading.grader import docker_factory, eval_script_for, grade, report_from_log
from swe_rl.grading.plan import plan_grading

LOG_OK = """+ : '>>>>> Start Test Output'
PASSED tests/test_a.py::test_fixed
PASSED tests/test_a.py::test_kept
+ SWEBENCH_TEST_EXIT_CODE=0
+ : '>>>>> End Test Output'
>>>>> Test Exit Code: 0
"""

GARBAGE = (
    "diff --git a/nowhere.py b/nowhere.py\n--- a/nowhere.py\n+++ b/nowhere.py\n@@ -1 +1 @@\n-old\n+new\n"
)


def _task(tasks_micro, **update):
    base = tasks_micro["swe-rl-micro__textkit-5"]
    return base.model_copy(update=update)


def test_report_from_log_uses_swebench_grading(tasks_micro):
    t = _task(
        tasks_micro, FAIL_TO_PASS=["tests/test_a.py::test_fixed"], PASS_TO_PASS=["tests/test_a.py::test_kept"]
    )
    rep = report_from_log(t, plan_grading(t), "diff", LOG_OK)
    assert rep["resolved"] is True and rep["patch_successfully_applied"] is True
    failed = report_from_log(
        t,
        plan_grading(t),
        "diff",
        LOG_OK.replace("PASSED tests/test_a.py::test_kept", "FAILED tests/test_a.py::test_kept"),
    )
    assert failed["resolved"] is False
    assert failed["tests_status"]["PASS_TO_PASS"]["failure"] == ["tests/test_a.py::test_kept"]
    # a log without the output markers is "not applied/ran" for swebench: never resolved
    assert (
        report_from_log(t, plan_grading(t), "diff", "PASSED tests/test_a.py::test_fixed\n")["resolved"]
        is False
    )


def test_bare_test_command_is_wrapped_with_markers(tasks_micro):
    t = _task(tasks_micro, eval_script="cd /testbed && python3 -m pytest -rA tests")
    script = eval_script_for(t)
    assert ">>>>> Start Test Output" in script and ">>>>> End Test Output" in script
    assert t.test_patch.splitlines()[0] in script  # the test patch is applied before the tests run
    micro = tasks_micro["swe-rl-micro__textkit-5"]
    assert eval_script_for(micro) == micro.eval_script  # SWE-bench scripts pass through unchanged


@pytest.mark.docker
@pytest.mark.timeout(600)
async def test_every_gold_resolves_and_empty_does_not(tasks_micro_images):
    factory, sem = docker_factory(run_id="tasks-ci"), asyncio.Semaphore(2)

    async def one(task, patch):
        async with sem:
            return task.instance_id, bool(patch), await grade(task, patch, factory)

    jobs = [one(t, p) for t in tasks_micro_images.values() for p in (t.patch, "")]
    results = await asyncio.gather(*jobs)
    for iid, is_gold, r in results:
        assert r.failure is None, (iid, r.failure, r.log[-1000:])
        assert r.resolved is is_gold and r.reward == (1.0 if is_gold else 0.0), (iid, is_gold, r.tests)
        if not is_gold:  # the empty patch really ran the tests: every FAIL_TO_PASS test failed
            assert r.tests["tests_status"]["FAIL_TO_PASS"]["success"] == [], iid


@pytest.mark.docker
@pytest.mark.timeout(300)
async def test_policy_and_infra_failures_are_told_apart(tasks_micro_images, tasks_wrong_patch):
    factory = docker_factory(run_id="tasks-ci")
    t = tasks_micro_images["swe-rl-micro__textkit-5"]
    garbage = await grade(t, GARBAGE, factory)  # does not apply: the policy's fault, not infrastructure
    assert (garbage.reward, garbage.failure) == (0.0, None)
    shifted = await grade(
        t, t.patch.replace("@@ -", "@@ -9"), factory
    )  # wrong line numbers: fallbacks apply it
    assert shifted.resolved is True
    assert garbage.tests["patch_successfully_applied"] is False
    wrong = await grade(t, tasks_wrong_patch, factory)  # applies, fixes nothing
    assert (wrong.reward, wrong.failure, wrong.tests["patch_successfully_applied"]) == (0.0, None, True)
    none = await grade(t, None, factory)
    assert none.reward == 0.0 and none.tests["patch_is_None"] is True

    missing = await grade(t.model_copy(update={"image": "swe-rl/does-not-exist:never"}), t.patch, factory)
    assert missing.reward is None and missing.failure == "image_missing"

    slow = t.model_copy(
        update={"eval_script": t.eval_script.replace("python3 -m pytest", "sleep 60; python3 -m pytest")}
    )
    timed = await grade(slow, t.patch, factory, timeout=3)
    assert timed.reward is None and timed.failure == "test_timeout"


@pytest.mark.docker
@pytest.mark.timeout(300)
async def test_generated_tasks_grade_with_the_same_path():
    from swe_rl.tasks.generator import generate_tasks

    factory = docker_factory(run_id="tasks-ci")
    (t,) = generate_tasks(1, "train", seed=3)
    gold, empty = await grade(t, t.patch, factory), await grade(t, "", factory)
    assert (gold.reward, empty.reward) == (1.0, 0.0)
    assert empty.tests["tests_status"]["FAIL_TO_PASS"]["failure"] == t.FAIL_TO_PASS


class _LosesEvalLog:
    """A real Docker sandbox whose eval script's output stream comes back empty, as Docker's exec stream did under
    load (issue 27; a named fault injection: the loss cannot be induced on demand)."""

    def __init__(self, inner):
        self.inner = inner

    async def __aenter__(self):
        await self.inner.__aenter__()
        return self

    async def __aexit__(self, *exc):
        return await self.inner.__aexit__(*exc)

    def __getattr__(self, name):
        return getattr(self.inner, name)

    async def exec_once(self, cmd: str, **kw):
        import dataclasses

        from swe_rl.tasks.eval_script import EVAL_FILE

        res = await self.inner.exec_once(cmd, **kw)
        return dataclasses.replace(res, output="", output_total=0) if f"/bin/bash {EVAL_FILE}" in cmd else res


@pytest.mark.docker
@pytest.mark.timeout(300)
async def test_a_lost_eval_log_is_graded_again_and_never_resolves(tasks_micro_images):
    """Before: the lost log (only the exit-code line the guard appends) was an integrity violation, a gold patch
    scored 0 (test_killed_actor_gives_the_same_report_without_duplicates under load). Now: eval_output_lost,
    graded again in a fresh sandbox; lost in every attempt, unresolved with a violation that says so."""
    from sandboxes.config import make_sandbox

    t = tasks_micro_images["swe-rl-micro__textkit-5"]
    made: list[bool] = []

    def factory_losing(first_n: int):
        def factory(task):
            made.append(len(made) < first_n)
            sb = make_sandbox({"backend": "docker"}, image=task.image, run_id="tasks-ci")
            return _LosesEvalLog(sb) if made[-1] else sb

        return factory

    once = await grade(t, t.patch, factory_losing(1))
    assert (once.reward, once.resolved, once.failure) == (1.0, True, None), once.log[-2000:]
    assert made == [True, False] and "[grading attempt 1: eval_output_lost]" in once.log
    made.clear()
    always = await grade(t, t.patch, factory_losing(9))
    assert (always.reward, always.resolved, always.failure) == (0.0, False, None)
    assert made == [True, True]
    assert always.tests["integrity"]["violations"] == [
        "the eval script's output was empty in all 2 grading attempts"
    ]


# Prepended to the test command: SIGKILL the shell that runs the eval script (the one-shot exec's `bash --noprofile
# --norc -c ...`, the eval script's parent) while the script runs under it, when the sandbox was made with the
# variable set.
KILL_SHELL = (
    'if [ "${SWE_RL_TEST_KILL_SHELL:-}" = 1 ]; then '
    '[ "$(tr "\\0" " " < /proc/$PPID/cmdline | cut -c1-27)" = "bash --noprofile --norc -c " ] && kill -9 $PPID; '
    "sleep 5; fi; "
)


@pytest.mark.docker
@pytest.mark.timeout(300)
async def test_a_shell_that_dies_under_the_tests_is_no_verdict_and_is_graded_again(tasks_micro_images):
    """Before: the cut-short log read as failing tests, a gold patch scored 0. Now: eval_interrupted (reward None),
    graded once more in a fresh sandbox."""
    from sandboxes.config import make_sandbox

    t = tasks_micro_images["swe-rl-micro__textkit-5"]
    dying = t.model_copy(
        update={"eval_script": t.eval_script.replace("python3 -m pytest", KILL_SHELL + "python3 -m pytest")}
    )
    made: list[bool] = []

    def factory_killing(first_n: int):
        def factory(task):
            made.append(len(made) < first_n)
            env = {"SWE_RL_TEST_KILL_SHELL": "1"} if made[-1] else {}
            return make_sandbox({"backend": "docker", "env": env}, image=task.image, run_id="tasks-ci")

        return factory

    once = await grade(
        dying, t.patch, factory_killing(1)
    )  # the first sandbox's shell dies, the second is fine
    assert (once.reward, once.resolved, once.failure) == (1.0, True, None), once.log[-2000:]
    assert made == [True, False] and "[grading attempt 1: eval_interrupted]" in once.log

    made.clear()
    always = await grade(dying, t.patch, factory_killing(9))
    assert (always.reward, always.resolved, always.failure) == (None, False, "eval_interrupted")
    assert made == [True, True] and "[grading attempt 2]" in always.log

    made.clear()
    single = await grade(dying, t.patch, factory_killing(9), attempts=1)
    assert single.failure == "eval_interrupted" and made == [True]
    with pytest.raises(ValueError, match="attempts"):
        await grade(t, t.patch, factory_killing(0), attempts=0)
