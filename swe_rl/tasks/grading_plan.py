"""The plan of one grading: everything its steps read about the task, computed once before the first sandbox.

The value lives here, beside the task, so that every room that runs a step (swe_rl.grading, swe_rl.integrity)
can take it without importing the room that builds it; swe_rl.grading.plan.plan_grading fills it in.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class GradingPlan:
    """What one grading of a task runs and guards. Built once per grading (all its attempts and sandboxes)."""

    spec: Any  # swebench's TestSpec of the instance (make_test_spec): what its report functions read
    script: str  # the official eval script (spec.eval_script), before its editable install is guarded
    test_command: str  # the script's lines between the test output markers
    runner_files: frozenset[str]  # the test runner's files (django's, sympy's, the scripts the command runs)
    gold_paths: tuple[str, ...]  # the paths the gold patch changes (runner or test files it changes stay)
    test_files: tuple[str, ...]  # the files the test patch creates
    junit: bool  # whether the graded run adds pytest's junit record of the outer session
    failfast_script: (
        str | None
    )  # the F2P-only pre-run's script; None: no fail-fast, or the runner cannot select
    probe_kind: str | None  # the probe run's observer ("pytest" | "unittest" | "sympy"); None: no probe run
    tox: bool  # the tests run through `tox --current-env` (the observer's folder goes on the Python's path)
