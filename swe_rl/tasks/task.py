"""`Task`: one SWE-bench 5.x instance. The single home of the task type; loaders and grading build on it."""

from __future__ import annotations

import json
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, field_validator


def _json_list(value: Any) -> list[str]:
    # SWE-bench stores FAIL_TO_PASS / PASS_TO_PASS as JSON-encoded strings; other sources use real lists.
    if isinstance(value, str):
        try:
            value = json.loads(value) if value.strip() else []
        except json.JSONDecodeError as e:
            raise ValueError(
                f"expected a JSON list of test names, got a string that is not JSON ({e.msg})"
            ) from e
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise ValueError(f"expected a list of test-name strings, got {type(value).__name__}")
    return value


class Task(BaseModel):
    """A SWE-bench 5.x instance (field names as upstream) plus our `metadata` bag."""

    model_config = ConfigDict(frozen=True, extra="ignore")

    instance_id: str = Field(min_length=1)
    repo: str = ""  # "owner/name"
    base_commit: str = ""
    problem_statement: str = ""
    patch: str = ""  # gold patch (source only)
    test_patch: str = ""
    FAIL_TO_PASS: list[str] = Field(default_factory=list)
    PASS_TO_PASS: list[str] = Field(default_factory=list)
    version: str = ""
    image: str = ""  # container image the task runs in (prebuilt or built locally)
    eval_script: str = ""  # shell script run in /testbed that applies test_patch and runs the tests
    log_parser: str = ""  # name of the swebench log parser (e.g. "parse_log_pytest")
    eval_type: str = "pass_and_fail"  # swebench EvalType value
    hints_text: str = ""
    created_at: str = ""
    environment_setup_commit: str = ""
    metadata: dict[str, Any] = Field(default_factory=dict)

    @field_validator("FAIL_TO_PASS", "PASS_TO_PASS", mode="before")
    @classmethod
    def _parse_lists(cls, v: Any) -> list[str]:
        return _json_list(v)
