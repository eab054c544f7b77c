"""Running an eval script in a grading sandbox: the graded run and the probe run share these pieces.

The graded run is the official run: the instance's eval script exactly as swebench's `make_test_spec` writes it
(`official_script`), plus only what reads its result reliably (swe_rl.tasks.guard: the exit-code file, and for a
pytest run pytest's junit record, exported by `with_exports` just before the test output starts). The probe run
(swe_rl.tasks.probe) runs the same script with its own exports instead. Both are read back whole from a file with
a fresh name (`run_script`).
"""

from __future__ import annotations

import secrets
import shlex
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from sandboxes.base import ExecResult, Sandbox
from swe_rl.tasks.guard import Guard
from swe_rl.tasks.integrity import created_paths, patched_paths
from swe_rl.tasks.integrity_log import log_violations, pytest_command, test_section
from swe_rl.tasks.task import Task

WORKDIR = "/testbed"
EVAL_FILE = "/eval.sh"
# + a random suffix: the full log, read back as a file (exec output is capped)
EVAL_OUTPUT = "/tmp/swe_rl_eval_output"


class Interrupted(Exception):
    """A grading command ended without an exit status (its shell died, or the client gave up on it): the
    sandbox failed, the patch was not judged."""

    def __init__(self, log: str):
        super().__init__("a grading command ended without an exit status")
        self.log = log


def no_exit_status(res: ExecResult, log: str) -> None:
    # Shell commands exit 0..255; sandboxes report -1 when no status came back (shell died, client timeout).
    if res.exit_code < 0:
        raise Interrupted(log)


def instance_dict(task: Task) -> dict[str, Any]:
    """The SWE-bench instance dict swebench's make_test_spec / run_evaluation read."""
    row = task.model_dump(exclude={"metadata"})
    row["eval_script"] = eval_script_for(task)
    return row


def eval_script_for(task: Task) -> str:
    """A task's eval script; a bare test command (no SWE-bench output markers) is wrapped into one that applies
    the test patch and brackets the command with the markers swebench's grading needs."""
    from swebench.harness.constants import END_TEST_OUTPUT, START_TEST_OUTPUT

    script = task.eval_script
    if START_TEST_OUTPUT in script and END_TEST_OUTPUT in script:
        return script
    lines = ["#!/bin/bash", "set -uxo pipefail", f"cd {WORKDIR}"]
    if task.test_patch.strip():
        # as SWE-bench's scripts do: the test patch's files back at the base commit first, so that the agent's
        # edits to (or deletion of) the tests never count; only files the base has (one path git does not know
        # and the whole checkout fails, leaving the graded run's test files in place for the probe run)
        created = set(created_paths(task.test_patch))
        files = " ".join(shlex.quote(p) for p in patched_paths(task.test_patch) if p not in created)
        lines += (
            [f"git checkout {task.base_commit or 'HEAD'} -- {files} 2>/dev/null || true"] if files else []
        )
        lines += ["git apply -v - <<'EOF_114329324912'", task.test_patch.rstrip("\n"), "EOF_114329324912"]
    lines += [f": '{START_TEST_OUTPUT}'", script.strip(), f": '{END_TEST_OUTPUT}'", ""]
    return "\n".join(lines)


def official_script(task: Task) -> str:
    """The eval script exactly as swebench's make_test_spec writes it (it records the test exit code)."""
    from swebench.harness.utils import make_test_spec

    return make_test_spec(instance_dict(task)).eval_script


def with_exports(script: str, exports: str) -> str:
    """`script` with the shell line `exports` just before the test output starts: nothing the script runs
    earlier (installs, git) sees it, and its trace line stays outside the slice swebench parses."""
    from swebench.harness.constants import START_TEST_OUTPUT

    if not exports:
        return script
    marker = f": '{START_TEST_OUTPUT}'"
    head, sep, tail = script.partition(marker)
    if not sep:  # eval_script_for always writes the marker; a script without one gets the line first
        return f"{exports}\n{script}"
    return f"{head}{exports}\n{sep}{tail}"


async def run_script(
    sb: Sandbox, script: str, timeout: float, *, before: str = "", after: str = ""
) -> tuple[str, bool]:
    """Run `script` as the eval script (`before`/`after`: shell run right before/after it in the same exec, e.g.
    the guard's clean-up and record); (log, timed out). A command without an exit status raises Interrupted."""
    await sb.write_file(EVAL_FILE, script)
    # to a file, read back whole: exec output is capped (head + tail) and the parser needs every result line;
    # a fresh name per run, so that no patch can know in advance where to write a fake log
    out = f"{EVAL_OUTPUT}_{secrets.token_hex(8)}.txt"
    cmd = f"{before + ' ; ' if before else ''}/bin/bash {EVAL_FILE} > {out} 2>&1{' ; ' + after if after else ''}"
    res = await sb.exec(cmd, timeout=timeout)
    try:
        log = (await sb.read_file(out)).decode(errors="replace")
    except FileNotFoundError:  # the redirect never happened: the shell itself failed
        log = res.output
    if not res.timed_out:  # a cut-short log would read as failing tests: no verdict instead
        no_exit_status(res, log + "\n" + res.output)
    return log, res.timed_out


def report_from_log(task: Task, patch: str | None, log: str) -> dict[str, Any]:
    """swebench's get_eval_report for this instance on a test log (parser, F2P/P2P report, resolution)."""
    from swebench.harness.grading import get_eval_report
    from swebench.harness.utils import make_test_spec

    spec = make_test_spec(instance_dict(task))
    pred = {"instance_id": task.instance_id, "model_patch": patch, "model_name_or_path": "swe-rl"}
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "test_output.txt"
        path.write_text(log)
        return get_eval_report(spec, pred, str(path), include_tests_status=True)[task.instance_id]


def junit_run(task: Task) -> bool:
    """Whether the graded run adds pytest's junit record: a pytest command (not through tox, which filters the
    environment) whose graded tests are pytest node ids (the record is compared by node id)."""
    graded = [*task.FAIL_TO_PASS, *task.PASS_TO_PASS]
    command = test_section(official_script(task))
    return pytest_command(command) and all("::" in t for t in graded)


@dataclass(frozen=True)
class GradedRun:
    """The official run of one grading: its log (with the trusted exit code), whether it timed out, pytest's record
    of the outer session (None: none added, or dropped), what became of the record ("none" | "kept" |
    "dropped: <why>"), and, when it was dropped, what the first run's record already showed against its log."""

    log: str
    timed_out: bool
    record: dict[str, str] | None = None
    junit: str = "none"
    violations: tuple[str, ...] = ()


async def graded_run(
    sb: Sandbox, task: Task, timeout: float, g: Guard | None, script: str | None = None
) -> GradedRun:
    """The official run (see the module docstring). When pytest's junit record may have changed a result
    (integrity_log.junit_footprint), the verdict comes from a second run without it; the first run's record
    still counts against what that run's log claimed (a forged pass stays a violation). `script`: the official
    script with its editable install guarded (swe_rl.tasks.install_skip, issue 36), else official_script(task)."""
    junit = g is not None and junit_run(task)
    script = script or official_script(task)
    if g is None:
        return GradedRun(*await run_script(sb, script, timeout))
    log, timed_out = await run_script(
        sb, g.eval_script(script, junit), timeout, before=g.clear_cmd, after=g.collect_cmd
    )
    if timed_out or not log.strip():  # an empty log is eval_output_lost, before the exit-code line is added
        return GradedRun(log, timed_out)
    log, record, footprint = await g.read_back(sb, log)
    if not junit or footprint is None:
        return GradedRun(log, False, record, "kept") if junit else GradedRun(log, False)
    claims = log_violations(log, task.log_parser, [*task.FAIL_TO_PASS, *task.PASS_TO_PASS], record)
    first = tuple(v for v in claims if "the log says" in v) if record is not None else ()
    log, timed_out = await run_script(
        sb, g.eval_script(script, False), timeout, before=g.clear_cmd, after=g.collect_cmd
    )
    if not timed_out and log.strip():
        log, _, _ = await g.read_back(sb, log)
    return GradedRun(log, timed_out, None, f"dropped: {footprint}", first)
