"""`RewardResult`: what grading hands the trainer and the evaluation harness."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True)
class RewardResult:
    reward: float | None  # None = unscorable (infrastructure failure): masked out, never scored 0
    resolved: bool
    tests: dict[str, Any] = field(default_factory=dict)  # swebench-style FAIL_TO_PASS / PASS_TO_PASS report
    log: str = ""  # test output (capped)
    failure: str | None = None  # infra failure label ("image_missing", "sandbox_died", "test_timeout", ...)
