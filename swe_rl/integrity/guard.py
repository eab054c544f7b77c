"""The sandbox side of the grader's integrity guards (swe_rl.integrity.tree, swe_rl.integrity.log_rules), in the
order grading runs them:

    g = await before_patch(sb, task)      # snapshot of the pristine tree; the image's shadow set (cached)
    ...apply the patch...
    changes, restored, bytecode = await restore_after_patch(sb, task, g)   # harness files back to base + gold
    runners = await restore_runners(sb, task, plan, changes)   # runner files the gold leaves alone back to base
    script = g.eval_script(plan.script, plan.junit)   # + the exit code to a file outside /testbed (+ pytest's record)
    sb.exec(f"{g.clear_cmd}; /bin/bash /eval.sh > out; {g.collect_cmd}")
    log, record, footprint = await g.read_back(sb, log)   # trusted exit code in the log; junit outcomes or None

Every per-grading file lives under /tmp with a fresh nonce, outside the repository.
"""

from __future__ import annotations

import asyncio
import base64
import re
import secrets
from dataclasses import dataclass

from sandboxes.base import Sandbox, SandboxError
from swe_rl.integrity import shadow
from swe_rl.integrity.log_rules import RECORD_MAX, junit_footprint, junit_outcomes, trusted_log
from swe_rl.integrity.tree import (
    TOPS_MARK,
    TreeChanges,
    changes_cmd,
    classify,
    parse_changes,
    restore_script,
    snapshot_cmd,
)
from swe_rl.tasks.grading_plan import GradingPlan
from swe_rl.tasks.task import Task

WORKDIR = "/testbed"
GOLD_FILE = "/tmp/swe_rl_gold.diff"  # the gold patch, when its hunks for test-harness files are re-applied
INLINE_MAX = 48_000  # bytes of the change list returned in the exec's output (caps are 100 KB by default)
_EXIT_ECHO = 'echo ">>>>> Test Exit Code: $SWEBENCH_TEST_EXIT_CODE"'  # swebench's record_test_exit_code line


@dataclass(frozen=True)
class Guard:
    """One grading's guard state: the nonce of its files and the image's shadow set."""

    nonce: str
    shadow: frozenset[str]

    def path(self, what: str) -> str:
        return f"/tmp/.swe_rl_guard_{self.nonce}_{what}"

    @property
    def junit(self) -> str:
        return self.path("junit") + "/junit.xml"

    def exports(self, junit: bool) -> str:
        """The shell line the graded run adds before its test command: pytest's junit record of the outer session
        (kept: the image's own PYTEST_ADDOPTS), for pytest runs only. No PYTHONPYCACHEPREFIX: it would recompile
        every imported module on every run (1.8x the grading time here); bytecode the patch brought is removed
        from the tree instead."""
        return f'export PYTEST_ADDOPTS="--junitxml={self.junit} ${{PYTEST_ADDOPTS:-}}"' if junit else ""

    def eval_script(self, script: str, junit: bool) -> str:
        """swebench's eval script, also writing the test command's exit status to a file outside /testbed (after
        the tests) and, for a pytest run, exporting the junit record's path just before the test output."""
        from swe_rl.tasks.eval_script import with_exports

        rc = f"printf '%s\\n' \"$SWEBENCH_TEST_EXIT_CODE\" > {self.path('rc')}"
        return with_exports(script.replace(_EXIT_ECHO, f"{_EXIT_ECHO}\n{rc}", 1), self.exports(junit))

    @property
    def clear_cmd(self) -> str:
        """Shell removing an earlier run's exit code, record and junit file (run right before the eval script)."""
        return f"rm -rf {self.path('rc')} {self.path('record')} {self.path('junit')}"

    @property
    def collect_cmd(self) -> str:
        """Shell gathering the eval script's exit code and pytest's record into one file (run right after the
        eval script, in the same exec: `read_back` then only reads it)."""
        rc, junit = self.path("rc"), self.junit
        # the record made anew (a FIFO the tests left at its path would block the write); the exit code and the
        # junit file read only as the regular files written (a FIFO would block the read, a link lead elsewhere):
        # anything else there is marked T, the code under test's doing (read_back)
        return (
            f"rm -rf {self.path('record')}; "
            f"{{ {_other(rc)} && printf T || cat {rc} 2>/dev/null; printf '\\0'; "
            f"if {_other(junit)}; then printf T; elif [ -f {junit} ]; then printf J; head -c {RECORD_MAX} {junit}; fi;"
            f" true; }} > {self.path('record')}"
        )

    async def read_back(self, sb: Sandbox, log: str) -> tuple[str, dict[str, str] | None, str | None]:
        """(the log with the eval script's own exit code, pytest's record of the session or None, why the junit
        record may have changed the run or None: `junit_footprint`)."""
        from swe_rl.tasks.eval_script import Tampered, read_result

        what = "the grader's exit-code and junit record"
        try:
            raw = await read_result(sb, self.path("record"), what)
        except FileNotFoundError:  # collect_cmd did not run with the eval script
            await sb.exec(self.collect_cmd, timeout=120)
            try:
                raw = await read_result(sb, self.path("record"), what)
            except FileNotFoundError:
                return log, None, None
        code_text, _, junit_text = raw.decode("utf-8", errors="replace").partition("\0")
        for part, name in ((code_text, self.path("rc")), (junit_text, self.junit)):
            if part.startswith("T"):
                raise Tampered(
                    f"{name} is not the regular file the eval script writes (a FIFO, link or folder)"
                )
        # ASCII digits only: str.isdigit() is true for "²", which int() refuses
        code = int(code_text.strip()) if re.fullmatch(r"-?[0-9]+", code_text.strip()) else None
        junit_text = junit_text[1:] if junit_text.startswith("J") else ""
        record = junit_outcomes(junit_text) if junit_text else None
        return trusted_log(log, code), record, junit_footprint(log, junit_text, code)


def _other(path: str) -> str:
    """Shell test: something other than a regular file (or nothing) is at `path`."""
    return f"{{ [ -L {path} ] || {{ [ -e {path} ] && [ ! -f {path} ]; }}; }}"


async def _exec_ok(sb: Sandbox, cmd: str, what: str, workdir: str = WORKDIR) -> str:
    res = await sb.exec(cmd, cwd=workdir, timeout=300)
    if res.exit_code < 0:  # no exit status: the grading shell died (grading's eval_interrupted)
        from swe_rl.tasks.eval_script import Interrupted

        raise Interrupted(res.output)
    if res.exit_code != 0:
        raise SandboxError(f"{what}: {res.output[-500:]}")
    return res.output


async def before_patch(sb: Sandbox, task: Task, workdir: str = WORKDIR) -> Guard:
    """Snapshot the tree before the patch; probe the image's shadow set when it is not cached (the pristine
    sandbox: nothing of the patch has run)."""
    g = Guard(secrets.token_hex(8), frozenset())
    key = await asyncio.to_thread(shadow.image_key, task.image)
    names = shadow.cached(key)
    cmd = snapshot_cmd(g.path("before"))
    if names is None:
        cmd += " && " + shadow.probe_cmd(g.path("shadow"))
    await _exec_ok(sb, cmd, "could not list the tree before the patch", workdir)
    if names is None:
        names = shadow.parse_probe((await sb.read_file(g.path("shadow"))).decode(errors="replace"))
        shadow.store(key, names)
    return Guard(g.nonce, names)


async def tree_changes(sb: Sandbox, task: Task, g: Guard, workdir: str = WORKDIR) -> TreeChanges:
    """What the applied patch changed in the tree (compared with the snapshot before it)."""
    dest = g.path("changes")
    cmd = changes_cmd(g.path("before"), g.path("after"), task.base_commit or "HEAD", dest)
    # small lists come back base64 in the same exec (one round trip), big ones are read back as a file
    inline = f'{{ [ "$(wc -c < {dest})" -le {INLINE_MAX} ] && base64 -w0 {dest}; true; }}'
    out = await _exec_ok(sb, f"{cmd} && {inline}", "could not list the tree", workdir)
    try:
        raw = base64.b64decode(out.strip(), validate=True) if out.strip() else b""
    except ValueError:
        raw = b""
    return parse_changes(raw if TOPS_MARK in raw else await sb.read_file(dest))


async def restore_after_patch(
    sb: Sandbox, task: Task, g: Guard, workdir: str = WORKDIR
) -> tuple[TreeChanges, list[str], list[str]]:
    """Reset the harness files the patch touched to base + gold; (changes, restored paths, bytecode paths)."""
    from swe_rl.tasks.eval_script import patched_paths

    changes = await tree_changes(sb, task, g, workdir)
    paths = classify(changes.touched, g.shadow, changes.base_tops)
    if not paths:
        return changes, [], []
    gold_paths = [p for p in patched_paths(task.patch) if p in paths]
    if gold_paths:
        await sb.write_file(GOLD_FILE, task.patch)
    script = restore_script(paths, task.base_commit or "HEAD", GOLD_FILE, gold_paths)
    await _exec_ok(sb, script, f"could not restore the test harness files {sorted(paths)[:20]}", workdir)
    bytecode = sorted(p for p, k in paths.items() if k == "bytecode")
    return changes, sorted(paths), bytecode


async def restore_runners(
    sb: Sandbox, task: Task, plan: GradingPlan, changes: TreeChanges, workdir: str = WORKDIR
) -> list[str]:
    """Put the runner files the patch touched and the gold patch leaves alone back at the base commit
    (swe_rl.integrity.tree.RUNNER_FILES: django's and sympy's test runners and result reporting, the script the
    test command runs); the paths put back."""
    from swe_rl.integrity.tree import runner_paths

    paths = runner_paths(changes.touched, plan.runner_files, plan.gold_paths)
    if paths:
        script = restore_script(dict.fromkeys(paths, "revert"), task.base_commit or "HEAD", None, [])
        await _exec_ok(sb, script, f"could not restore the runner files {paths[:20]}", workdir)
    return paths


async def remove_test_files(
    sb: Sandbox, task: Task, plan: GradingPlan, changes: TreeChanges, workdir: str = WORKDIR
) -> list[str]:
    """Remove the files the test patch creates that the patch created too; the paths removed. The eval script's
    `git apply` of the test patch is atomic: one file already there and none of the test patch applies, so the
    tests run would be the patch's own (what SWE-bench's harness does). Removed, the test patch applies as it
    does for the gold patch."""
    from swe_rl.integrity.tree import test_files_to_remove

    paths = test_files_to_remove(changes.touched, plan.test_files, plan.gold_paths)
    if paths:
        script = restore_script(dict.fromkeys(paths, "revert"), task.base_commit or "HEAD", None, [])
        await _exec_ok(sb, script, f"could not remove the test patch's files {paths[:20]}", workdir)
    return paths
