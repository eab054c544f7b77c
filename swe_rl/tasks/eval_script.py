"""A task's eval script and how it runs in a sandbox: what every room that runs it (the graded run, the fail-fast
pre-run, the probe run, the tree guard) shares.

`official_script` is the instance's eval script exactly as swebench's `make_test_spec` writes it; `with_exports`
adds one shell line just before the test output starts; `run_script` runs a script as the eval script, its log
the exec's own output stream (as the official harness reads it). `patched_paths` / `created_paths` read the paths a trusted patch
(test or gold) names or creates.
"""

from __future__ import annotations

import re
import shlex
from typing import Any

from sandboxes.base import ExecResult, Sandbox, SandboxError
from swe_rl.tasks.task import Task

WORKDIR = "/testbed"
EVAL_FILE = "/eval.sh"


class Interrupted(Exception):
    """A grading command ended without an exit status (its shell died, or the client gave up on it): the
    sandbox failed, the patch was not judged."""

    def __init__(self, log: str):
        super().__init__("a grading command ended without an exit status")
        self.log = log


class Tampered(Exception):
    """The eval log is a flood (over RESULT_MAX), or a file only the grader writes while the tests run (the guard's
    exit-code and junit record) is not the regular file of a sane size it wrote: the code under test, which runs as
    the same user and can find it, replaced it by a directory, FIFO, symlink or device, or flooded it. The patch's
    doing (reward 0 with an integrity violation), never an infrastructure failure to mask."""


# bytes of an eval log or a grader file read back: a log is kilobytes to a few megabytes; more is a flood of output
RESULT_MAX = 256 << 20
# what is at the path, without following a link and without opening it (a FIFO would block an open)
_KIND = (
    'if [ -L "$1" ]; then echo "symbolic link"; elif [ -f "$1" ]; then echo "file $(stat -c %s -- "$1")"; '
    'elif [ -e "$1" ]; then stat -c %F -- "$1"; else echo missing; fi'
)


async def _kind(sb: Sandbox, path: str) -> str:
    res = await sb.exec(f"sh -c {shlex.quote(_KIND)} sh {shlex.quote(path)}", timeout=60)
    no_exit_status(res, res.output)
    return res.output.strip()


def _check_kind(kind: str, path: str, what: str) -> None:
    size = kind.removeprefix("file ")
    if size != kind and re.fullmatch(r"[0-9]+", size):
        if int(size) > RESULT_MAX:
            raise Tampered(f"{what} {path} is {int(size)} bytes, over the {RESULT_MAX} the grader reads back")
        return
    if kind != "missing":
        raise Tampered(
            f"{what} {path} is a {kind or 'thing stat cannot name'}, not the file the grader wrote"
        )


async def read_result(sb: Sandbox, path: str, what: str) -> bytes:
    """The bytes of a grader file at `path` (FileNotFoundError when there is none); Tampered when something
    else is there, before or after a read that failed (swapped in between: a FIFO blocks the read until its
    timeout, a link to /dev/zero floods it)."""
    kind = await _kind(sb, path)
    _check_kind(kind, path, what)
    if kind == "missing":
        raise FileNotFoundError(path)
    try:
        return await sb.read_file(path)
    except SandboxError:
        _check_kind(await _kind(sb, path), path, what)
        raise


# kill -9 every process not in $__swe_rl_keep, three passes (a fork caught between the listing and its parent's
# death is found by the next); kill is a builtin and the glob forks nothing, so the shell lists only what was there
REAP = (
    "for __swe_rl_n in 1 2 3; do for __swe_rl_d in /proc/[0-9]*; do __swe_rl_q=${__swe_rl_d#/proc/}; "
    'case "$__swe_rl_keep" in *" $__swe_rl_q "*) ;; *) kill -9 "$__swe_rl_q" 2>/dev/null ;; esac; done; '
    "sleep 0.02; done"
)


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
    """Run `script` as the eval script, as swebench's harness does: `/bin/bash /eval.sh` in a fresh exec (the
    sandbox's `exec_once`: one `docker exec`), its log that exec's output stream, read whole (up to RESULT_MAX).
    What the tests print leaves the container as they print it: code under test can add lines, never rewrite the
    log afterwards (a log file in the container, root code could rewrite in place). `before`/`after`: shell run
    right before/after the script in the same exec, their output not in the log (the guard's clean-up and record).
    (log, timed out). Raises Interrupted when the exec ended without its shell's own exit (the shell was killed),
    Tampered when the log is over RESULT_MAX (a flood)."""
    once = getattr(sb, "exec_once", None)
    if once is None:
        raise SandboxError(
            f"grading runs the eval script in a one-shot exec (exec_once), which {type(sb).__name__} does not "
            "have; the docker, local and ray sandboxes do"
        )
    await sb.write_file(EVAL_FILE, script)
    # the processes of the sandbox before the script (its init, main process, its shell and this exec's chain):
    # every other one is the script's, and is killed when it ends, before `after` collects its results (a daemon
    # the code under test left, setsid or not, would otherwise rewrite them in place, or hold the stream open)
    # (only where /proc is the sandbox's own: a container's PID namespace, never a LocalSandbox's host)
    own = getattr(sb, "own_pid_namespace", False) is True
    steps = ['__swe_rl_keep=" $(cd /proc && echo [0-9]*) "'] if own else []
    steps += [f"{{ {before} ; }} > /dev/null 2>&1"] if before else []
    steps += [f"/bin/bash {EVAL_FILE} 2>&1"] + ([REAP] if own else [])
    steps += [f"{{ {after} ; }} > /dev/null 2>&1"] if after else []
    # the shell's own end: any other status with no timeout is a killed shell (the engine's code, not a marker)
    res = await once("; ".join([*steps, "exit 0"]), timeout=timeout, output_limit=RESULT_MAX)
    if res.output_total is not None and res.output_total > RESULT_MAX:
        raise Tampered(
            f"the eval log is {res.output_total} bytes, over the {RESULT_MAX} the grader reads back"
        )
    if not res.timed_out and res.exit_code != 0:  # a cut-short log would read as failing tests: no verdict
        raise Interrupted(
            f"{res.output}\n[the eval script's exec ended with status {res.exit_code}: its shell was killed]"
        )
    return res.output, res.timed_out


_DIFF_PATH = re.compile(r"^diff --git a/(.+?) b/(.+)$", re.M)
_CREATED = re.compile(r"^--- /dev/null\n\+\+\+ b/(.+?)\t?$", re.M)


def patched_paths(patch: str | None) -> list[str]:
    """Repo paths named by a patch's `diff --git` headers. For the test patch and the gold patch (trusted text)
    only: what an agent's patch touched is read from the tree (TreeChanges)."""
    seen: dict[str, None] = {}
    for a, b in _DIFF_PATH.findall(patch or ""):
        seen.setdefault(a)
        seen.setdefault(b)
    return list(seen)


def created_paths(patch: str | None) -> list[str]:
    """Repo paths a (trusted) patch creates (`--- /dev/null`): the test patch's new test files."""
    return list(dict.fromkeys(_CREATED.findall(patch or "")))
