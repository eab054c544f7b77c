"""The persistent-shell wire protocol, shared by every backend that drives a long-lived bash over a byte stream.

One `bash --noprofile --norc` (the *parent*) reads scripts from its stdin. Each command runs in a *child* bash
under `timeout -k` (the inside timeout: it signals the child's whole process group, so background children die
with a timed-out command; by default the group is also killed when the command ends, so nothing it started in
the background outlives it unless it left the group with `setsid`). Before exiting, the child dumps its cwd and exported environment into the state dir;
the parent applies them, so `cd` and `export` persist. The parent then prints an end marker carrying a nonce the
command cannot see (it lives only in the parent's stdin) and the exit code, so output is delimited reliably even
without a trailing newline, with binary output, or when the command prints marker-looking text.

Commits are atomic with bash builtins only (no `mv`): the child's state counts only once its `child_ok` flag is
written after it, and the parent commits into two alternating slots (`state0`/`state1`), each ending in a
`: sbx-commit N` line; a fresh shell restores the complete slot with the highest N. A shell killed mid-commit (a
client deadline's session kill can catch the parent after its command died but before it was itself killed)
so leaves a torn slot that is ignored, never a half-written state that loses exported variables.

Not persisted between commands: unexported shell variables, functions, aliases, shell options.
"""

from __future__ import annotations

import secrets
import shlex
from dataclasses import dataclass, field

MARK = b"__SBX_"  # marker prefix; the full marker is MARK + 32 hex nonce + "_" + 3-digit exit code
_MARK_LEN = len(MARK) + 32 + 1 + 3


def check_env(env: dict[str, str] | None) -> dict[str, str]:
    env = dict(env or {})
    for key, value in env.items():
        if not (key.isidentifier() and key.isascii()):
            raise ValueError(f"env: variable name {key!r} is not a valid shell identifier")
        if not isinstance(value, str):
            raise ValueError(f"env[{key!r}]: expected a string, got {type(value).__name__}")
    return env


def check_output_limit(limit: int | None, default: int) -> int:
    """A command's own output cap (None: the sandbox's `output_limit`)."""
    if limit is None:
        return default
    if isinstance(limit, bool) or not isinstance(limit, int) or limit < 64:
        raise ValueError(f"output_limit: expected a whole number of bytes >= 64, got {limit!r}")
    return limit


# seconds a one-shot command's output is still read after it exited, while a process it left holds the stream open
# (Docker's own grace for an exec; the local backend keeps the same)
ONE_SHOT_DRAIN_S = 2.0


def init_script(state_dir: str, workdir: str | None, nonce: str) -> bytes:
    """First input of a fresh parent shell: merge stderr, restore the last committed cwd/env, print READY+pid."""
    s = shlex.quote(state_dir)
    wd = f"cd -- {shlex.quote(workdir)} 2>/dev/null\n" if workdir else ""
    return (
        "exec 2>&1\n"
        f"mkdir -p {s}\n"
        f"{wd}"
        # the newest complete commit slot (see the module docstring); a torn slot lacks its last line
        "__sb_g=0; __sb_best=\n"
        f"for __sb_f in {s}/state0 {s}/state1; do\n"
        '  [ -s "$__sb_f" ] || continue; mapfile -t __sb_l < "$__sb_f" 2>/dev/null; (( ${#__sb_l[@]} )) || continue\n'
        "  [[ ${__sb_l[-1]-} =~ ^:\\ sbx-commit\\ ([0-9]+)$ ]] || continue\n"
        "  (( BASH_REMATCH[1] > __sb_g )) && { __sb_g=${BASH_REMATCH[1]}; __sb_best=$__sb_f; }\n"
        "done\n"
        'if [ -n "$__sb_best" ]; then . "$__sb_best" 2>/dev/null; cd -- "$__sb_cwd" 2>/dev/null; fi\n'
        "unset __sb_f __sb_l __sb_best __sb_cwd\n"
        # the output before the READY marker is the shell's pid = its session id (killed on a client deadline)
        "printf 'pid=%d' $$\n"
        f"printf '{MARK.decode()}{nonce}_%03d' 0\n"
    ).encode(errors="surrogateescape")


def command_script(
    cmd: str,
    *,
    state_dir: str,
    nonce: str,
    timeout: float,
    kill_grace: float,
    cwd: str | None,
    env: dict[str, str] | None,
    kill_background: bool = True,
) -> bytes:
    """Script the parent runs for one command (see the module docstring for the protocol).

    Only bash builtins run in the parent, so a round trip costs two exec()s (`timeout` and the child bash).
    """
    env = check_env(env)
    s = shlex.quote(state_dir)
    keep_cwd = cwd is None  # a per-command cwd does not move the shell
    child = (  # child_ok last: a child killed mid-dump (timeout -k) leaves no flag and so commits nothing
        f"trap '__sb_rc=$?; export -p > {s}/child_env 2>/dev/null && "
        + (f"pwd > {s}/child_cwd 2>/dev/null && " if keep_cwd else "")
        + f"echo 1 > {s}/child_ok; exit $__sb_rc' EXIT\n"
        + (f"cd -- {shlex.quote(cwd)} || exit 1\n" if cwd else "")
        + f". {s}/cmd\n"
    )
    heredoc = "SBXCMD_" + secrets.token_hex(
        16
    )  # a second nonce: the end marker's nonce is not in the command
    lines = [
        f": > {s}/child_ok; : > {s}/child_cwd",
        f"IFS= read -r -d '' __sb_c <<'{heredoc}'",
        cmd + "\n" + heredoc,  # read -d '' keeps every byte up to the delimiter line (minus our newline)
        f'printf %s "${{__sb_c%?}}" > {s}/cmd; unset __sb_c',
    ]
    if env:
        names = " ".join(env)
        lines.append(f"__sb_saved=$(declare -p {names} 2>/dev/null)")
    assigns = "".join(f"{k}={shlex.quote(v)} " for k, v in env.items())  # prefix assignments: child only
    # `timeout` makes itself leader of a new process group, so $! is that group's id
    lines.append(
        f"{assigns}timeout -k {kill_grace:.3f}s {timeout:.3f}s "
        f"bash --noprofile --norc -c {shlex.quote(child)} </dev/null & wait $!"
    )
    lines.append("__sb_rc=$?")
    if kill_background:  # the command's leftover background processes die with it (setsid ones escape)
        # SIGKILL is asynchronous: until the group's last member is gone (up to 1 s), a fork bomb's children can
        # still be dying when the next command runs; the wait costs one builtin when the group is already gone
        lines.append(
            "kill -9 -- -$! 2>/dev/null; __sb_w=0; "
            "while kill -0 -- -$! 2>/dev/null && [ $__sb_w -lt 100 ]; do sleep 0.01; __sb_w=$((__sb_w + 1)); done"
        )
    lines += [
        f"if [ -s {s}/child_ok ]; then",
        f'  if [ -s {s}/child_cwd ]; then IFS= read -r __sb_d < {s}/child_cwd; cd -- "$__sb_d" 2>/dev/null; fi',
        # unset every exported variable (builtins only: ${!p@} lists names by prefix), then apply the child's
        "  for __sb_v in ${!A@} ${!B@} ${!C@} ${!D@} ${!E@} ${!F@} ${!G@} ${!H@} ${!I@} ${!J@} ${!K@} ${!L@} "
        "${!M@} ${!N@} ${!O@} ${!P@} ${!Q@} ${!R@} ${!S@} ${!T@} ${!U@} ${!V@} ${!W@} ${!X@} ${!Y@} ${!Z@} "
        "${!a@} ${!b@} ${!c@} ${!d@} ${!e@} ${!f@} ${!g@} ${!h@} ${!i@} ${!j@} ${!k@} ${!l@} ${!m@} ${!n@} "
        "${!o@} ${!p@} ${!q@} ${!r@} ${!s@} ${!t@} ${!u@} ${!v@} ${!w@} ${!x@} ${!y@} ${!z@} ${!_@}; do",
        '    [[ ${!__sb_v@a} == *x* ]] 2>/dev/null && unset "$__sb_v" 2>/dev/null',
        "  done",
        f"  . {s}/child_env 2>/dev/null",
        "fi",
    ]
    if env:
        lines.append(f'unset {names} 2>/dev/null; eval "$__sb_saved"')
    lines += [  # commit into the older slot; its last line marks it complete
        f"__sb_g=$((__sb_g + 1)); {{ export -p; printf '__sb_cwd=%q\\n' \"$PWD\"; "
        f'echo ": sbx-commit $__sb_g"; }} > {s}/state$((__sb_g & 1)) 2>/dev/null',
        f"printf '{MARK.decode()}{nonce}_%03d' \"$__sb_rc\"",
        "",
    ]
    return "\n".join(lines).encode(errors="surrogateescape")


def one_shot_argv(cmd: str, timeout: float, kill_grace: float) -> list[str]:
    """argv of the one-shot mode: a fresh non-interactive bash under coreutils `timeout -k` (no shell state)."""
    return [
        "timeout",
        "-k",
        f"{kill_grace:.3f}s",
        f"{timeout:.3f}s",
        "bash",
        "--noprofile",
        "--norc",
        "-c",
        cmd,
    ]


def new_nonce() -> str:
    return secrets.token_hex(16)


@dataclass
class OutputCap:
    """Keeps the first and last `limit // 2` bytes of a stream and counts what was cut. Memory: O(limit)."""

    limit: int  # total bytes kept
    head: bytearray = field(default_factory=bytearray)
    tail: bytearray = field(default_factory=bytearray)
    total: int = 0  # bytes seen

    def add(self, data: bytes) -> None:
        self.total += len(data)
        half = self.limit // 2
        room = half - len(self.head)
        if room > 0:
            self.head += data[:room]
            data = data[room:]
        if data:
            self.tail += data[-(self.limit - half) :]
            excess = len(self.tail) - (self.limit - half)
            if excess > 0:
                del self.tail[:excess]

    def text(self) -> str:
        cut = self.total - len(self.head) - len(self.tail)
        if cut <= 0:
            return (bytes(self.head) + bytes(self.tail)).decode("utf-8", errors="replace")
        head = bytes(self.head).decode("utf-8", errors="replace")
        tail = bytes(self.tail).decode("utf-8", errors="replace")
        return f"{head}\n[... {cut} bytes of output cut (limit {self.limit} bytes) ...]\n{tail}"


@dataclass
class MarkerScanner:
    """Feeds stream bytes to an OutputCap until the end marker for `nonce` appears; then `exit_code` is set."""

    nonce: str
    cap: OutputCap
    exit_code: int | None = None
    pending: bytes = b""  # bytes that might be the start of the marker; not yet committed to the cap
    after: bytes = b""  # bytes after the marker (stray output of background processes)

    def feed(self, data: bytes) -> bool:
        """Returns True once the marker was seen."""
        if self.exit_code is not None:
            self.after += data
            return True
        buf = self.pending + data
        marker = MARK + self.nonce.encode() + b"_"
        idx = buf.find(marker)
        if idx >= 0 and len(buf) >= idx + len(marker) + 3:
            self.cap.add(buf[:idx])
            code = buf[idx + len(marker) : idx + len(marker) + 3]
            self.exit_code = int(code) if code.isdigit() else -1
            self.after = buf[idx + len(marker) + 3 :]
            self.pending = b""
            return True
        keep = len(buf) - idx if idx >= 0 else min(len(buf), len(marker) + 2)
        self.cap.add(buf[: len(buf) - keep])
        self.pending = buf[len(buf) - keep :]
        return False

    def flush(self) -> None:
        """The stream ended without a marker: the held-back bytes are output after all."""
        self.cap.add(self.pending)
        self.pending = b""


class FrameDemux:
    """Docker's multiplexed attach stream (tty=False): 8-byte headers [stream, 0, 0, 0, size:u32be] + payload."""

    def __init__(self) -> None:
        self._buf = bytearray()

    def feed(self, data: bytes) -> list[tuple[int, bytes]]:
        self._buf += data
        out: list[tuple[int, bytes]] = []
        while len(self._buf) >= 8:
            size = int.from_bytes(self._buf[4:8], "big")
            if len(self._buf) < 8 + size:
                break
            out.append((self._buf[0], bytes(self._buf[8 : 8 + size])))
            del self._buf[: 8 + size]
        return out
