"""Grader integrity: judge what the tests really did, not what a patch-supplied plugin or printout claims.

Two guards, shared by every place a reward is computed (swe_rl.tasks.grading.grade, hence `swe-rl grade`, the
evaluation harness, rollouts and the OpenRLHF executor; the built-in trainer's CachedGrader calls them too):

1. Trusted test harness. SWE-bench's eval script already resets the files of the test patch to the base commit
   before applying it, so edits to the tests themselves never count. We extend that to the files that steer pytest
   without being tests: every `conftest.py`, pytest configuration (pytest.ini, .pytest.ini, tox.ini, setup.cfg,
   pyproject.toml), new `sitecustomize`/`usercustomize`/`.pth` files, and new top-level modules that shadow pytest,
   its dependencies or the standard library (`python -m pytest` puts the repo root first on sys.path). Where the
   agent's patch touches one, the file is reset to the base commit *plus the gold patch's change to it*, i.e. to
   what the task's own fix makes of it: the gold patch is graded exactly as the official harness grades it, and
   every other patch is judged with the task's harness. The reset paths are reported (`harness_restored`).
2. Log consistency. After the run the log must hold exactly one start and one end marker, no test may be
   reported with two different statuses (a plugin or an atexit hook printing "PASSED ..." after the real result),
   and pytest's own summary must count at least as many passed tests as the log lists. A violation makes the
   result unresolved (reward 0) with the violations listed (`violations`).

Not covered: code under test (the agent's fix itself) runs inside the pytest process and can, with enough effort,
patch pytest at import time or rewrite the whole log consistently; see sandboxes/README.md, "Integrity".
"""

from __future__ import annotations

import dataclasses
import re
import shlex
import sys
from typing import Any

CONFIG_FILES = frozenset({"pytest.ini", ".pytest.ini", "tox.ini", "setup.cfg", "pyproject.toml"})
# `test` is the standard library's regression-test package but also many repos' test folder: pytest never imports it
_SHADOWED = (frozenset(sys.stdlib_module_names) - {"test"}) | {
    "pytest", "_pytest", "pluggy", "py", "iniconfig", "packaging", "exceptiongroup", "tomli", "colorama",
    "xdist", "pytest_xdist", "hypothesis", "coverage", "pytest_cov", "sitecustomize", "usercustomize",
}  # fmt: skip
_DIFF_PATH = re.compile(r"^diff --git a/(.+?) b/(.+)$", re.M)


def patched_paths(patch: str | None) -> list[str]:
    """Every repo path a unified git diff touches (both sides of renames), in order."""
    seen: dict[str, None] = {}
    for a, b in _DIFF_PATH.findall(patch or ""):
        seen.setdefault(a)
        seen.setdefault(b)
    return list(seen)


def harness_kind(path: str) -> str | None:
    """'revert' (reset to base + gold), 'remove_if_new' (delete unless it exists at base) or None."""
    parts = path.split("/")
    name = parts[-1]
    if name == "conftest.py" or name in CONFIG_FILES:
        return "revert"
    if name in ("sitecustomize.py", "usercustomize.py") or name.endswith(".pth"):
        return "remove_if_new"
    top = (
        parts[0][:-3] if len(parts) == 1 and parts[0].endswith(".py") else parts[0] if len(parts) > 1 else ""
    )
    return "remove_if_new" if top in _SHADOWED else None


def harness_paths(patch: str | None) -> dict[str, str]:
    """The test-harness paths a patch touches -> how they are restored (harness_kind)."""
    out = {}
    for p in patched_paths(patch):
        kind = harness_kind(p)
        if kind:
            out[p] = kind
    return out


def restore_script(paths: dict[str, str], base: str, gold_file: str | None, gold_paths: list[str]) -> str:
    """Shell (run in the repo after the agent's patch) that restores `paths`; `gold_file` holds the gold patch,
    whose hunks for `gold_paths` are re-applied on top of the base version."""
    b = shlex.quote(base)
    lines = []
    for p, kind in paths.items():
        q = shlex.quote(p)
        if kind == "revert":
            lines.append(
                f"if git cat-file -e {b}:{q} 2>/dev/null; then git checkout -q {b} -- {q}; else rm -f {q}; fi"
            )
        else:
            lines.append(f"git cat-file -e {b}:{q} 2>/dev/null || rm -f {q}")
    if gold_file and gold_paths:
        inc = " ".join(f"--include={shlex.quote(p)}" for p in gold_paths)
        lines.append(f"git apply {inc} {shlex.quote(gold_file)}")
    return "\n".join(lines) + "\n"


_SUMMARY = re.compile(
    r"^=+ (.*\b(?:passed|failed|error|errors|skipped|xfailed|xpassed)\b.*) in [\d.]+s", re.M
)


def log_violations(log: str, parser_name: str) -> list[str]:
    """Signs that the test log does not describe the run that happened (see the module docstring)."""
    from swebench.harness.constants import END_TEST_OUTPUT, START_TEST_OUTPUT
    from swebench.harness.log_parsers import PARSER_REGISTRY

    out = []
    for marker in (START_TEST_OUTPUT, END_TEST_OUTPUT):
        if log.count(marker) > 1:
            out.append(f"marker {marker!r} appears {log.count(marker)} times")
    section = log.split(START_TEST_OUTPUT, 1)[-1].split(END_TEST_OUTPUT, 1)[0]
    parser = PARSER_REGISTRY.get(parser_name)
    statuses: dict[str, set[str]] = {}
    for line in section.splitlines() if parser else []:
        try:
            parsed = parser(line, None)  # type: ignore[misc]
        except Exception:  # a stateful parser that needs the whole log: no per-line check
            continue
        for test, status in parsed.items():
            statuses.setdefault(test, set()).add(status)
    both = sorted(t for t, s in statuses.items() if len(s) > 1)
    if both:
        out.append(f"tests reported with conflicting statuses: {both[:5]}")
    if parser_name.startswith("parse_log_pytest"):
        listed = sum(1 for s in statuses.values() if s == {"PASSED"})
        summaries = _SUMMARY.findall(section)
        counted = _count(summaries[-1], "passed") if summaries else None
        if counted is not None and listed > counted:
            out.append(f"{listed} tests listed as PASSED but pytest's summary counts {counted} passed")
    return out


def _count(summary: str, word: str) -> int:
    m = re.search(rf"(\d+) {word}\b", summary)
    return int(m.group(1)) if m else 0


def untrusted_harness_paths(patch: str | None, gold: str | None) -> list[str]:
    """Test-harness paths the patch touches that the gold patch does not: the official harness runs them as the
    patch left them, so its verdict on such a patch is no evidence (`--grader official` labels it)."""
    gold_paths = set(patched_paths(gold))
    return sorted(p for p in harness_paths(patch) if p not in gold_paths)


def check_official(result: Any, task: Any, patch: str | None) -> Any:
    """A RewardResult of swebench's official harness, unresolved with an `integrity` entry in its tests when the
    patch changed test-harness files the gold patch leaves alone (grade with `ours` to judge such patches)."""
    untrusted = untrusted_harness_paths(patch, task.patch)
    if not untrusted or not result.resolved:
        return result
    tests = dict(result.tests, resolved=False)
    tests["integrity"] = {"untrusted_harness_files": untrusted, "official_resolved": True}
    return dataclasses.replace(result, reward=0.0, resolved=False, tests=tests)
