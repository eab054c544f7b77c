"""`plan_grading(task)`: the GradingPlan of one grading, built once; every step of swe_rl.grading.grader takes it.

swebench's make_test_spec runs here and nowhere else in a grading: the eval script, its test command, the runner
files, the files the test patch creates, the fail-fast selection and the probe's observer are all read from it.
"""

from __future__ import annotations

from swe_rl.grading.failfast import narrowed_script
from swe_rl.integrity.log_rules import pytest_command, test_section
from swe_rl.integrity.probe import probe_kind, tox_current_env
from swe_rl.integrity.tree import runner_files
from swe_rl.tasks.eval_script import created_paths, instance_dict, patched_paths
from swe_rl.tasks.grading_plan import GradingPlan
from swe_rl.tasks.task import Task


def plan_grading(task: Task, *, fail_fast: bool = True) -> GradingPlan:
    """The plan of grading `task` (`fail_fast=False`: no pre-run's script is made)."""
    from swebench.harness.utils import make_test_spec

    spec = make_test_spec(instance_dict(task))
    script = spec.eval_script
    command = test_section(script)
    graded = [*task.FAIL_TO_PASS, *task.PASS_TO_PASS]
    return GradingPlan(
        spec=spec,
        script=script,
        test_command=command,
        runner_files=frozenset(runner_files(task.repo, command)),
        gold_paths=tuple(patched_paths(task.patch)),
        test_files=tuple(created_paths(task.test_patch)),
        # pytest's record is compared by node id, and tox filters the environment that would carry it
        junit=pytest_command(command) and all("::" in t for t in graded),
        failfast_script=narrowed_script(task, script) if fail_fast else None,
        probe_kind=probe_kind(task, command),
        tox=tox_current_env(command),
    )
