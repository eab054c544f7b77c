"""The graded run: the official run of one grading, and swebench's report on a log.

The graded run is the instance's eval script exactly as swebench's `make_test_spec` writes it
(swe_rl.tasks.eval_script.official_script), plus only what reads its result reliably (swe_rl.integrity.guard: the
exit-code file, and for a pytest run pytest's junit record, exported just before the test output starts). The
probe run (swe_rl.integrity.probe) runs the same script with its own exports instead. Both run as the official
harness runs it, in a fresh exec whose output stream is the log (swe_rl.tasks.eval_script.run_script): what the tests
printed cannot be rewritten once printed.
"""

from __future__ import annotations

import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from sandboxes.base import Sandbox
from swe_rl.integrity.guard import Guard
from swe_rl.integrity.log_rules import log_violations
from swe_rl.tasks.eval_script import run_script
from swe_rl.tasks.grading_plan import GradingPlan
from swe_rl.tasks.task import Task


def report_from_log(task: Task, plan: GradingPlan, patch: str | None, log: str) -> dict[str, Any]:
    """swebench's get_eval_report for this instance on a test log (parser, F2P/P2P report, resolution)."""
    from swebench.harness.grading import get_eval_report

    spec = plan.spec
    pred = {"instance_id": task.instance_id, "model_patch": patch, "model_name_or_path": "swe-rl"}
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "test_output.txt"
        path.write_text(log)
        return get_eval_report(spec, pred, str(path), include_tests_status=True)[task.instance_id]


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
    sb: Sandbox, task: Task, plan: GradingPlan, timeout: float, g: Guard | None, script: str | None = None
) -> GradedRun:
    """The official run (see the module docstring). When pytest's junit record may have changed a result
    (log_rules.junit_footprint), the verdict comes from a second run without it; the first run's record
    still counts against what that run's log claimed (a forged pass stays a violation). `script`: the official
    script with its editable install guarded (swe_rl.grading.install_skip), else the plan's."""
    junit = g is not None and plan.junit
    script = script or plan.script
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
