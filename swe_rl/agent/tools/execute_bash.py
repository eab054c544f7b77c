#!/usr/bin/env python3
# ruff: noqa: UP031  (%-formatting on purpose: these scripts must run on the old Pythons of task images)
"""execute_bash: run one shell command with a timeout and capped output. Runs inside the sandbox (stdlib only).

Usage: execute_bash.py --command CMD [--timeout SECONDS] [--cwd DIR]
Blocked (the agent gets an error observation instead): DeepSWE/R2E-Gym's list (ipython, jupyter, pip, nohup),
interactive programs that would hang without a terminal (editors, pagers, top, ssh, tmux...), and git commands
that rewrite the repository or its history (checkout, reset, stash, commit, rebase, clean, restore, switch,
merge, pull, push, fetch, cherry-pick, revert, am, clone, worktree, filter-branch, update-ref).
The check looks at the first word of every simple command in the line (split on ; & | newline and `$(`).
"""

import argparse
import os
import re
import signal
import subprocess
import sys

BLOCKED_PROGRAMS = {
    "ipython", "jupyter", "pip", "pip3", "nohup",  # DeepSWE / R2E-Gym
    "vi", "vim", "nvim", "nano", "emacs", "less", "more", "man", "top", "htop", "watch", "ssh", "tmux", "screen",
}  # fmt: skip
BLOCKED_GIT = {
    "checkout", "reset", "stash", "commit", "rebase", "clean", "restore", "switch", "merge", "pull", "push",
    "fetch", "cherry-pick", "revert", "am", "clone", "worktree", "filter-branch", "update-ref",
}  # fmt: skip
MAX_OUTPUT_CHARS = 16000
SEGMENT_SPLIT = re.compile(r"\$\(|`|&&|\|\||[;&|\n()]")
ASSIGNMENT = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*=")


def blocked_reason(command):
    for segment in SEGMENT_SPLIT.split(command):
        words = [w for w in segment.strip().split() if not ASSIGNMENT.match(w)]
        while words and words[0] in ("sudo", "env", "exec", "time", "command"):
            words = words[1:]
        if not words:
            continue
        prog = os.path.basename(words[0])
        if prog in BLOCKED_PROGRAMS:
            return "Bash command '%s' is not allowed. Please use a different command or tool." % prog
        if prog.startswith("python") and words[1:3] == ["-m", "pip"]:
            return "Bash command 'pip' is not allowed. Please use a different command or tool."
        if prog == "git":
            sub = next((w for w in words[1:] if not w.startswith("-")), "")
            if sub in BLOCKED_GIT:
                return "'git %s' is not allowed: it would rewrite the repository. Edit files instead." % sub
    return None


def clip(text):
    if len(text) <= MAX_OUTPUT_CHARS:
        return text
    half = MAX_OUTPUT_CHARS // 2
    skipped = len(text) - 2 * half
    return text[:half] + "\n<response clipped: %d characters omitted>\n" % skipped + text[-half:]


def run(command, timeout, cwd):
    proc = subprocess.Popen(
        ["bash", "-c", command],
        cwd=cwd,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        start_new_session=True,  # own process group, so a timeout kills the whole tree
    )
    try:
        out, _ = proc.communicate(timeout=timeout)
        return proc.returncode, out.decode("utf-8", errors="replace"), False
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        out, _ = proc.communicate()
        return -1, out.decode("utf-8", errors="replace"), True


def main(argv=None):
    parser = argparse.ArgumentParser(prog="execute_bash")
    parser.add_argument("--command", required=True)
    parser.add_argument("--timeout", type=float, default=90.0)
    parser.add_argument("--cwd", default=None)
    args = parser.parse_args(argv)
    if not args.command.strip():
        print("ERROR: empty command.")
        return 1
    reason = blocked_reason(args.command)
    if reason:
        print("ERROR: " + reason)
        return 1
    cwd = args.cwd if args.cwd and os.path.isdir(args.cwd) else None
    code, out, timed_out = run(args.command, args.timeout, cwd)
    print(clip(out.rstrip("\n")))
    if timed_out:
        print("ERROR: command timed out after %g seconds and was killed." % args.timeout)
        return 124
    print("[exit code: %d]" % code)
    return 0


if __name__ == "__main__":
    sys.exit(main())
