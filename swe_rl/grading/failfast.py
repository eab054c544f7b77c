"""Fail fast for the reward: the FAIL_TO_PASS tests first, the full official run only when they all pass.

For a binary reward one failing FAIL_TO_PASS (F2P) test decides the result, and most RL patches fail. With
`fail_fast`, grading first runs an F2P-only pre-run: the official eval script with its test command narrowed to
the F2P tests (`select_command`, per runner). The rule:

- The pre-run can only return *unresolved*, and only when a selected F2P test is reported FAILED or ERROR in a
  log swebench accepts (markers, exit code) with no log-guard violation; the report then carries the pre-run's
  F2P lists, empty PASS_TO_PASS lists and `tests["fail_fast"]` saying so. Anything else (every F2P test passed,
  a test missing or skipped, an empty or rejected log) sends the patch to the full official run in a fresh
  sandbox, exactly as without fail-fast. So fail-fast changes only the per-test lists reported for an unresolved
  patch, never a verdict, given one assumption: an F2P test that fails alone also fails among the other tests
  of its run (order-dependent tests break it; SWE-bench's F2P tests are chosen to be deterministic).
- A pre-run that times out is `test_timeout` (the full run runs the same tests and more).
- The selection is a superset of the F2P tests, never a subset: pytest node ids without their parameters (swebench
  truncates long ids), django labels `module.Class.method`, sympy's `-k` keywords (substring matches). A runner or
  a name we cannot select (django docstring names, other parsers, tox without `--`) gets no pre-run.
- The repository's editable install (`pip install -e .`) runs only when the patch may concern it, as in the graded
  run (swe_rl.grading.install_skip).
"""

from __future__ import annotations

import re
import shlex
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from swe_rl.grading.install_skip import guarded
from swe_rl.integrity.log_rules import test_section
from swe_rl.tasks.grading_plan import GradingPlan
from swe_rl.tasks.task import Task

_DJANGO_NAME = re.compile(r"^(?P<meth>\w+) \((?P<dotted>[\w.]+)\)$")
_SYMPY_NAME = re.compile(r"^test_\w+$")
_DOTTED = re.compile(r"^[A-Za-z_][\w]*(\.[A-Za-z_]\w*)+$")
_EXIT = "SWEBENCH_TEST_EXIT_CODE=$?"
# swebench's parsers of pytest output (the runner of every Python repository but django's and sympy's)
PYTEST_PARSERS = frozenset({
    "parse_log_pytest", "parse_log_pytest_options", "parse_log_pytest_v2", "parse_log_flask", "parse_log_sphinx",
    "parse_log_pylint", "parse_log_astropy", "parse_log_matplotlib", "parse_log_seaborn", "parse_log_xarray",
    "parse_log_requests", "parse_log_scikit", "parse_log_sqlfluff", "parse_log_pydicom", "parse_log_pvlib",
    "parse_log_pyvista", "parse_log_marshmallow", "parse_log_astroid",
})  # fmt: skip
# sympy's bin/test takes several -k keywords (argparse, nargs='*') from 1.5 on; older ones took one
_SYMPY_MULTI_KW = (1, 5)


def command_line(script: str) -> str | None:
    """The eval script's test command (the one line between the output markers), or None when there is not
    exactly one."""
    lines = [ln for ln in test_section(script).split("\n") if ln.strip() not in ("", "'", ": '", _EXIT)]
    return lines[0] if len(lines) == 1 else None


def _trailing(command: str, is_directive) -> tuple[str, list[str]] | None:
    """(the command without its trailing directive tokens, those tokens); None when it ends with none."""
    words = command.rstrip().split(" ")
    tail: list[str] = []
    while words and words[-1] and is_directive(words[-1]):
        tail.insert(0, words.pop())
    return (" ".join(words), tail) if tail and words else None


def _path_like(word: str, files: set[str]) -> bool:
    return "/" in word or word.endswith(".py") or any(f.startswith(word + "/") for f in files)


def _pytest(command: str, f2p: list[str]) -> str | None:
    if not all("::" in t for t in f2p):
        return None
    files = {t.split("::", 1)[0] for t in f2p}
    found = _trailing(command, lambda w: not w.startswith("-") and _path_like(w, files))
    if found is None:
        return None
    head, dirs = found
    if not all(any(f == d or f.startswith(d.rstrip("/") + "/") for d in dirs) for f in files):
        return None  # an F2P test outside the command's paths: the run is not what we think it is
    ids = dict.fromkeys(t.split("[", 1)[0] for t in f2p)  # without parameters: a superset, never a subset
    return head + " " + " ".join(shlex.quote(i) for i in ids)


def django_label(name: str) -> str | None:
    """`test_x (module.Class)` / `test_x (module.Class.test_x)` -> `module.Class.test_x`; None for other names
    (a docstring's first line)."""
    m = _DJANGO_NAME.match(name)
    if m is None:
        return None
    meth, dotted = m["meth"], m["dotted"]
    return dotted if dotted.endswith("." + meth) else f"{dotted}.{meth}"


def _django(command: str, f2p: list[str]) -> str | None:
    labels = [django_label(t) for t in f2p]
    if None in labels:
        return None
    found = _trailing(command, lambda w: bool(_DOTTED.match(w)))
    if found is None:
        return None
    head, mods = found
    if not all(any(lb.startswith(m + ".") for m in mods) for lb in labels if lb):
        return None
    return head + " " + " ".join(dict.fromkeys(lb for lb in labels if lb))


def _version(text: str) -> tuple[int, ...]:
    try:
        return tuple(int(x) for x in text.split(".")[:2])
    except ValueError:
        return ()


def _sympy(command: str, f2p: list[str], version: str) -> str | None:
    if not all(_SYMPY_NAME.match(t) for t in f2p) or "bin/test" not in command:
        return None
    if len(f2p) > 1 and _version(version) < _SYMPY_MULTI_KW:
        return None
    if _trailing(command, lambda w: w.endswith(".py")) is None:
        return None
    return command.rstrip() + " -k " + " ".join(dict.fromkeys(f2p))


def select_command(task: Task, command: str) -> str | None:
    """The test command narrowed to the task's FAIL_TO_PASS tests (a superset of them), or None when its
    runner cannot select them (then there is no pre-run)."""
    f2p = list(task.FAIL_TO_PASS)
    if not f2p:
        return None
    if task.log_parser == "parse_log_django" and "runtests.py" in command:
        return _django(command, f2p)
    if task.log_parser == "parse_log_sympy":
        return _sympy(command, f2p, task.version or "")
    if task.log_parser not in PYTEST_PARSERS:
        return None
    if re.search(r"\bpytest\b", command) and "tox" not in command:
        return _pytest(command, f2p)
    if re.search(r"\btox\b", command) and " -- " in command:
        return _pytest(command, f2p)  # tox hands the arguments after `--` to the suite's pytest
    return None


_SHOW = re.compile(r"^\s*git (?:status|show|-c core\.fileMode=false diff [0-9a-f]+)\s*$")


@dataclass(frozen=True)
class Plan:
    """The pre-run of one grading: its script, and what became of the install (for the report)."""

    script: str
    install: str  # "kept" | "skipped if the packages import from /testbed: a, b" | "none"


def narrowed_script(task: Task, official: str) -> str | None:
    """`official` (swebench's eval script) with its test command narrowed to the F2P tests, or None when the
    runner cannot select them (the grading plan holds it: swe_rl.grading.plan)."""
    command = command_line(official)
    narrowed = select_command(task, command) if command else None
    if command is None or narrowed is None:
        return None
    head, sep, tail = official.partition(": '>>>>> Start Test Output'")
    tail = tail.replace("\n" + command + "\n", "\n" + narrowed + "\n", 1)
    # read-only display lines: they cannot change a test's outcome
    head = "\n".join(ln for ln in head.split("\n") if not _SHOW.match(ln))
    return head + sep + tail


def pre_run_script(
    task: Task, official: str, touched: list[str] | tuple[str, ...] | None, packaging_text: str
) -> Plan | None:
    """The F2P-only pre-run for `official`, its editable install guarded, or None when the runner cannot select."""
    narrowed = narrowed_script(task, official)
    # without the tree guard (bench only) what the patch touched is unknown: the install runs
    return None if narrowed is None else Plan(*guarded(narrowed, touched, packaging_text))


_FAILING = ("FAILED", "ERROR")


def _status(name: str, statuses: dict[str, str]) -> str | None:
    """swebench's lookup: the exact name, or for an id swebench truncated mid-parameter the prefix matches when
    they agree on failing."""
    if name in statuses:
        return statuses[name]
    if name.count("[") > name.count("]"):
        hits = {statuses[k] in _FAILING for k in statuses if k.startswith(name)}
        if hits == {True}:
            return "FAILED"
    return None


def decisive_failures(task: Task, statuses: dict[str, str]) -> list[str]:
    """The FAIL_TO_PASS tests the pre-run reports FAILED or ERROR (a missing or skipped one decides nothing)."""
    return [t for t in task.FAIL_TO_PASS if _status(t, statuses) in _FAILING]


@dataclass(frozen=True)
class PreRun:
    """What the pre-run came to: `failed` (unresolved: `report` is the result's), `passed` or `undecided` (the
    full run decides), `timeout`; `skipped` when there was no pre-run (the runner cannot select)."""

    outcome: str
    failed: tuple[str, ...] = ()
    report: dict[str, Any] | None = None
    log: str = ""
    install: str = ""
    why: str = ""


async def pre_run(
    sb: Any,
    task: Task,
    plan: GradingPlan,
    patch: str,
    timeout: float,
    g: Any,
    touched: tuple[str, ...] | None,
    packaging: str,
) -> PreRun:
    """The F2P-only pre-run in the grading sandbox (after the tree guard; `g`: its Guard or None; `packaging`:
    install_skip.read_packaging's text)."""
    from swe_rl.tasks.eval_script import run_script

    if plan.failfast_script is None:
        return PreRun("skipped", why="the runner cannot select the FAIL_TO_PASS tests")
    p = Plan(*guarded(plan.failfast_script, touched, packaging))
    if g is None:
        log, timed_out = await run_script(sb, p.script, timeout)
    else:
        log, timed_out = await run_script(sb, g.eval_script(p.script, False), timeout, before=g.clear_cmd,
                                          after=g.collect_cmd)  # fmt: skip
        if not timed_out and log.strip():
            log, _, _ = await g.read_back(sb, log)
    if timed_out:
        return PreRun("timeout", log=log, install=p.install)
    return judge(task, plan, patch, log, p.install)


def judge(task: Task, plan: GradingPlan, patch: str, log: str, install: str) -> PreRun:
    """The pre-run's outcome from its log (the rule in the module docstring)."""
    from swe_rl.grading.eval_run import report_from_log
    from swe_rl.integrity.log_rules import log_violations

    if task.log_parser == "parse_log_sympy":
        log = _SYMPY_FILE_VERDICT.sub(r"\1", log)
    statuses, valid = spec_statuses(plan, log) if log.strip() else ({}, False)
    if not valid:
        return PreRun("undecided", log=log, install=install, why="swebench does not accept the pre-run's log")
    if log_violations(log, task.log_parser, list(task.FAIL_TO_PASS)):
        return PreRun("undecided", log=log, install=install, why="the pre-run's log breaks a log guard")
    failed = decisive_failures(task, statuses)
    if not failed:
        return PreRun("passed", log=log, install=install)
    report = report_from_log(task, plan, patch, log)
    report["tests_status"]["PASS_TO_PASS"] = {"success": [], "failure": []}
    report["fail_fast"] = {"failed": failed, "pass_to_pass": "not run: a FAIL_TO_PASS test failed first",
                           "install": install}  # fmt: skip
    return PreRun("failed", tuple(failed), report, log, install)


# sympy's bin/test ends its last test's line with the file's verdict ("test_x F    [FAIL]"); swebench's parser
# then misses that test. A pre-run that selects one test always ends on it: the marker is dropped for the
# pre-run's reading (a test read as F this way is failing in the full run too, or missing there: unresolved).
_SYMPY_FILE_VERDICT = re.compile(r"^(test_\w+ (?:ok|F|E))\s+\[(?:OK|FAIL)\]\s*$", re.M)


def spec_statuses(plan: GradingPlan, log: str) -> tuple[dict[str, str], bool]:
    """swebench's get_logs_eval on a log: (test -> status, whether swebench accepts the log at all)."""
    from swebench.harness.grading import get_logs_eval

    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "test_output.txt"
        path.write_text(log)
        return get_logs_eval(plan.spec, str(path))
