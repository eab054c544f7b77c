"""R2E-Gym's grading, for tasks adapted from R2E-Gym rows: its pytest log parser and its exact-match reward.

Ported from R2E-Gym (src/r2egym/repo_analysis/execution_log_parser.py `parse_log_pytest` and
agenthub/runtime/docker.py `_calculate_reward_r2e`); swebench has no parser for this format, so this is the one
parser we carry. Reward 1.0 only when the parsed {test: status} map equals the row's expected map.
"""

from __future__ import annotations

import re
from typing import Any

_ANSI = re.compile(r"\x1b\[[0-9;]*m|\r")


def parse_log_r2e_gym(log: str) -> dict[str, str]:
    """Test name ("Class.test" / "test") -> PASSED | FAILED | ERROR, from pytest's short test summary."""
    log = _ANSI.sub("", log)
    if "short test summary info" not in log:
        return {}
    status_map = {}
    for line in log.split("short test summary info")[1].strip().split("\n"):
        name = ".".join(line.split("::")[1:])
        if "PASSED" in line:
            status_map[name] = "PASSED"
        elif "FAILED" in line:
            status_map[name.split(" - ")[0]] = "FAILED"
        elif "ERROR" in line:
            status_map[name.split(" - ")[0]] = "ERROR"
    return status_map


def r2e_report(log: str, expected: dict[str, str]) -> dict[str, Any]:
    """R2E-Gym's comparison: same number of tests and the same status for each, keys cut at " - "."""
    parsed = {k.split(" - ")[0]: v for k, v in parse_log_r2e_gym(log).items()}
    mismatched = sorted(k for k in expected if parsed.get(k) != expected[k])
    unexpected = sorted(set(parsed) - set(expected))
    resolved = len(parsed) == len(expected) and not mismatched and not unexpected
    return {
        "patch_successfully_applied": True,
        "resolved": resolved,
        "r2e": {"parsed": parsed, "mismatched": mismatched, "unexpected": unexpected},
    }
