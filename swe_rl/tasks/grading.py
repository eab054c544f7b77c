"""Grade a patch for a Task in a fresh sandbox, the way swebench's `run_instance` does, with swebench's functions.

Steps (mirroring swebench.harness.run_evaluation.run_instance): fresh sandbox from the task image -> write the
patch to /tmp/patch.diff -> try swebench's GIT_APPLY_CMDS in order (git apply, --3way, --reject, patch --fuzz=5),
resetting the tree between attempts, then the "already applied" reverse check -> run the eval script built by
swebench's `make_test_spec` (it records the test exit code) -> `get_eval_report` on the log, which parses it with
the instance's `log_parser` and computes the FAIL_TO_PASS / PASS_TO_PASS report and resolved status.

Infrastructure failures (image missing, sandbox failed to start or died, a grading command that ended without an
exit status, test timeout, environment-tier log signatures) give reward None with a `failure` label, after one more
try in a fresh sandbox for the transient ones; a patch that does not apply is the policy's fault: reward 0.
"""

from __future__ import annotations

import asyncio
import dataclasses
import secrets
import shlex
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

from sandboxes.base import (
    ExecResult,
    Sandbox,
    SandboxDiedError,
    SandboxError,
    SandboxStartError,
    SandboxTimeoutError,
)
from swe_rl.tasks import guard, trusted_check
from swe_rl.tasks.integrity import patched_paths
from swe_rl.tasks.integrity_log import is_pytest_run, log_violations, test_section
from swe_rl.tasks.reward import RewardResult, label_suspicious
from swe_rl.tasks.task import Task

# Task -> an unstarted Sandbox running the task's image (grading enters it with `async with`).
SandboxFactory = Callable[[Task], Sandbox]

WORKDIR = "/testbed"
PATCH_FILE = "/tmp/patch.diff"  # swebench's CONTAINER_PATCH_FILE
EVAL_FILE = "/eval.sh"
EVAL_OUTPUT = (
    "/tmp/swe_rl_eval_output"  # + a random suffix: the full log, read back as a file (exec output is capped)
)
LOG_KEEP = 200_000  # characters of test output kept in RewardResult.log (head + tail)
EVAL_TIMEOUT = 1800.0  # seconds; swebench's default --timeout


def docker_factory(config: Any = None, *, run_id: str | None = None) -> SandboxFactory:
    """Fresh DockerSandbox per task at `task.image` (config: a sandboxes DockerSandboxConfig or mapping)."""
    from sandboxes.config import make_sandbox

    def factory(task: Task) -> Sandbox:
        return make_sandbox(config, image=task.image, run_id=run_id, labels={"swe-rl.task": task.instance_id})

    return factory


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
        # edits to (or deletion of) the tests never count
        files = " ".join(shlex.quote(p) for p in patched_paths(task.test_patch))
        lines.append(f"git checkout {task.base_commit or 'HEAD'} -- {files} 2>/dev/null || true")
        lines += ["git apply -v - <<'EOF_114329324912'", task.test_patch.rstrip("\n"), "EOF_114329324912"]
    lines += [f": '{START_TEST_OUTPUT}'", script.strip(), f": '{END_TEST_OUTPUT}'", ""]
    return "\n".join(lines)


def _cap(text: str, keep: int = LOG_KEEP) -> str:
    if len(text) <= keep:
        return text
    half = keep // 2
    return f"{text[:half]}\n... [{len(text) - keep} characters cut] ...\n{text[-half:]}"


async def _materialize(sb: Sandbox, task: Task) -> None:
    """Generated tasks carry their repo as metadata.files (path -> text): write and commit it at /testbed."""
    files: dict[str, str] = task.metadata.get("files") or {}
    if not files:
        return
    for rel, text in files.items():
        await sb.write_file(f"{WORKDIR}/{rel}", text)
    res = await sb.exec(
        "git init -q 2>/dev/null; git add -A && git commit -qm base --allow-empty", cwd=WORKDIR, timeout=120
    )
    if not res.ok:
        raise SandboxError(f"could not commit the generated repo: {res.output[-500:]}")


async def _setup(sb: Sandbox, task: Task) -> None:
    """metadata.setup_script (e.g. R2E-Gym's hiding of its tests) runs in a fresh sandbox before anything else."""
    script = task.metadata.get("setup_script")
    if script:
        await sb.exec(script, cwd=WORKDIR, timeout=300)


async def prepare_sandbox(sb: Sandbox, task: Task) -> None:
    """What every fresh sandbox of `task` needs before an agent or the grader uses it: the generated repo
    (metadata.files) committed at /testbed, then metadata.setup_script (R2E-Gym: hide run_tests.sh and the
    tests). Grading calls it; rollouts should call it right after starting the agent's sandbox."""
    await _materialize(sb, task)
    await _setup(sb, task)


async def _apply_patch(sb: Sandbox, patch: str) -> tuple[bool, str]:
    """swebench's apply chain; returns (applied, log of the attempts)."""
    from swebench.harness.run_evaluation import GIT_APPLY_CMDS

    await sb.write_file(PATCH_FILE, patch)
    log = []
    for attempt, cmd in enumerate(GIT_APPLY_CMDS):
        if attempt:  # a failed attempt (notably --reject) leaves partial state behind: restart from pristine
            await sb.exec("git checkout -- . ; git clean -fd", cwd=WORKDIR, timeout=300)
        res = await sb.exec(f"{cmd} {PATCH_FILE}", cwd=WORKDIR, timeout=300)
        log.append(f"$ {cmd}\n{res.output}")
        _no_exit_status(res, "\n".join(log))
        if res.exit_code == 0:
            return True, "\n".join(log)
    res = await sb.exec(f"git apply --check --reverse {PATCH_FILE}", cwd=WORKDIR, timeout=300)
    _no_exit_status(res, "\n".join(log))
    return res.exit_code == 0, "\n".join(log)


class _Interrupted(Exception):
    """A grading command ended without an exit status (its shell died, or the client gave up on it): the
    sandbox failed, the patch was not judged."""

    def __init__(self, log: str):
        super().__init__("a grading command ended without an exit status")
        self.log = log


def _no_exit_status(res: ExecResult, log: str) -> None:
    # Shell commands exit 0..255; sandboxes report -1 when no status came back (shell died, client timeout).
    if res.exit_code < 0:
        raise _Interrupted(log)


async def restore_harness(sb: Sandbox, task: Task, g: guard.Guard) -> dict[str, Any]:
    """Reset the test-harness files the applied patch touched (read from the tree, swe_rl.tasks.integrity) to
    base + gold; the `integrity` findings so far (restored paths, bytecode, writes inside .git)."""
    changes, restored, bytecode = await guard.restore_after_patch(sb, task, g)
    out: dict[str, Any] = {
        "harness_restored": restored,
        "bytecode": bytecode,
        "git_dir": list(changes.git_dir),
    }
    out["violations"] = (
        [f"the patch wrote inside .git: {list(changes.git_dir)[:5]}"] if changes.git_dir else []
    )
    return out


async def _run_eval(
    sb: Sandbox, task: Task, timeout: float, prefix: str = "", g: guard.Guard | None = None
) -> tuple[str, bool]:
    """Run the eval script (`prefix`: shell assignments for it, e.g. the trusted check's; `g`: the integrity
    guard's environment and exit-code file); (log, timed out)."""
    from swebench.harness.utils import make_test_spec

    spec = make_test_spec(instance_dict(task))
    await sb.write_file(EVAL_FILE, g.eval_script(spec.eval_script) if g else spec.eval_script)
    prefix = (g.env if g else "") + prefix
    # to a file, read back whole: exec output is capped (head + tail) and the parser needs every result line;
    # a fresh name per run, so that no patch can know in advance where to write a fake log
    out = f"{EVAL_OUTPUT}_{secrets.token_hex(8)}.txt"
    collect = f" ; {g.collect_cmd}" if g else ""  # the guard's record, in the same exec
    res = await sb.exec(f"{prefix} /bin/bash {EVAL_FILE} > {out} 2>&1{collect}", timeout=timeout)
    try:
        log = (await sb.read_file(out)).decode(errors="replace")
    except FileNotFoundError:  # the redirect never happened: the shell itself failed
        log = res.output
    if not res.timed_out:  # a cut-short log would read as failing tests: no verdict instead
        _no_exit_status(res, log + "\n" + res.output)
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


def _infra(label: str, log: str = "", tests: dict | None = None) -> RewardResult:
    return RewardResult(reward=None, resolved=False, tests=tests or {}, log=_cap(log), failure=label)


async def _image_missing(task: Task) -> bool:
    from swe_rl.tasks.images import image_exists

    return not await asyncio.to_thread(image_exists, task.image)


# Infrastructure failures worth one more try in a fresh sandbox (a test timeout or a missing image is not).
# eval_output_lost: the eval script's log came back empty (it always prints its xtrace at least). Docker can drop an
# exec's output under load (issue 27: a gold patch was graded unresolved on a log holding only the exit code);
# graded again. Lost in every attempt, it is a reward-integrity violation instead: the code under test can
# truncate its own stdout, and a result no log describes is never resolved (reward 0, not a masked None).
TRANSIENT_FAILURES = frozenset(
    {"sandbox_start_failed", "sandbox_died", "sandbox_error", "eval_interrupted", "eval_output_lost"}
)


async def grade(
    task: Task,
    patch: str | None,
    sandbox_factory: SandboxFactory,
    *,
    timeout: float = EVAL_TIMEOUT,
    attempts: int = 2,
    guards: bool = True,
    detect: bool = True,
) -> RewardResult:
    """Grade `patch` on `task` in a fresh sandbox. reward 1.0 resolved / 0.0 not / None infrastructure failure.

    A transient infrastructure failure (TRANSIENT_FAILURES) is graded again in a fresh sandbox, up to `attempts`
    times in all; the log then starts with what the earlier attempts hit. `guards=False` grades without the tree
    and log guards of swe_rl.tasks.guard, `detect=False` without the trusted check and the tripwire (no
    `suspicious` label): bench/grading.py measures their cost; never for rewards."""
    if attempts < 1:
        raise ValueError(f"attempts: expected at least 1, got {attempts}")
    earlier: list[str] = []
    while True:
        result = await _grade_once(task, patch, sandbox_factory, timeout, guards, detect)
        if result.failure not in TRANSIENT_FAILURES or len(earlier) + 1 >= attempts:
            break
        earlier.append(f"[grading attempt {len(earlier) + 1}: {result.failure}]\n{result.log[-2000:]}")
    if earlier:
        log = "\n".join(earlier) + f"\n[grading attempt {len(earlier) + 1}]\n" + result.log
        result = dataclasses.replace(result, log=_cap(log))
    if result.failure == "eval_output_lost":
        why = f"the eval script's output was empty in all {len(earlier) + 1} grading attempts"
        tests = {**result.tests, "resolved": False, "integrity": {"violations": [why]}}
        result = dataclasses.replace(result, reward=0.0, resolved=False, tests=tests, failure=None)
    return result


async def _grade_once(
    task: Task,
    patch: str | None,
    sandbox_factory: SandboxFactory,
    timeout: float,
    guards: bool = True,
    detect: bool = True,
) -> RewardResult:
    if patch is None:  # swebench: patch_is_None -> not resolved, nothing run
        return RewardResult(0.0, False, {"patch_is_None": True, "resolved": False}, "", None)
    try:
        async with sandbox_factory(task) as sb:
            await prepare_sandbox(sb, task)
            g = await guard.before_patch(sb, task) if guards else None
            applied, apply_log = (True, "") if not patch.strip() else await _apply_patch(sb, patch)
            if not applied:
                tests = {"patch_exists": True, "patch_successfully_applied": False, "resolved": False}
                return RewardResult(0.0, False, tests, _cap(apply_log), None)
            integrity = await restore_harness(sb, task, g) if g else {"violations": []}
            check = await trusted_check.install(sb, WORKDIR) if detect else None
            log, timed_out = await _run_eval(sb, task, timeout, check.prefix if check else "", g)
            if not timed_out and not log.strip():
                return _infra("eval_output_lost", "[the eval script's output came back empty]")
            trusted = await trusted_check.collect(sb, check, log) if check else []
            log, record = await g.read_back(sb, log) if g else (log, None)
            if check and _report(task, patch, log).get("resolved"):
                trusted = list(dict.fromkeys(trusted + await _probe(sb, task, timeout, check, g)))
    except SandboxStartError as e:
        missing = await _image_missing(task)
        return _infra("image_missing" if missing else "sandbox_start_failed", str(e))
    except _Interrupted as e:
        return _infra("eval_interrupted", e.log)
    except SandboxDiedError as e:
        return _infra("sandbox_died", str(e))
    except SandboxTimeoutError as e:
        return _infra("sandbox_timeout", str(e))
    except SandboxError as e:
        return _infra("sandbox_error", str(e))
    if timed_out:
        return _infra("test_timeout", log + f"\n\nTimeout error: {timeout:g} seconds exceeded.")
    report = _report(task, patch, log)
    report["empty_patch"] = not patch.strip()
    if report.get("infra_failure"):
        return _infra(f"environment:{report.get('infra_failure_reason', 'unknown')}", log, report)
    integrity["violations"] += _log_violations(task, log, record) if g else []
    report["integrity"] = integrity
    if integrity["violations"]:  # the log does not describe the run that happened: never a reward
        report["resolved"] = False
    resolved = bool(report["resolved"])
    result = RewardResult(1.0 if resolved else 0.0, resolved, report, _cap(log), None)
    # detected, not prevented: the reward policy decides what a suspicious result earns
    return label_suspicious(result, patch, trusted) if detect else result


def _report(task: Task, patch: str | None, log: str) -> dict[str, Any]:
    if task.metadata.get("grader") == "r2e_gym":
        from swe_rl.tasks.grading_r2e import r2e_report

        return r2e_report(log, task.metadata.get("expected_output") or {})
    return report_from_log(task, patch, log)


async def _probe(
    sb: Sandbox, task: Task, timeout: float, check: trusted_check.TrustedCheck, g: guard.Guard | None
) -> list[str]:
    """A second run of the eval script with the trusted check's assertion-pass probe on, for a result that would
    be resolved: its findings label the episode, its verdict is never used (the probe formats every passing
    assertion's operands, which can change a repository's objects). A probe run that is cut short, or whose pytest
    session leaves no signed report of its own, is itself a finding."""
    await trusted_check.rearm(sb, check)
    try:
        log, timed_out = await _run_eval(sb, task, timeout, check.probe_prefix, g)
    except _Interrupted:
        return ["trusted check: the probe run was cut short"]
    if timed_out:
        return ["trusted check: the probe run timed out"]
    return await trusted_check.collect(sb, check, log)


def _log_violations(task: Task, log: str, record: dict[str, str] | None) -> list[str]:
    """swe_rl.tasks.integrity_log's checks for this task: its graded tests, pytest's record when it is a pytest run."""
    from swebench.harness.utils import make_test_spec

    required = is_pytest_run(task.log_parser, test_section(make_test_spec(instance_dict(task)).eval_script))
    graded = [*task.FAIL_TO_PASS, *task.PASS_TO_PASS]
    return log_violations(log, task.log_parser, graded, record, record_required=required)


def grade_sync(task: Task, patch: str | None, sandbox_factory: SandboxFactory, **kw: Any) -> RewardResult:
    """Blocking `grade` for sync callers (not from inside a running event loop)."""
    return asyncio.run(grade(task, patch, sandbox_factory, **kw))
