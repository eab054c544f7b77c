"""The fenced shell blocks of README.md and docs/*.md, as commands with their file and line.

A block is ```bash / ```sh / ```shell / ```console. Lines ending in a backslash continue; blank lines and comment
lines are dropped; in ```console blocks only `$ ` lines are commands (the rest is output). Each command keeps the
line it starts on, so a failure names `README.md:57`.
"""

from __future__ import annotations

import re
import shlex
from dataclasses import dataclass
from pathlib import Path

SHELLS = frozenset({"bash", "sh", "shell", "console"})
FENCE = re.compile(r"^(\s*)(```+|~~~+)\s*([\w+-]*)")
ASSIGNMENT = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*=\S*$")


@dataclass(frozen=True)
class Command:
    text: str  # as written, continuations joined, the trailing comment removed
    line: int  # 1-based line it starts on


@dataclass(frozen=True)
class Block:
    path: Path
    line: int  # the opening fence's line
    lang: str
    commands: tuple[Command, ...]

    def where(self, root: Path) -> str:
        return f"{self.path.relative_to(root)}:{self.line}"


def strip_comment(text: str) -> str:
    """`cmd --flag  # why` -> `cmd --flag` (a `#` outside quotes that starts a word)."""
    quote = ""
    for i, ch in enumerate(text):
        if quote:
            quote = "" if ch == quote else quote
        elif ch in "'\"":
            quote = ch
        elif ch == "#" and (i == 0 or text[i - 1].isspace()):
            return text[:i].rstrip()
    return text.rstrip()


def _commands(lines: list[tuple[int, str]], console: bool) -> tuple[Command, ...]:
    out: list[Command] = []
    pending: tuple[int, str] | None = None
    for no, raw in lines:
        text = raw.strip()
        if pending is None:
            if console:
                if not text.startswith("$ "):
                    continue
                text = text[2:].strip()
            if not text or text.startswith("#"):
                continue
            pending = (no, "")
        joined = pending[1] + (" " if pending[1] else "") + text
        if joined.endswith("\\"):
            pending = (pending[0], joined[:-1].rstrip())
            continue
        out.append(Command(strip_comment(joined), pending[0]))
        pending = None
    if pending is not None:
        out.append(Command(strip_comment(pending[1]), pending[0]))
    return tuple(c for c in out if c.text)


def blocks(path: Path) -> list[Block]:
    """Every shell block of one Markdown file (fences may be indented, e.g. inside a numbered list)."""
    found: list[Block] = []
    open_at: tuple[int, str, str] | None = None  # (line, fence, lang)
    body: list[tuple[int, str]] = []
    for no, raw in enumerate(path.read_text().splitlines(), start=1):
        m = FENCE.match(raw)
        if open_at is None:
            if m:
                open_at, body = (no, m.group(2), m.group(3).lower()), []
            continue
        if m and m.group(2).startswith(open_at[1]) and not m.group(3):
            line, _, lang = open_at
            if lang in SHELLS:
                found.append(Block(path, line, lang, _commands(body, lang == "console")))
            open_at = None
            continue
        body.append((no, raw))
    return found


def program(text: str) -> str:
    """The command with leading `VAR=value` assignments removed: what FORMS patterns match."""
    try:
        words = shlex.split(text)
    except ValueError:
        return text
    i = 0
    while i < len(words) - 1 and ASSIGNMENT.match(words[i]):
        i += 1
    return shlex.join(words[i:]) if i else text


REPO_DIRS = ("configs/", "scripts/", "swe_rl/", "sandboxes/", "eval/", "tests/", "docs/", "bench/")


def repo_paths(text: str) -> list[str]:
    """Words of a command that name files of the repository (configs, scripts, ...): they must exist."""
    try:
        words = shlex.split(text)
    except ValueError:
        words = text.split()
    paths = []
    for w in words:
        w = w.split("=", 1)[1] if re.match(r"^[A-Za-z_]\w*=", w) else w  # RECIPE=configs/... too
        if w.startswith(REPO_DIRS) and not any(c in w for c in "$<>*"):
            paths.append(w.rstrip("/"))
    return paths
