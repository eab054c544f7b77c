"""A task's eval script and how it runs in a sandbox: what every room that runs it (the graded run, the fail-fast
pre-run, the probe run, the tree guard) shares.

`official_script` is the instance's eval script exactly as swebench's `make_test_spec` writes it; `with_exports`
adds one shell line just before the test output starts; `run_script` runs a script as the eval script and reads
its log back whole from a file with a fresh name. `patched_paths` / `created_paths` read the paths a trusted patch
(test or gold) names or creates.
"""

from __future__ import annotations

import re
import secrets
import shlex
from typing import Any

from sandboxes.base import ExecResult, Sandbox, SandboxError
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


class Tampered(Exception):
    """A file only the grader writes while the tests run (the eval log, the guard's exit-code and junit record) is
    not the regular file of a sane size it wrote: the code under test, which runs as the same user and can find
    it (its own stdout is the log), replaced it by a directory, FIFO, symlink or device, or flooded it. The
    patch's doing (reward 0 with an integrity violation), never an infrastructure failure to mask."""


# bytes of a grader file read back: an eval log is kilobytes to a few megabytes; more is a flood of output
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
    """Run `script` as the eval script (`before`/`after`: shell run right before/after it in the same exec, e.g.
    the guard's clean-up and record); (log, timed out). A command without an exit status raises Interrupted."""
    await sb.write_file(EVAL_FILE, script)
    # to a file, read back whole: exec output is capped (head + tail) and the parser needs every result line;
    # a fresh name per run, so that no patch can know in advance where to write a fake log
    out = f"{EVAL_OUTPUT}_{secrets.token_hex(8)}.txt"
    # the processes of the sandbox before the script (its init, main process and this command's shell chain): every
    # other one is the script's, and is killed when it ends, before `after` collects its results and before the log
    # is read back (a daemon the code under test left, setsid or not, would otherwise rewrite them in place)
    # (only where /proc is the sandbox's own: a container's PID namespace, never a LocalSandbox's host)
    own = getattr(sb, "own_pid_namespace", False) is True
    keep = '__swe_rl_keep=" $(cd /proc && echo [0-9]*) "; ' if own else ""
    reap = f"; {REAP}" if own else ""
    cmd = f"{keep}{before + ' ; ' if before else ''}/bin/bash {EVAL_FILE} > {out} 2>&1{reap}{' ; ' + after if after else ''}"
    res = await sb.exec(cmd, timeout=timeout)
    try:
        log = (await read_result(sb, out, "the eval log")).decode(errors="replace")
    except FileNotFoundError:
        log = res.output  # the redirect never happened: the shell itself failed (or the tests removed it)
    if not res.timed_out:  # a cut-short log would read as failing tests: no verdict instead
        no_exit_status(res, log + "\n" + res.output)
    return log, res.timed_out


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
