"""Grader integrity, log side: judge only what the outer test session reported for the tests the task grades.

The test process can print anything (an `atexit` hook writing PASSED lines and a fake exit-code line after
pytest's summary, or writing straight into the log and exiting), and test suites that test test-runners print
inner sessions' result lines (pytest's own suite does). So:

- Lines are split exactly as swebench's parsers split them (`str.split("\n")`, not `splitlines`).
- swebench's own harness markers (`>>>>> Tests Errored`, `>>>>> Patch Apply Failed`, ...) are written by its
  harness, never by an eval script: in a graded log they come from the code under test, which would make
  swebench read the log as a run that never happened (and print an environment signature to be masked).
- The exit code is the one the eval script wrote to a per-grading file outside /testbed after the test command
  returned (`trusted_log`): every `>>>>> Test Exit Code` line of the log is dropped and that one appended.
- pytest runs (a pytest-family parser and a pytest command in the eval script) also write pytest's own record of
  the outer session (`--junitxml` to a per-grading path outside /testbed, set by the grader through
  PYTEST_ADDOPTS, which pytester's inner sessions drop). Every graded test the log counts as passed or skipped
  must have that outcome in the record; a run whose record is missing (cut short, or its environment replaced)
  is unresolved. Inner sessions' lines are then harmless: only the graded tests' outer results are compared.
- Without a record (other runners): no graded test may be reported with two statuses (tests that share a name,
  a django docstring line or a sympy function name in two files, are told apart by the test id or file header
  printed before their status: `conflicting`), and pytest's last summary must count at least as many passed tests
  as the log lists among the graded ones.
Each violation makes the result unresolved.
"""

from __future__ import annotations

import re
import shlex
import xml.etree.ElementTree as ET
from collections.abc import Iterable
from typing import Any

from swebench.harness.constants import (
    APPLY_PATCH_FAIL,
    END_TEST_OUTPUT,
    RESET_FAILED,
    START_TEST_OUTPUT,
    TEST_EXIT_CODE,
    TESTS_ERROR,
    TESTS_TIMEOUT,
)

# pytest's summary line (`=== 3 passed, 1 failed in 0.12s ===`): the line first, then its words, each in linear
# time (one pattern with `.*\bpassed\b.*` backtracked quadratically: 8 s a grading for a 140 KB printed line)
_SUMMARY_LINE = re.compile(r"^=+ (.*) in [\d.]+s", re.M)
_SUMMARY_WORD = re.compile(r"\b(?:passed|failed|error|errors|skipped|xfailed|xpassed)\b")
_EXIT_LINE = re.compile(rf"^.*{re.escape(TEST_EXIT_CODE)}.*$\n?", re.M)
_PASSING, _SKIPPED = frozenset({"PASSED", "XFAIL"}), frozenset({"SKIPPED"})
RECORD_MAX = 20_000_000  # bytes of the junit record read back


def split_lines(text: str) -> list[str]:
    """Lines as swebench's parsers see them."""
    return text.split("\n")


def test_section(log: str) -> str:
    """The slice swebench parses: after the first start marker, before the next end marker."""
    return log.split(START_TEST_OUTPUT, 1)[-1].split(END_TEST_OUTPUT, 1)[0]


def trusted_log(log: str, exit_code: int | None) -> str:
    """The log with every exit-code line removed and the eval script's own one (from its file) appended."""
    if exit_code is None:
        return log
    return _EXIT_LINE.sub("", log).rstrip("\n") + f"\n{TEST_EXIT_CODE}: {exit_code}\n"


def pytest_command(test_command: str) -> bool:
    """Whether the test command runs pytest itself (tox and friends filter the environment it would read)."""
    return runs_program(test_command, "pytest") and not runs_program(test_command, "tox")


def runs_program(command: str, program: str) -> bool:
    """Whether a line of a test command runs `program`: one of its words (`pytest`, `/usr/bin/pytest`, `python -m
    pytest`), never a substring of a test's path or of a comment (`tests/test_toxfile.py`, `# not under tox`)."""
    return any(w.rsplit("/", 1)[-1] == program for words in command_words(command) for w in words)


def command_words(command: str) -> list[list[str]]:
    """Each line of a test command split into words as the shell splits it, comments dropped."""
    out = []
    for line in command.split("\n"):
        try:
            out.append(shlex.split(line, comments=True))
        except ValueError:  # an unclosed quote: the line's words as they stand
            out.append(line.split())
    return out


def junit_outcomes(xml_text: str) -> dict[str, str] | None:
    """pytest's --junitxml record -> {"dotted.module.Class.test[id]": status}; None when it does not parse."""
    try:
        root = ET.fromstring(xml_text)
    except ET.ParseError:
        return None
    rank = {"PASSED": 0, "XFAIL": 1, "SKIPPED": 2, "FAILED": 3, "ERROR": 4}
    out: dict[str, str] = {}
    for tc in root.iter("testcase"):
        key = ".".join(x for x in (tc.get("classname", ""), tc.get("name", "")) if x)
        status = "PASSED"
        if tc.find("error") is not None:
            status = "ERROR"
        elif tc.find("failure") is not None:
            status = "FAILED"
        elif (sk := tc.find("skipped")) is not None:
            status = "XFAIL" if sk.get("type") == "pytest.xfail" else "SKIPPED"
        if rank[status] >= rank.get(out.get(key, "PASSED"), 0):  # call passed, teardown errored: worst wins
            out[key] = status
    return out


def junit_footprint(log: str, junit_text: str, exit_code: int | None) -> str | None:
    """Why pytest's --junitxml may have changed a result of this run, or None. The junitxml plugin only records
    reports, except in three places (pytest 3.x-9.x, _pytest/junitxml.py): its record_property and
    record_xml_attribute fixtures warn when it is on (an error under filterwarnings=error: the record then holds
    that error), it str()s the properties a test records (the record holds them), and a failure inside it is an
    INTERNALERROR that stops the session (pytest exits 3). A run without any of these traces is what it would have
    been without the record (tests/tasks/test_integrity_probe_rule.py shows each one, and the absence)."""
    if "is incompatible with junit_family" in junit_text:
        return "a test used a junit property fixture (it warns only with --junitxml)"
    if "<property " in junit_text:
        return "the tests recorded junit properties (--junitxml str()s them)"
    if exit_code == 3 and "INTERNALERROR" in log and "junitxml" in log:
        return "an internal error inside pytest's junitxml plugin"
    return None


def nodeid_key(nodeid: str) -> str:
    """A pytest node id as --junitxml names it (classname + "." + name)."""
    path, *rest = nodeid.split("::")
    mod = path[:-3] if path.endswith(".py") else path
    return ".".join([mod.replace("/", "."), *rest])


def parser_aliases(names: Iterable[str], parser: Any) -> dict[str, list[str]]:
    """The name a log parser gives each of these test names, where it is another -> the names. Some parsers
    rename a test (pylint's parse_log_pytest_options turns `test_stdin[/testbed/tests/m.py-m-/testbed/tests/m.py]`
    into `test_stdin[/m.py]`, the name in the task row and the verdict): records are looked up the same way."""
    out: dict[str, list[str]] = {}
    for name in names:
        try:
            parsed = list(parser(f"PASSED {name}", None) or ())
        except Exception:  # a parser that needs more than one line: every name keeps its own
            return {}
        if len(parsed) == 1 and parsed[0] != name:
            out.setdefault(parsed[0], []).append(name)
    return out


def _record_status(test: str, record: dict[str, str], renamed: dict[str, list[str]]) -> str | None:
    key = nodeid_key(test)
    if key in record:
        return record[key]
    if key in renamed:  # every record entry the parser gives this name must agree (else it is not one answer)
        found = {record[k] for k in renamed[key]}
        return found.pop() if len(found) == 1 else None
    if test.count("[") > test.count("]"):  # swebench's truncated parametrized ids: prefix match
        hits = [v for k, v in record.items() if k.startswith(key)]
    else:  # a rootdir below the repo root: the record's names are a suffix of ours
        hits = [v for k, v in record.items() if key.endswith("." + k) or k.endswith("." + key)]
    return hits[0] if len(set(hits)) == 1 else None


def record_violations(
    statuses: dict[str, str], graded: list[str], record: dict[str, str] | None, parser: Any = None
) -> list[str]:
    """Graded tests the log counts as passed/skipped whose outer-session outcome (pytest's record) differs.
    `parser`: the log's parser, whose renaming of a test id the record's names go through too."""
    if record is None:
        return ["pytest's own record of the test session is missing or unreadable (the run was cut short)"]
    renamed = parser_aliases(record, parser) if parser is not None else {}
    out = []
    for test in graded:
        claimed = statuses.get(test)
        if claimed is None or claimed not in _PASSING | _SKIPPED:
            continue
        actual = _record_status(test, record, renamed)
        group = _PASSING if claimed in _PASSING else _SKIPPED
        if actual not in group:
            out.append(
                f"{test}: the log says {claimed}, pytest's record of the session says {actual or 'nothing'}"
            )
    return out[:10]


# The context a runner without a junit record prints before a status line: django names a test with a docstring
# by the docstring's first line, on the line after its id `test_x (app.tests.Class.test_x)`; sympy names tests by
# bare function name, under a `path/test_file.py[N]` header.
_DJANGO_ID = re.compile(r"^\w+ \([\w.]+\)$")
_SYMPY_FILE = re.compile(r"^(\S+\.py)\[\d+\]")


def _context(parser_name: str, test: str, prev: str, header: str | None) -> str | None:
    """Which test a status line belongs to beyond its name (None: the line names no test of its own)."""
    if parser_name == "parse_log_django":
        return test if _DJANGO_ID.match(test) else (prev if _DJANGO_ID.match(prev) else None)
    if parser_name == "parse_log_sympy":
        return header
    return test  # pytest-style node ids name one test each


def _line_statuses(
    section: str, parser: Any, parser_name: str = ""
) -> dict[str, list[tuple[str | None, str]]]:
    """test name -> [(context, status)] for every status line of the section, parsed one line at a time."""
    statuses: dict[str, list[tuple[str | None, str]]] = {}
    prev, header = "", None
    for line in split_lines(section):
        text = line.strip()
        if m := _SYMPY_FILE.match(text):
            header = m.group(1)
        try:
            parsed = parser(line, None)
        except Exception:  # a stateful parser that needs the whole log: no per-line check
            parsed = {}
        for test, status in parsed.items():
            statuses.setdefault(test, []).append((_context(parser_name, test, prev, header), status))
        prev = text or prev
    return statuses


def conflicting(seen: list[tuple[str | None, str]]) -> bool:
    """Whether one test's name carries two statuses that are not two tests sharing the name: tests that share a
    name (a django docstring line, a sympy function name in two files) print each under its own context, one
    status each; a second status under the same context, or a status line with no context, is a conflict."""
    if len({status for _, status in seen}) < 2:
        return False
    by_context: dict[str | None, set[str]] = {}
    for context, status in seen:
        by_context.setdefault(context, set()).add(status)
    return None in by_context or any(len(v) > 1 for v in by_context.values())


def _count(summary: str, word: str) -> int:
    m = re.search(rf"(\d+) {word}\b", summary)
    return int(m.group(1)) if m else 0


def log_violations(
    log: str,
    parser_name: str,
    graded: list[str] | None = None,
    record: dict[str, str] | None = None,
    *,
    record_required: bool = False,
) -> list[str]:
    """Signs that the test log does not describe the outer session that ran (see the module docstring).
    `graded`: the task's FAIL_TO_PASS + PASS_TO_PASS (None: every test in the log); `record`: junit_outcomes."""
    from swebench.harness.log_parsers import PARSER_REGISTRY

    out = []
    for marker in (START_TEST_OUTPUT, END_TEST_OUTPUT):
        if log.count(marker) > 1:
            out.append(f"marker {marker!r} appears {log.count(marker)} times")
    for marker in (APPLY_PATCH_FAIL, RESET_FAILED, TESTS_ERROR, TESTS_TIMEOUT):
        if (
            marker in log
        ):  # swebench's harness writes these beside a log, never the eval script: the tests did
            out.append(
                f"swebench's harness marker {marker!r} in the test log (it makes the log read as no run)"
            )
    section = test_section(log)
    if TEST_EXIT_CODE in section:
        out.append(
            "an exit-code line inside the test output (the eval script writes its own after the tests)"
        )
    parser = PARSER_REGISTRY.get(parser_name)
    if parser is None:
        return out
    if record_required or record is not None:
        statuses = parser(section, None) or parser(log, None)  # swebench's own fallback to the whole log
        return out + record_violations(statuses, graded or sorted(statuses), record, parser)
    lines = _line_statuses(section, parser, parser_name)
    keep = set(graded) if graded is not None else set(lines)
    both = sorted(t for t, seen in lines.items() if t in keep and conflicting(seen))
    if both:
        out.append(f"tests reported with conflicting statuses: {both[:5]}")
    if parser_name.startswith("parse_log_pytest"):
        listed = sum(1 for t, seen in lines.items() if {st for _, st in seen} == {"PASSED"} and t in keep)
        summaries = [m for m in _SUMMARY_LINE.findall(section) if _SUMMARY_WORD.search(m)]
        counted = _count(summaries[-1], "passed") if summaries else None
        if counted is not None and listed > counted:
            out.append(f"{listed} tests listed as PASSED but pytest's summary counts {counted} passed")
    return out


# The failure summaries a runner prints after its status lines, naming each test that did not pass: django's
# (unittest's) `FAIL: test_x (app.tests.Class.test_x)` header (its docstring's first line below it when it has
# one), sympy's `____ sympy/core/tests/test_x.py:test_y ____` header
_UNITTEST_FAILED = re.compile(r"^(?:FAIL|ERROR): (\S+ \([\w.]+\))\s*$")
_SYMPY_FAILED = re.compile(r"^_{3,} (\S+\.py):(\w+) _{3,}\s*$")


def status_disagreements(log: str, parser_name: str, graded: list[str]) -> list[str]:
    """Labels (issue 60), not violations: graded tests the log's status lines report passing while the same log's
    failure summary names them failed. Output printed by library code (a line `ok` in the middle of a django test,
    `test_y ok` in a sympy one) can be read by swebench's parser as the test's status, with the runner's own
    failure summary further down: the official harness resolves such a run too, so the verdict stays."""
    from swebench.harness.log_parsers import PARSER_REGISTRY

    parser = PARSER_REGISTRY.get(parser_name)
    if parser is None or parser_name not in ("parse_log_django", "parse_log_sympy"):
        return []
    section = test_section(log)
    statuses = parser(section, None) or parser(log, None)
    failed = _summarised_failures(section, parser_name)
    out = []
    for test in graded:
        if statuses.get(test) not in _PASSING:
            continue
        if parser_name == "parse_log_sympy":
            files = {
                ctx
                for ctx, st in _line_statuses(section, parser, parser_name).get(test, [])
                if st == "PASSED"
            }
            hit = [
                f"{path}:{test}" for path, name in failed if name == test and (path in files or None in files)
            ]
        else:
            hit = [t for t in failed if t == test]
        if hit:
            out.append(
                f"log: {test}: a status line reports it {statuses[test]}, the runner's failure summary names it "
                f"failed ({hit[0]}): printed output read as its status"
            )
    return out[:10]


def _summarised_failures(section: str, parser_name: str) -> list:
    """The tests a runner's failure summary names: django ids (and the docstring line below each), or sympy
    (file, function) pairs."""
    lines = split_lines(section)
    out: list = []
    for i, line in enumerate(lines):
        text = line.strip()
        if parser_name == "parse_log_sympy":
            if m := _SYMPY_FAILED.match(text):
                out.append((m.group(1), m.group(2)))
        elif m := _UNITTEST_FAILED.match(text):
            out.append(m.group(1))
            below = lines[i + 1].strip() if i + 1 < len(lines) else ""
            if below and not below.startswith("---"):
                out.append(below)
    return out
