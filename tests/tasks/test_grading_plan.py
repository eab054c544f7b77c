"""One grading builds its plan once: swebench's make_test_spec (the eval script and everything read from it) runs
once per grading, however many sandboxes and runs the grading takes (fail-fast pre-run, a fresh sandbox for the
full run, graded run, verdict, probe run)."""

from __future__ import annotations

import dataclasses

import pytest

from swe_rl.grading.plan import plan_grading


def test_the_plan_is_immutable_and_holds_what_the_steps_read(tasks_micro):
    task = next(iter(tasks_micro.values()))
    plan = plan_grading(task)
    assert plan.script == plan.spec.eval_script and plan.test_command.strip() in plan.script
    assert plan.probe_kind == "pytest" and plan.junit and plan.failfast_script
    assert plan_grading(task, fail_fast=False).failfast_script is None
    with pytest.raises(dataclasses.FrozenInstanceError):
        plan.script = ""  # type: ignore[misc]


@pytest.mark.docker
@pytest.mark.timeout(600)
@pytest.mark.parametrize("fail_fast", [False, True])
async def test_the_eval_script_is_built_once_per_grading(tasks_micro_images, monkeypatch, fail_fast):
    import swebench.harness.utils as swebench_utils

    from swe_rl.grading.grader import docker_factory, grade

    built = []
    make_test_spec = swebench_utils.make_test_spec

    def counted(*args, **kw):
        built.append(args[0]["instance_id"])
        return make_test_spec(*args, **kw)

    monkeypatch.setattr(swebench_utils, "make_test_spec", counted)
    task = next(iter(tasks_micro_images.values()))
    result = await grade(task, task.patch, docker_factory(run_id="tasks-plan"), fail_fast=fail_fast)
    # the gold resolves: every step ran (with fail-fast: the pre-run, then the full run in a fresh sandbox)
    assert result.resolved and result.tests["integrity"]["probe"]["status"] == "ran", result.log[-800:]
    assert ("fail_fast" in result.tests) == fail_fast
    assert built == [task.instance_id]
