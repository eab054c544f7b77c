#!/usr/bin/env python3
# ruff: noqa: UP031  (%-formatting on purpose: these scripts must run on the old Pythons of task images)
"""execute_bash: run one shell command with a timeout and capped output. Runs inside the sandbox (stdlib only).

Usage: execute_bash.py --command CMD [--timeout SECONDS] [--cwd DIR] [--style swe_rl|r2e]
`--style r2e` reports as R2E-Gym's tool does (a first line "Exit code: ...", then [STDOUT] and [STDERR]
sections); the default interleaves both streams and ends with "[exit code: N]".
Output is read as it comes and only its head and tail are kept (a command printing gigabytes costs no memory),
decoded with replacement characters, control characters shown as \\xNN.
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
import threading

BLOCKED_PROGRAMS = {
    "ipython", "jupyter", "pip", "pip3", "nohup",  # DeepSWE / R2E-Gym
    "vi", "vim", "nvim", "nano", "emacs", "less", "more", "man", "top", "htop", "watch", "ssh", "tmux", "screen",
}  # fmt: skip
BLOCKED_GIT = {
    "checkout", "reset", "stash", "commit", "rebase", "clean", "restore", "switch", "merge", "pull", "push",
    "fetch", "cherry-pick", "revert", "am", "clone", "worktree", "filter-branch", "update-ref",
}  # fmt: skip
MAX_OUTPUT_CHARS = 16000
KEEP_BYTES = (
    MAX_OUTPUT_CHARS // 2 - 100
)  # head and tail bytes kept per stream while reading (the rest is counted)
CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f]")
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


def clip(text, limit=MAX_OUTPUT_CHARS):
    if len(text) <= limit:
        return text
    half = limit // 2
    skipped = len(text) - 2 * half
    return text[:half] + "\n<response clipped: %d characters omitted>\n" % skipped + text[-half:]


class Capture:
    """Reads one pipe to its end on a thread, keeping the first and last KEEP_BYTES bytes."""

    def __init__(self, pipe):
        self.head, self.tail, self.total = bytearray(), bytearray(), 0
        self.thread = threading.Thread(target=self._read, args=(pipe,))
        self.thread.daemon = True
        self.thread.start()

    def _read(self, pipe):
        while True:
            chunk = os.read(pipe.fileno(), 65536)
            if not chunk:
                break
            self.total += len(chunk)
            room = KEEP_BYTES - len(self.head)
            if room > 0:
                self.head += chunk[:room]
                chunk = chunk[room:]
            self.tail += chunk
            if len(self.tail) > KEEP_BYTES:
                del self.tail[: len(self.tail) - KEEP_BYTES]

    def text(self):
        self.thread.join(5)
        dropped = self.total - len(self.head) - len(self.tail)
        text = self.head.decode("utf-8", "replace")
        if dropped > 0:
            text += "\n<response clipped: %d bytes omitted>\n" % dropped
        text += self.tail.decode("utf-8", "replace")
        text = text.replace("\r\n", "\n").replace("\r", "\n")
        return CONTROL.sub(lambda m: "\\x%02x" % ord(m.group(0)), text)


def run(command, timeout, cwd, split):
    proc = subprocess.Popen(
        ["bash", "-c", command],
        cwd=cwd,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE if split else subprocess.STDOUT,
        start_new_session=True,  # own process group, so a timeout kills the whole tree
    )
    out = Capture(proc.stdout)
    err = Capture(proc.stderr) if split else None
    try:
        proc.wait(timeout=timeout)
        timed_out = False
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
        timed_out = True
    return proc.returncode, out.text(), err.text() if err else "", timed_out


def emit(text):
    """UTF-8 bytes whatever the sandbox's locale (an ASCII stdout would fail on the first non-ASCII char)."""
    out = getattr(sys.stdout, "buffer", None)
    if out is None:
        sys.stdout.write(text + "\n")
    else:
        out.write((text + "\n").encode("utf-8", "replace"))
        out.flush()


def report_r2e(code, out, err, timed_out, timeout):
    if timed_out:
        return "Exit code: -1\nThe command took too long to execute (>%gs)" % timeout
    status = "0" if code == 0 else "Error: Exit code %d" % code
    half = MAX_OUTPUT_CHARS // 2
    return "Exit code: %s\n[STDOUT]\n\n%s\n\n[STDERR]\n\n%s" % (
        status,
        clip(out.strip(), half),
        clip(err.strip(), half),
    )


def main(argv=None):
    parser = argparse.ArgumentParser(prog="execute_bash")
    parser.add_argument("--command", required=True)
    parser.add_argument("--timeout", type=float, default=90.0)
    parser.add_argument("--cwd", default=None)
    parser.add_argument("--style", default="swe_rl", choices=("swe_rl", "r2e"))
    args = parser.parse_args(argv)
    if not args.command.strip():
        emit("ERROR: empty command.")
        return 1
    reason = blocked_reason(args.command)
    if reason:
        emit("ERROR: " + reason)
        return 1
    cwd = args.cwd if args.cwd and os.path.isdir(args.cwd) else None
    code, out, err, timed_out = run(args.command, args.timeout, cwd, split=args.style == "r2e")
    if args.style == "r2e":
        emit(report_r2e(code, out, err, timed_out, args.timeout))
        return 124 if timed_out else 0
    emit(clip(out.rstrip("\n")))
    if timed_out:
        emit("ERROR: command timed out after %g seconds and was killed." % args.timeout)
        return 124
    emit("[exit code: %d]" % code)
    return 0


if __name__ == "__main__":
    sys.exit(main())
