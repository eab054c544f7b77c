"""Grade a patch for a Task in a fresh sandbox, the way swebench's `run_instance` does, with swebench's functions.

`grade` builds the grading's plan once (swe_rl.grading.plan: swebench's `make_test_spec`, the eval script and
every fact read from it), then runs its steps in a fresh sandbox (`_grade_in_sandbox`), each taking the plan:
1. prepare: fresh sandbox from the task image, `prepare_sandbox`, the tree guard's snapshot (`guard.before_patch`);
2. apply: swebench's GIT_APPLY_CMDS in order (git apply, --3way, --reject, patch --fuzz=5), resetting the tree
   between attempts, then the "already applied" reverse check (`_apply_patch`);
3. restore: harness and runner files the patch touched reset (`restore_harness`), the eval script's editable
   install guarded (swe_rl.grading.install_skip redoes it only for a patch it may concern);
4. fail-fast pre-run (`fail_fast`, training; swe_rl.grading.failfast): a failing F2P test ends the grading
   unresolved; otherwise the grading starts over in a fresh sandbox without it;
5. graded run: the official run (`graded_run`): the plan's eval script plus only the exit-code file and, for a
   pytest run, pytest's junit record (dropped, and the run repeated without it, when it may have changed a
   result: log_rules.junit_footprint);
6. verdict: `get_eval_report` on its log, then the log guards (`_verdict`);
7. probe run (swe_rl.integrity.probe), only for a result that would be resolved: the same script with an
   observer and only FAIL_TO_PASS selected; labels only, never the verdict;
8. cost: each phase's wall clock goes to `tests["cost"]` (swe_rl.grading.cost), the test-run limit it had to
   `tests["test_limit_s"]`.

The row's instance validation (swe_rl.grading.validate, `metadata["validation"]`) is read first: the PASS_TO_PASS
tests it left out for a named environmental reason are out of the verdict for every patch (`tests["validation"]`
says which); an ungradeable instance is not graded (reward None, failure "ungradeable").

Infrastructure failures (image missing, sandbox failed to start or died, a grading command that ended without an
exit status, test timeout, environment-tier log signatures) give reward None with a `failure` label, after one more
try in a fresh sandbox for the transient ones (`_transient`); a patch that does not apply is the policy's fault:
reward 0. So are a timeout, and a sandbox or shell that died or an environment signature in every attempt, on an
instance whose gold grading here was clean (`_patch_caused`): the code under test can cause each, and a masked
reward must not be its way out of a 0.
"""

from __future__ import annotations

import asyncio
import dataclasses
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from sandboxes.base import (
    Sandbox,
    SandboxDiedError,
    SandboxError,
    SandboxStartError,
    SandboxTimeoutError,
)
from swe_rl.grading.cost import Cost, TimedSandbox, with_cost
from swe_rl.grading.eval_run import GradedRun, graded_run, report_from_log
from swe_rl.grading.failfast import PreRun, pre_run
from swe_rl.grading.install_skip import UNKNOWN, guarded, read_packaging
from swe_rl.grading.plan import plan_grading
from swe_rl.grading.reward import RewardResult, label_suspicious
from swe_rl.integrity import guard
from swe_rl.integrity.log_rules import log_violations, status_disagreements
from swe_rl.integrity.probe import Probe, run_probe
from swe_rl.integrity.tripwire import TEST_DIRS_CMD, TestCode
from swe_rl.tasks.eval_script import (
    WORKDIR,
    Interrupted,
    Tampered,
    eval_script_for,
    instance_dict,
    no_exit_status,
)
from swe_rl.tasks.grading_plan import GradingPlan
from swe_rl.tasks.task import Task
from swe_rl.tasks.validation import graded_summary, graded_task, validation_of

# what callers import from here (the graded run lives in swe_rl.grading.eval_run, the eval script in swe_rl.tasks.eval_script)
__all__ = [
    "EVAL_TIMEOUT",
    "TRANSIENT_FAILURES",
    "WORKDIR",
    "SandboxFactory",
    "docker_factory",
    "eval_script_for",
    "grade",
    "grade_sync",
    "graded_run",
    "instance_dict",
    "prepare_sandbox",
    "report_from_log",
    "restore_harness",
]

# Task -> an unstarted Sandbox running the task's image (grading enters it with `async with`).
SandboxFactory = Callable[[Task], Sandbox]

PATCH_FILE = "/tmp/patch.diff"  # swebench's CONTAINER_PATCH_FILE
LOG_KEEP = 200_000  # characters of test output kept in RewardResult.log (head + tail)
EVAL_TIMEOUT = 1800.0  # seconds; swebench's default --timeout


def docker_factory(config: Any = None, *, run_id: str | None = None) -> SandboxFactory:
    """Fresh DockerSandbox per task at `task.image` (config: a sandboxes DockerSandboxConfig or mapping)."""
    from sandboxes.config import make_sandbox

    def factory(task: Task) -> Sandbox:
        return make_sandbox(config, image=task.image, run_id=run_id, labels={"swe-rl.task": task.instance_id})

    return factory


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
        no_exit_status(res, "\n".join(log))
        if res.exit_code == 0:
            return True, "\n".join(log)
    res = await sb.exec(f"git apply --check --reverse {PATCH_FILE}", cwd=WORKDIR, timeout=300)
    no_exit_status(res, "\n".join(log))
    return res.exit_code == 0, "\n".join(log)


async def restore_harness(sb: Sandbox, task: Task, plan: GradingPlan, g: guard.Guard) -> dict[str, Any]:
    """Reset the test-harness files the applied patch touched (read from the tree, swe_rl.integrity.tree) to
    base + gold, and the runner files the gold leaves alone to base; the `integrity` findings so far (restored
    paths, runner files put back, bytecode, writes inside .git)."""
    return (await _restore_tree(sb, task, plan, g))[0]


async def _restore_tree(
    sb: Sandbox, task: Task, plan: GradingPlan, g: guard.Guard
) -> tuple[dict[str, Any], tuple[str, ...]]:
    """restore_harness, and every path the patch touched (the fail-fast pre-run reads them)."""
    changes, restored, bytecode = await guard.restore_after_patch(sb, task, g)
    out: dict[str, Any] = {
        "harness_restored": restored,
        "runner_restored": await guard.restore_runners(sb, task, plan, changes),
        "test_files_removed": await guard.remove_test_files(sb, task, plan, changes),
        "bytecode": bytecode,
        "git_dir": list(changes.git_dir),
    }
    out["violations"] = (
        [f"the patch wrote inside .git: {list(changes.git_dir)[:5]}"] if changes.git_dir else []
    )
    return out, changes.touched


def _infra(label: str, log: str = "", tests: dict | None = None) -> RewardResult:
    return RewardResult(reward=None, resolved=False, tests=tests or {}, log=_cap(log), failure=label)


async def _image_missing(task: Task) -> bool:
    from swe_rl.images.task_images import image_exists

    return not await asyncio.to_thread(image_exists, task.image)


# Infrastructure failures worth one more try in a fresh sandbox (a test timeout or a missing image is not).
# eval_output_lost: the eval script's log came back empty (it always prints its xtrace at least). Docker can drop an
# exec's output under load (a gold patch was once graded unresolved on a log holding only the exit code);
# graded again. Lost in every attempt, it is a reward-integrity violation instead: the code under test can
# truncate its own stdout, and a result no log describes is never resolved (reward 0, not a masked None).
TRANSIENT_FAILURES = frozenset(
    {"sandbox_start_failed", "sandbox_died", "sandbox_error", "eval_interrupted", "eval_output_lost"}
)
ENVIRONMENT = "environment:"  # + swebench's reason: a log with no test results and an environment signature


def _transient(label: str | None) -> bool:
    """Graded once more in a fresh sandbox: TRANSIENT_FAILURES and swebench's environment-tier log signatures (an
    out-of-memory kill, a Docker daemon error: a busy machine, or the code under test printing one)."""
    return label in TRANSIENT_FAILURES or (label or "").startswith(ENVIRONMENT)


# Failures the code under test can cause, turning what would be a failing verdict into a masked one (reward None
# escapes the penalty that 0 gives): tests that run past the limit, a sandbox or grading shell killed under the
# tests, a log with no results that prints an environment signature ("Cannot allocate memory", swebench's
# infra_failure classification, which swebench itself calls advisory: never resolved). The official run never
# resolves any of them. Here they are the patch's (reward 0, failure None, `tests["patch_caused"]` says why) only
# where the gold patch was graded cleanly on this image (the task's validation), so the image and the tests are
# known to work: a timeout when gold's own test run took at most 1/PATCH_TIMEOUT_FACTOR of the limit (a busy machine
# does not slow a run five-fold), a death or an environment signature when it came in every attempt, two at least.
# Without a validation record (or gold's time) they stay infrastructure (reward None).
PATCH_TIMEOUT_FACTOR = 5.0
KILLABLE = frozenset({"sandbox_died", "eval_interrupted"})


def _killable(label: str | None) -> bool:
    return label in KILLABLE or (label or "").startswith(ENVIRONMENT)


def _patch_caused(
    result: RewardResult, labels: list[str | None], record: dict[str, Any] | None, timeout: float
) -> RewardResult:
    if record is None or result.failure is None:
        return result
    gold_s = record.get("gold_test_s")
    if result.failure == "test_timeout" and gold_s is not None and gold_s * PATCH_TIMEOUT_FACTOR <= timeout:
        why = (
            f"the tests ran past the {timeout:g} s limit; the gold patch's test run took {gold_s:.1f} s on this "
            "image (its validation)"
        )
        tests = {**result.tests, "resolved": False}
    elif len(labels) >= 2 and all(_killable(label) for label in labels):
        why = (
            f"the sandbox or its grading shell died, or the log held no results and an environment failure, in "
            f"all {len(labels)} grading attempts ({', '.join(str(label) for label in labels)}); the gold patch's "
            "grading on this image did not (its validation)"
        )
        integrity = result.tests.get("integrity") or {}
        violations = [*(integrity.get("violations") or []), why]
        tests = {**result.tests, "resolved": False, "integrity": {**integrity, "violations": violations}}
    else:
        return result
    tests["patch_caused"] = {"failure": result.failure, "why": why}
    return dataclasses.replace(result, reward=0.0, resolved=False, tests=tests, failure=None)


GOLD_TIMEOUT_FLOOR_S = 60.0  # the least a gold-relative limit gives (task_timeout)


def task_timeout(
    task: Task, limit: float, gold_factor: float | None = None, floor: float = GOLD_TIMEOUT_FLOOR_S
) -> float:
    """The test-run limit for grading `task`: `limit` (the official run's 1800 s); with `gold_factor` (training's
    `grade_timeout_gold_factor`), that many times gold's own test run here (its validation's `gold_test_s`), at
    least `floor` and at most `limit`. One hung patch holds its whole RL step for the limit; gold's time bounds
    how long a patch's tests should take. A factor of at least PATCH_TIMEOUT_FACTOR makes each timeout the
    patch's (reward 0, `_patch_caused`). Without a timed validation: `limit`."""
    if gold_factor is None:
        return limit
    gold_s = (validation_of(task) or {}).get("gold_test_s")
    return limit if gold_s is None else min(limit, max(floor, gold_factor * gold_s))


@dataclass(frozen=True)
class _Options:
    """How one grading runs (grade's keyword arguments), the same for each of its attempts."""

    timeout: float
    guards: bool
    detect: bool


async def grade(
    task: Task,
    patch: str | None,
    sandbox_factory: SandboxFactory,
    *,
    timeout: float = EVAL_TIMEOUT,
    attempts: int = 2,
    guards: bool = True,
    detect: bool = True,
    fail_fast: bool = False,
) -> RewardResult:
    """Grade `patch` on `task` in a fresh sandbox. reward 1.0 resolved / 0.0 not / None infrastructure failure.

    A transient infrastructure failure (`_transient`) is graded again in a fresh sandbox, up to `attempts`
    times in all; the log then starts with what the earlier attempts hit. `guards=False` grades without the tree
    and log guards of swe_rl.integrity.guard, `detect=False` without the trusted check and the tripwire (no
    `suspicious` label): bench/grading.py measures their cost; never for rewards. `fail_fast` runs the
    FAIL_TO_PASS tests first and stops at a failing one (swe_rl.grading.failfast: only an unresolved patch's
    per-test lists can differ). `tests["cost"]`: seconds per phase (swe_rl.grading.cost)."""
    if attempts < 1:
        raise ValueError(f"attempts: expected at least 1, got {attempts}")
    cost, pre = Cost(), None  # what each phase cost (swe_rl.grading.cost); the fail-fast pre-run's outcome
    if patch is None:  # swebench: patch_is_None -> not resolved, nothing run
        return with_cost(RewardResult(0.0, False, {"patch_is_None": True, "resolved": False}, "", None), cost)
    # the row's validation (swe_rl.grading.validate): made from the gold patch before any grading, only read here;
    # an ungradeable instance (FAIL_TO_PASS cannot pass here) is never resolved: reward None, masked in training
    shown = validation_shown(task)
    if shown is not None and shown["status"] == "ungradeable":
        tests = {"resolved": False, "validation": shown}
        return with_cost(RewardResult(None, False, tests, shown["summary"], "ungradeable"), cost)
    record = validation_of(task)  # read before graded_task: the row it was made for lists the left-out tests
    task = graded_task(task)  # PASS_TO_PASS without the tests its validation left out, for every patch
    plan = plan_grading(task, fail_fast=fail_fast)  # once: every attempt and sandbox below reads it
    opts = _Options(timeout, guards, detect)
    earlier: list[str] = []
    labels: list[str | None] = []  # each attempt's failure label
    while True:
        result = await _grade_in_sandbox(task, plan, patch, sandbox_factory, opts, cost, fail_fast)
        if isinstance(result, PreRun) and result.outcome == "timeout":  # the full run runs these tests too
            result = _infra("test_timeout", result.log + f"\n\nTimeout error: {timeout:g} seconds exceeded.")
        elif isinstance(result, PreRun):  # F2P passed in the pre-run (or it could not tell): the official run
            pre, fail_fast = result, False
            continue
        labels.append(result.failure)
        if not _transient(result.failure) or len(earlier) + 1 >= attempts:
            break
        earlier.append(f"[grading attempt {len(earlier) + 1}: {result.failure}]\n{result.log[-2000:]}")
    if earlier:
        log = "\n".join(earlier) + f"\n[grading attempt {len(earlier) + 1}]\n" + result.log
        result = dataclasses.replace(result, log=_cap(log))
    if result.failure == "eval_output_lost":
        why = f"the eval script's output was empty in all {len(earlier) + 1} grading attempts"
        tests = {**result.tests, "resolved": False, "integrity": {"violations": [why]}}
        result = dataclasses.replace(result, reward=0.0, resolved=False, tests=tests, failure=None)
    result = _patch_caused(result, labels, record, timeout)
    # the limit this grading's test runs had (training's gold-relative one, task_timeout, or the official 1800 s)
    tests = {**result.tests, "test_limit_s": timeout}
    if shown is not None:
        tests["validation"] = shown
    result = dataclasses.replace(result, tests=tests)
    return with_cost(result, cost, pre)


def validation_shown(task: Task) -> dict[str, Any] | None:
    """What a result says about the task's validation (None: not validated): its status, the tests left out with
    their reasons and log lines, and the one-line summary reports print."""
    record = validation_of(task)
    if record is None:
        return None
    left = record.get("left_out") or []
    return {
        "status": record["status"],
        "pass_to_pass": len(task.PASS_TO_PASS),
        "graded_pass_to_pass": len(task.PASS_TO_PASS) - len(left),
        "left_out": left,
        "gold_failing": record.get("gold_failing") or [],
        "ungradeable": record.get("ungradeable"),
        "summary": graded_summary(task) or f"graded on all {len(task.PASS_TO_PASS)} PASS_TO_PASS",
    }


async def _grade_in_sandbox(
    task: Task,
    plan: GradingPlan,
    patch: str,
    sandbox_factory: SandboxFactory,
    opts: _Options,
    cost: Cost,
    fail_fast: bool,
) -> RewardResult | PreRun:
    """One attempt, in one fresh sandbox: prepare -> apply -> restore -> fail-fast pre-run -> graded run ->
    verdict -> probe. A PreRun comes back when the pre-run hands the patch to the full run (a fresh sandbox)."""
    probe: Probe | None = None
    try:
        async with TimedSandbox(sandbox_factory(task), cost) as sb:
            g = await _prepare(sb, task, opts, cost)
            test_code = await _test_code(sb, task) if opts.detect else None
            applied, apply_log = await _apply(sb, patch, cost)
            if not applied:
                tests = {"patch_exists": True, "patch_successfully_applied": False, "resolved": False}
                return RewardResult(0.0, False, tests, _cap(apply_log), None)
            integrity, touched, packaging, script = await _restore(sb, task, plan, g, cost)
            pre = (
                await _fail_fast(sb, task, plan, patch, opts, g, touched, packaging, cost)
                if fail_fast
                else None
            )
            if pre is not None and pre.outcome in ("passed", "undecided", "timeout"):
                return pre
            if pre is not None and pre.report is not None:  # a FAIL_TO_PASS test failed first: unresolved
                log, report = pre.log, pre.report | {"empty_patch": not patch.strip(), "integrity": integrity}
            else:
                run = await _graded_run(sb, task, plan, opts, g, script, cost)
                if isinstance(run, RewardResult):
                    return run
                log = run.log
                report = _verdict(task, plan, patch, run, integrity, g is not None, cost)
            if opts.detect and report.get("resolved"):
                probe = await _probe(sb, task, plan, opts, cost, log)
    except SandboxStartError as e:
        missing = await _image_missing(task)
        return _infra("image_missing" if missing else "sandbox_start_failed", str(e))
    except Interrupted as e:
        return _infra("eval_interrupted", e.log)
    except Tampered as e:
        # a grader file replaced or flooded by the code under test: the patch's, never masked
        found: dict[str, Any] = {"resolved": False, "integrity": {"violations": [str(e)]}}
        return RewardResult(0.0, False, found, f"[integrity violation: {e}]", None)
    except SandboxDiedError as e:
        return _infra("sandbox_died", str(e))
    except SandboxTimeoutError as e:
        return _infra("sandbox_timeout", str(e))
    except SandboxError as e:
        return _infra("sandbox_error", str(e))
    return _result(patch, log, report, integrity, probe, opts.detect, test_code)


async def _test_code(sb: Sandbox, task: Task) -> TestCode:
    """The task's test code for the tripwire: its test patch's files and the base commit's test folders (listed
    before the patch is applied; what the task shows alone when the listing fails)."""
    res = await sb.exec(TEST_DIRS_CMD, cwd=WORKDIR, timeout=60)
    dirs = [d for d in res.output.splitlines() if d.strip()] if res.exit_code == 0 else None
    return TestCode.of_task(task.test_patch, dirs)


async def _prepare(sb: Sandbox, task: Task, opts: _Options, cost: Cost) -> guard.Guard | None:
    """The task's sandbox made ready, then the tree guard's snapshot of the pristine tree (None: no guards)."""
    with cost.phase("start"):
        await prepare_sandbox(sb, task)
    with cost.phase("harness_reset"):
        return await guard.before_patch(sb, task) if opts.guards else None


async def _apply(sb: Sandbox, patch: str, cost: Cost) -> tuple[bool, str]:
    """The patch through swebench's apply chain (an empty patch applies as nothing)."""
    with cost.phase("apply"):
        return (True, "") if not patch.strip() else await _apply_patch(sb, patch)


async def _restore(
    sb: Sandbox, task: Task, plan: GradingPlan, g: guard.Guard | None, cost: Cost
) -> tuple[dict[str, Any], tuple[str, ...] | None, str, str]:
    """The tree guard after the patch (harness, runner and test-patch files put back), then the plan's eval
    script with its editable install guarded: (integrity findings, touched paths, packaging text, script)."""
    with cost.phase("harness_reset"):
        integrity, touched = await _restore_tree(sb, task, plan, g) if g else ({"violations": []}, None)
        # the image's editable install is not redone for a patch it cannot concern (most of a django grading)
        packaging = await read_packaging(sb) if touched is not None else UNKNOWN
        script, integrity["install"] = guarded(plan.script, touched, packaging)
    return integrity, touched, packaging, script


async def _fail_fast(
    sb: Sandbox,
    task: Task,
    plan: GradingPlan,
    patch: str,
    opts: _Options,
    g: guard.Guard | None,
    touched: tuple[str, ...] | None,
    packaging: str,
    cost: Cost,
) -> PreRun:
    """The F2P-only pre-run (swe_rl.grading.failfast): only a failing F2P test ends the grading here."""
    with cost.phase("failfast"):
        return await pre_run(sb, task, plan, patch, opts.timeout, g, touched, packaging)


async def _graded_run(
    sb: Sandbox, task: Task, plan: GradingPlan, opts: _Options, g: guard.Guard | None, script: str, cost: Cost
) -> GradedRun | RewardResult:
    """The official run (swe_rl.grading.eval_run); a timeout or an empty log is an infrastructure result."""
    with cost.phase("test_run"):
        run = await graded_run(sb, task, plan, opts.timeout, g, script)
    if run.timed_out:
        return _infra("test_timeout", run.log + f"\n\nTimeout error: {opts.timeout:g} seconds exceeded.")
    if not run.log.strip():
        return _infra("eval_output_lost", "[the eval script's output came back empty]")
    return run


def _verdict(
    task: Task,
    plan: GradingPlan,
    patch: str,
    run: GradedRun,
    integrity: dict[str, Any],
    guarded: bool,
    cost: Cost,
) -> dict[str, Any]:
    """swebench's report on the graded log, with the log guards' violations (each makes it unresolved)."""
    with cost.phase("integrity"):
        integrity["junit"] = run.junit
        integrity["violations"] += run.violations
        report = _report(task, plan, patch, run.log)
        report["empty_patch"] = not patch.strip()
        if guarded:
            integrity["violations"] += _log_violations(
                task, run.log, run.record, integrity["junit"] == "kept"
            )
        report["integrity"] = integrity
        labels = status_disagreements(run.log, task.log_parser, [*task.FAIL_TO_PASS, *task.PASS_TO_PASS])
        if labels:  # printed output read as a status: the official harness reads it too, only a label
            integrity["log_labels"] = labels
        if integrity["violations"]:  # the log does not describe the run that happened: never a reward
            report["resolved"] = False
    return report


def _report(task: Task, plan: GradingPlan, patch: str | None, log: str) -> dict[str, Any]:
    if task.metadata.get("grader") == "r2e_gym":
        from swe_rl.grading.r2e import r2e_report

        return r2e_report(log, task.metadata.get("expected_output") or {})
    return report_from_log(task, plan, patch, log)


async def _probe(sb: Sandbox, task: Task, plan: GradingPlan, opts: _Options, cost: Cost, log: str) -> Probe:
    """The probe run (swe_rl.integrity.probe) after the graded run that wrote `log`; whatever goes wrong in it
    leaves the verdict alone."""
    with cost.phase("probe"):
        try:
            return await run_probe(sb, task, plan, opts.timeout, log)
        except Exception as e:
            return Probe("unavailable", reason=f"the probe failed: {type(e).__name__}: {str(e)[:300]}")


def _result(
    patch: str,
    log: str,
    report: dict[str, Any],
    integrity: dict[str, Any],
    probe: Probe | None,
    detect: bool,
    test_code: TestCode | None = None,
) -> RewardResult:
    """The grading's result from its report: an environment failure in the log, else the verdict with the probe's
    findings as labels."""
    # swebench's environment classification of a log with no results; not where the log guards found that the log
    # does not describe the run (the code under test printed the signature: unresolved, never masked)
    if report.get("infra_failure") and not integrity.get("violations"):
        return _infra(f"{ENVIRONMENT}{report.get('infra_failure_reason', 'unknown')}", log, report)
    if probe is not None:
        integrity["probe"] = probe.as_dict()
    resolved = bool(report["resolved"])
    result = RewardResult(1.0 if resolved else 0.0, resolved, report, _cap(log), None)
    # detected, not prevented: the reward policy decides what a suspicious result earns
    labels = [*(probe.findings if probe else ()), *integrity.get("log_labels", ())]
    return label_suspicious(result, patch, labels, test_code) if detect else result


def _log_violations(task: Task, log: str, record: dict[str, str] | None, required: bool) -> list[str]:
    """swe_rl.integrity.log_rules's checks for this task: its graded tests, pytest's record when there is one."""
    graded = [*task.FAIL_TO_PASS, *task.PASS_TO_PASS]
    return log_violations(log, task.log_parser, graded, record, record_required=required)


async def apply_under_guard(sb: Sandbox, task: Task, patch: str, workdir: str) -> bool:
    """One `git apply` in a long-lived sandbox under the tree guard, for the trainers' cheap grader of generated
    tasks (no fresh sandbox, no swebench apply chain): harness files the patch touched, as the tree shows them,
    reset to the task's; False when the patch does not apply."""
    import base64

    g = await guard.before_patch(sb, task, workdir)
    b64 = base64.b64encode(patch.encode()).decode()
    cmd = f"printf %s {b64} | base64 -d > /tmp/.swe_rl_grade.diff && git apply /tmp/.swe_rl_grade.diff"
    if (await sb.exec(cmd, cwd=workdir, timeout=60)).exit_code != 0:
        return False
    await guard.restore_after_patch(sb, task, g, workdir)
    return True


def grade_sync(task: Task, patch: str | None, sandbox_factory: SandboxFactory, **kw: Any) -> RewardResult:
    """Blocking `grade` for sync callers (not from inside a running event loop)."""
    return asyncio.run(grade(task, patch, sandbox_factory, **kw))
