"""The grading room's public surface: what the trainers, evaluation and the rollout layer use to turn a patch
into a reward. The rest of the pipeline imports these names from `swe_rl.grading` and nothing from the modules
behind them or from `swe_rl.integrity` (tests/foundation/test_rooms.py); README.md says what this package owns.

Names resolve on first use, so importing one module of the package does not import all of them.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # the same names, for type checkers (at run time they resolve lazily below)
    from swe_rl.grading.cost import step_metrics
    from swe_rl.grading.dedup import DedupGrader
    from swe_rl.grading.failfast_policy import FailFastPolicy
    from swe_rl.grading.grade_run import grade_predictions
    from swe_rl.grading.grader import (
        EVAL_TIMEOUT,
        TRANSIENT_FAILURES,
        apply_under_guard,
        docker_factory,
        grade,
        grade_sync,
        prepare_sandbox,
        task_timeout,
        validation_shown,
    )
    from swe_rl.grading.official import run_official
    from swe_rl.grading.reward import (
        RewardResult,
        episode_flags,
        label_suspicious,
        patch_caused,
        police_episodes,
    )
    from swe_rl.grading.validate import attach_cached, validate_tasks, validate_tasks_sync
    from swe_rl.integrity.log_rules import log_violations
    from swe_rl.integrity.tree import check_official
    from swe_rl.integrity.tripwire import TestCode
    from swe_rl.tasks.validation import validation_of

# name -> the module that defines it (integrity's names are part of grading's surface: grading may import it)
_SURFACE = {
    "grade": "swe_rl.grading.grader",
    "grade_sync": "swe_rl.grading.grader",
    "docker_factory": "swe_rl.grading.grader",
    "prepare_sandbox": "swe_rl.grading.grader",
    "apply_under_guard": "swe_rl.grading.grader",
    "EVAL_TIMEOUT": "swe_rl.grading.grader",
    "TRANSIENT_FAILURES": "swe_rl.grading.grader",
    "task_timeout": "swe_rl.grading.grader",
    "RewardResult": "swe_rl.grading.reward",
    "label_suspicious": "swe_rl.grading.reward",
    "police_episodes": "swe_rl.grading.reward",
    "episode_flags": "swe_rl.grading.reward",
    "patch_caused": "swe_rl.grading.reward",
    "DedupGrader": "swe_rl.grading.dedup",
    "FailFastPolicy": "swe_rl.grading.failfast_policy",
    "step_metrics": "swe_rl.grading.cost",
    "grade_predictions": "swe_rl.grading.grade_run",
    "run_official": "swe_rl.grading.official",
    "check_official": "swe_rl.integrity.tree",
    "log_violations": "swe_rl.integrity.log_rules",
    "TestCode": "swe_rl.integrity.tripwire",
    "validation_shown": "swe_rl.grading.grader",
    "validate_tasks": "swe_rl.grading.validate",
    "validate_tasks_sync": "swe_rl.grading.validate",
    "attach_cached": "swe_rl.grading.validate",
    "validation_of": "swe_rl.tasks.validation",
}
__all__ = [  # the keys of _SURFACE (tests/foundation/test_rooms.py holds them equal)
    "EVAL_TIMEOUT",
    "TRANSIENT_FAILURES",
    "DedupGrader",
    "FailFastPolicy",
    "RewardResult",
    "TestCode",
    "apply_under_guard",
    "attach_cached",
    "check_official",
    "docker_factory",
    "episode_flags",
    "grade",
    "grade_predictions",
    "grade_sync",
    "label_suspicious",
    "log_violations",
    "patch_caused",
    "police_episodes",
    "prepare_sandbox",
    "run_official",
    "step_metrics",
    "task_timeout",
    "validate_tasks",
    "validate_tasks_sync",
    "validation_of",
    "validation_shown",
]


def __getattr__(name: str) -> Any:
    if name not in _SURFACE:
        raise AttributeError(f"module 'swe_rl.grading' has no attribute {name!r}")
    value = getattr(importlib.import_module(_SURFACE[name]), name)
    globals()[name] = value
    return value
