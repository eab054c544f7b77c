"""What an instance's validation found, kept in the task row: the PASS_TO_PASS tests the gold patch fails here for
a reason the project can name (the sandbox has no network), left out of every verdict, and whether the instance
can be graded here at all.

The record lives in `task.metadata["validation"]` (swe_rl.grading.validate fills it from a gold grading, once per
image); this module reads it, checks it, and says what a grading leaves out. The reasons are data
(environment_rules.json): a failure matching none of them stays graded.

    {"status": "ok" | "left_out" | "gold_unresolved" | "ungradeable",
     "left_out": [{"test", "reason", "line"}],       # PASS_TO_PASS tests out of the verdict, each with why
     "gold_failing": [{"test", "why"}],              # PASS_TO_PASS tests gold fails with no nameable reason: kept
     "ungradeable": str | None,                      # why FAIL_TO_PASS cannot pass here (never resolved)
     "violations": [str], "confirm": str,            # (optional) why gold is unresolved besides failing tests
     "gold_test_s": float,                           # (optional) gold's test run here, seconds (grader: timeouts)
     "key": str, "image_id": str, "rules": str}      # what it was computed on (swe_rl.grading.validate)
"""

from __future__ import annotations

import hashlib
import json
import re
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

from swe_rl.tasks.task import Task

RULES_FILE = Path(__file__).with_name("environment_rules.json")
STATUSES = ("ok", "left_out", "gold_unresolved", "ungradeable")
# a test's own part of a log ends where another's starts: pytest's "____ name ____" section, a "=====" rule, a
# status line of pytest's -rA summary, a django/unittest verbose result line
_SECTION_END = re.compile(
    r"^(_{3,} .+ _{3,}|={5,}.*|(PASSED|FAILED|ERROR|SKIPPED|XFAIL|XPASS) .*"
    r"|.* \.\.\. (ok|FAIL|ERROR|skipped.*|expected failure|unexpected success))$"
)
_WINDOW = 2000  # lines at most in one part
# hosts a line names: host='x', scheme://x, ('x', port), a bare IPv4 address
_HOST = re.compile(
    r"""(?:host=['"]|://|\(['"])(\[[0-9a-fA-F:]+\]|[A-Za-z0-9.-]+)|\b(\d{1,3}(?:\.\d{1,3}){3})\b"""
)
_LOCAL = re.compile(r"^(localhost|127\.\d+\.\d+\.\d+|0\.0\.0\.0|\[::1?\]|testserver)$", re.I)


@dataclass(frozen=True)
class Rule:
    reason: str
    pattern: re.Pattern[str]
    outside: bool  # the line must also name a host that is not this machine


@cache
def rules() -> tuple[Rule, ...]:
    """The environmental reasons (environment_rules.json); a bad file fails naming the rule and field."""
    data = json.loads(RULES_FILE.read_text())
    out = []
    for i, r in enumerate(data["rules"]):
        try:
            out.append(Rule(str(r["reason"]), re.compile(r["pattern"]), bool(r["outside"])))
        except (KeyError, re.error) as e:
            raise ValueError(f"{RULES_FILE}: rules[{i}]: {type(e).__name__}: {e}") from e
    return tuple(out)


def rules_digest() -> str:
    """A hash of the rules: a validation made under other rules is made again."""
    return hashlib.sha256(RULES_FILE.read_bytes()).hexdigest()[:16]


def _names_outside_host(line: str) -> bool:
    hosts = [a or b for a, b in _HOST.findall(line)]
    return any(h and not _LOCAL.match(h) for h in hosts)


def _needles(test: str) -> list[str]:
    """How a log names `test`: its id, and pytest's section title (`Class.method` for `file::Class::method`)."""
    parts = test.split("::")
    return [test, ".".join(parts[1:])] if len(parts) > 1 else [test]


def test_parts(log: str, test: str) -> list[list[str]]:
    """The parts of `log` about `test`: from each line naming it (its id, or its pytest section title, as a
    whole word) to the next section, at most _WINDOW lines each."""
    lines = log.splitlines()
    found = [
        re.compile(rf"(?<![\w.]){re.escape(n)}(?![\w\[])") for n in _needles(test) if n
    ]  # test_a never matches test_ab
    parts = []
    for i, line in enumerate(lines):
        if any(p.search(line) for p in found):
            part = [line]
            for nxt in lines[i + 1 : i + _WINDOW]:
                if _SECTION_END.match(nxt):
                    break
                part.append(nxt)
            parts.append(part)
    return parts


def environmental_reason(log: str, test: str) -> tuple[str, str] | None:
    """(reason, the log line) when `test`'s part of the log shows a nameable environmental failure, else None.
    The line is the last matching one of the first part that has any: the exception the test ended with."""
    for part in test_parts(log, test):
        hits = [
            (rule.reason, line.strip()[:400])
            for line in part
            for rule in rules()
            if rule.pattern.search(line) and (not rule.outside or _names_outside_host(line))
        ]
        if hits:
            return hits[-1]
    return None


def assess(task: Task, tests_status: dict[str, Any], log: str) -> dict[str, Any]:
    """The validation record of a gold grading of `task` (its report's tests_status and its log): FAIL_TO_PASS
    failing makes it ungradeable; a failing PASS_TO_PASS test is left out only with a nameable reason."""
    f2p_failed = list((tests_status.get("FAIL_TO_PASS") or {}).get("failure") or [])
    p2p_failed = list((tests_status.get("PASS_TO_PASS") or {}).get("failure") or [])
    ungradeable = None
    if f2p_failed:
        whys = []
        for t in f2p_failed:
            env = environmental_reason(log, t)
            whys.append(f"{t}: {env[0]} ({env[1]})" if env else f"{t}: no environmental reason named")
        ungradeable = "FAIL_TO_PASS fails with the gold patch here: " + "; ".join(whys)
    left_out, gold_failing = [], []
    for t in p2p_failed:
        env = environmental_reason(log, t)
        if env:
            left_out.append({"test": t, "reason": env[0], "line": env[1]})
        else:
            gold_failing.append(
                {"test": t, "why": "fails with the gold patch; no environmental reason named"}
            )
    status = (
        "ungradeable"
        if ungradeable
        else "gold_unresolved"
        if gold_failing
        else "left_out"
        if left_out
        else "ok"
    )
    return {
        "status": status,
        "left_out": left_out,
        "gold_failing": gold_failing,
        "ungradeable": ungradeable,
    }


def validation_of(task: Task) -> dict[str, Any] | None:
    """The task row's validation record, checked (None: never validated); a bad record raises ValueError
    naming the field: a left-out test that is not a PASS_TO_PASS test of the row would hide a real test."""
    record = task.metadata.get("validation")
    if record is None:
        return None
    where = f"{task.instance_id}: metadata.validation"
    if not isinstance(record, dict):
        raise ValueError(f"{where}: expected an object, got {type(record).__name__}")
    if record.get("status") not in STATUSES:
        raise ValueError(f"{where}.status: {record.get('status')!r} is not one of {list(STATUSES)}")
    p2p = set(task.PASS_TO_PASS)
    for i, item in enumerate(record.get("left_out") or []):
        if not isinstance(item, dict) or not all(
            isinstance(item.get(k), str) for k in ("test", "reason", "line")
        ):
            raise ValueError(f"{where}.left_out[{i}]: expected {{test, reason, line}} strings, got {item!r}")
        if item["test"] not in p2p:
            raise ValueError(
                f"{where}.left_out[{i}].test: {item['test']!r} is not a PASS_TO_PASS test of the row"
            )
        if not item["reason"] or not item["line"]:
            raise ValueError(
                f"{where}.left_out[{i}]: a test is never left out without a reason and a log line"
            )
    gold_s = record.get("gold_test_s")
    if gold_s is not None and (isinstance(gold_s, bool) or not isinstance(gold_s, int | float) or gold_s < 0):
        raise ValueError(f"{where}.gold_test_s: expected seconds (a number >= 0), got {gold_s!r}")
    if record["status"] == "ungradeable" and not record.get("ungradeable"):
        raise ValueError(f"{where}.ungradeable: status ungradeable needs the reason")
    return record


def left_out_tests(task: Task) -> list[str]:
    record = validation_of(task)
    return [item["test"] for item in (record or {}).get("left_out") or []]


def graded_task(task: Task) -> Task:
    """`task` as it is graded here: its PASS_TO_PASS without the tests its validation left out (the same task
    when there are none). The eval script is untouched: the left-out tests still run, their results are not read."""
    out = set(left_out_tests(task))
    if not out:
        return task
    return task.model_copy(update={"PASS_TO_PASS": [t for t in task.PASS_TO_PASS if t not in out]})


def graded_summary(task: Task) -> str | None:
    """One line for reports: `graded on N of M PASS_TO_PASS; left out: <test> (<reason>), ...`, or why the
    instance is not graded here; None when its validation changed nothing (or there was none)."""
    record = validation_of(task)
    if record is None or record["status"] == "ok":
        return None
    if record["status"] == "ungradeable":
        return f"ungradeable here: {record['ungradeable']}"
    items = record.get("left_out") or []
    m = len(task.PASS_TO_PASS)
    text = f"graded on {m - len(items)} of {m} PASS_TO_PASS"
    if items:
        text += "; left out: " + ", ".join(f"{i['test']} ({i['reason']})" for i in items)
    if record.get("gold_failing"):
        text += "; gold fails here with no nameable reason (kept, gold unresolved): " + ", ".join(
            g["test"] for g in record["gold_failing"]
        )
    why = record.get("confirm") or "; ".join(record.get("violations") or [])
    return text + (f"; gold unresolved: {why}" if why else "")
