#!/usr/bin/env python3
# ruff: noqa: UP031  (%-formatting on purpose: these scripts must run on the old Pythons of task images)
"""file_editor: view / create / str_replace / insert / undo_edit. Runs inside the sandbox (stdlib only).

Usage: file_editor.py COMMAND --path PATH [--file_text T] [--old_str S] [--new_str S] [--insert_line N]
       [--view_range "[a, b]"] [--concise true|false] [--auto_concise LINES]
Errors are printed as `ERROR: ...` with exit status 1: the agent sees them as observations.
Undo history lives in a JSON file per edited path under $SWE_RL_EDITOR_STATE (default /tmp/.swe_rl_editor).
`concise` (R2E-Gym's parameter) shows a Python file with long function bodies and class docstrings elided;
`--auto_concise N` turns it on for Python files over N lines viewed without a range (R2E-Gym does so past 110).
Every observation is bounded: binary files are refused, control characters are escaped, output is clipped.
"""

import argparse
import ast
import hashlib
import json
import os
import re
import sys

MAX_OUTPUT_CHARS = 20000
SNIPPET_LINES = 4
MAX_DEPTH = 2
MAX_MATCHES_SHOWN = 3  # an ambiguous old_str names this many matches, never every line
ELIDE_MIN_LINES = 4  # concise view: function bodies of at least this many lines are elided
CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f]")


class ToolError(Exception):
    pass


def clip(text):
    if len(text) <= MAX_OUTPUT_CHARS:
        return text
    return (
        text[:MAX_OUTPUT_CHARS] + "\n<response clipped><NOTE>Output truncated; view a smaller range.</NOTE>"
    )


def visible(text):
    """Control characters (NUL, ESC, ...) as \\xNN: an observation stays printable text."""
    return CONTROL.sub(lambda m: "\\x%02x" % ord(m.group(0)), text)


def emit(text):
    """UTF-8 bytes whatever the sandbox's locale (an ASCII stdout would fail on the first non-ASCII char)."""
    out = getattr(sys.stdout, "buffer", None)
    if out is None:
        sys.stdout.write(text + "\n")
        return
    out.write((text + "\n").encode("utf-8", "replace"))
    out.flush()


def numbered(lines, start):
    """`cat -n` lines; stops once the output cap is passed (a huge file is not numbered in full)."""
    out, size = [], 0
    for i, line in enumerate(lines, start):
        row = "%6d\t%s" % (i, line[: MAX_OUTPUT_CHARS + 1])
        out.append(row)
        size += len(row) + 1
        if size > MAX_OUTPUT_CHARS:
            break
    return "\n".join(out)


def read_text(path):
    if not os.path.exists(path):
        raise ToolError("The path %s does not exist." % path)
    if os.path.isdir(path):
        raise ToolError("The path %s is a directory; this command needs a file." % path)
    with open(path, "rb") as f:
        data = f.read()
    if b"\0" in data[:8192]:
        raise ToolError(
            "The file %s is a binary file (%d bytes); it cannot be viewed or edited here." % (path, len(data))
        )
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        raise ToolError("The file %s is not UTF-8 text; it cannot be viewed or edited here." % path) from None


def write_text(path, text):
    with open(path, "w", encoding="utf-8", newline="") as f:
        f.write(text)


def history_file(path):
    state = os.environ.get("SWE_RL_EDITOR_STATE", "/tmp/.swe_rl_editor")
    os.makedirs(state, exist_ok=True)
    return os.path.join(state, hashlib.sha1(path.encode()).hexdigest() + ".json")


def push_history(path, old_text):
    hf = history_file(path)
    stack = []
    if os.path.exists(hf):
        with open(hf) as f:
            stack = json.load(f)
    stack.append(old_text)
    with open(hf, "w") as f:
        json.dump(stack, f)


def pop_history(path):
    hf = history_file(path)
    if not os.path.exists(hf):
        raise ToolError("No edit history found for %s." % path)
    with open(hf) as f:
        stack = json.load(f)
    if not stack:
        raise ToolError("No edit history found for %s." % path)
    text = stack.pop()
    with open(hf, "w") as f:
        json.dump(stack, f)
    return text


def view_dir(path):
    out = []
    base_depth = path.rstrip("/").count("/")
    for root, dirs, files in os.walk(path):
        dirs[:] = sorted(d for d in dirs if not d.startswith("."))
        depth = root.rstrip("/").count("/") - base_depth
        if depth >= MAX_DEPTH:
            dirs[:] = []
        for name in sorted(dirs):
            out.append(os.path.join(root, name) + "/")
        for name in sorted(files):
            if not name.startswith("."):
                out.append(os.path.join(root, name))
    header = "Here are the files and directories up to %d levels deep in %s, excluding hidden items:\n" % (
        MAX_DEPTH,
        path,
    )
    return header + path + "\n" + "\n".join(sorted(out))


def parse_range(raw, n_lines):
    try:
        rng = json.loads(raw)
        start, end = int(rng[0]), int(rng[1])
    except (ValueError, TypeError, IndexError):
        raise ToolError("view_range must be a list of two integers like [11, 12], got %r." % raw) from None
    if start < 1 or start > max(n_lines, 1):
        raise ToolError("Invalid view_range %r: start must be within [1, %d]." % (raw, n_lines))
    if end == -1:
        end = n_lines
    if end < start or end > n_lines:
        raise ToolError("Invalid view_range %r: end must be -1 or within [%d, %d]." % (raw, start, n_lines))
    return start, end


def elided_ranges(text):
    """(first, last) 1-based line ranges a concise view hides: long function bodies, long class docstrings."""
    try:
        tree = ast.parse(text)
    except (SyntaxError, ValueError):
        return []
    ranges = []
    for node in ast.walk(tree):
        body = getattr(node, "body", None)
        if not isinstance(body, list) or not body or not hasattr(body[-1], "end_lineno"):
            continue
        first, last = body[0].lineno, body[-1].end_lineno or body[0].lineno
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and last - first + 1 >= ELIDE_MIN_LINES:
            ranges.append((first, last))
        elif isinstance(node, ast.ClassDef) and isinstance(body[0], ast.Expr):
            doc_end = body[0].end_lineno or first
            if isinstance(getattr(body[0], "value", None), ast.Constant) and doc_end - first >= 4:
                ranges.append((first + 1, doc_end - 1))
    ranges.sort()
    merged = []  # type: list[tuple[int, int]]
    for first, last in ranges:  # nested functions sit inside their parent's range
        if merged and first <= merged[-1][1]:
            merged[-1] = (merged[-1][0], max(merged[-1][1], last))
        else:
            merged.append((first, last))
    return merged


def concise_lines(text):
    """(line number, text) rows of a concise view: elided ranges become one marker row."""
    lines = text.split("\n")
    rows, skip_to = [], 0
    starts = dict(elided_ranges(text))
    for i, line in enumerate(lines, 1):
        if i <= skip_to:
            continue
        if i in starts:
            rows.append((i, "... lines %d-%d elided ..." % (i, starts[i])))
            skip_to = starts[i]
            continue
        rows.append((i, line))
    return rows


def wants_concise(args, path, n_lines):
    concise, auto = getattr(args, "concise", None), getattr(args, "auto_concise", None)
    if not path.endswith(".py"):
        return False
    if concise is not None:
        return str(concise).strip().lower() in ("true", "1", "yes")
    return not args.view_range and auto is not None and n_lines > int(auto)


def cmd_view(args):
    path = args.path
    if os.path.isdir(path):
        if args.view_range:
            raise ToolError("view_range is not allowed when path points to a directory.")
        return view_dir(path)
    text = read_text(path)
    lines = text.split("\n")
    start, end = 1, len(lines)
    if args.view_range:
        start, end = parse_range(args.view_range, len(lines))
    if wants_concise(args, path, len(lines)):
        rows = [r for r in concise_lines(text) if start <= r[0] <= end]
        return "Here is a concise view of %s (long bodies elided; view a line range to see them):\n%s" % (
            path,
            "\n".join("%6d\t%s" % row for row in rows),
        )
    return "Here's the result of running `cat -n` on %s:\n%s" % (
        path,
        numbered(lines[start - 1 : end], start),
    )


def snippet(text, center_line, n_new_lines, path):
    lines = text.split("\n")
    start = max(1, center_line - SNIPPET_LINES)
    end = min(len(lines), center_line + n_new_lines + SNIPPET_LINES)
    body = numbered(lines[start - 1 : end], start)
    return "The file %s has been edited. Here's a snippet of the edited region:\n%s\n" % (path, body)


def cmd_create(args):
    if args.file_text is None:
        raise ToolError("Parameter `file_text` is required for command: create.")
    if os.path.exists(args.path):
        raise ToolError(
            "File already exists at: %s. Cannot overwrite files using command `create`." % args.path
        )
    parent = os.path.dirname(args.path)
    if parent:
        os.makedirs(parent, exist_ok=True)
    write_text(args.path, args.file_text)
    push_history(args.path, None)
    return "File created successfully at: %s" % args.path


def cmd_str_replace(args):
    if args.old_str is None:
        raise ToolError("Parameter `old_str` is required for command: str_replace.")
    if not args.old_str:
        raise ToolError(
            "No replacement was performed: old_str is empty. Give the exact lines to replace; to add text "
            "without replacing any, use the `insert` command."
        )
    text = read_text(args.path)
    count = text.count(args.old_str)
    if count == 0:
        raise ToolError("No replacement was performed, old_str did not appear verbatim in %s." % args.path)
    if count > 1:
        raise ToolError(ambiguous(text, args.old_str, count))
    new_str = args.new_str or ""
    new_text = text.replace(args.old_str, new_str)
    write_text(args.path, new_text)
    push_history(args.path, text)
    line = text.split(args.old_str)[0].count("\n") + 1
    return snippet(new_text, line, new_str.count("\n"), args.path)


def ambiguous(text, old_str, count):
    """One short error for an old_str that matches more than once: the count and the first few start lines."""
    lines = []  # type: list[int]
    pos = text.find(old_str)
    while pos >= 0 and len(lines) < MAX_MATCHES_SHOWN:
        lines.append(text.count("\n", 0, pos) + 1)
        pos = text.find(old_str, pos + 1)
    more = ", ..." if count > len(lines) else ""
    return (
        "No replacement was performed. old_str occurs %d times (starting at lines %s%s). "
        "Include more surrounding lines to make it unique." % (count, ", ".join(map(str, lines)), more)
    )


def cmd_insert(args):
    if args.insert_line is None or args.new_str is None:
        raise ToolError("Parameters `insert_line` and `new_str` are required for command: insert.")
    text = read_text(args.path)
    lines = text.split("\n")
    try:
        at = int(args.insert_line)
    except ValueError:
        raise ToolError("insert_line must be an integer, got %r." % args.insert_line) from None
    if at < 0 or at > len(lines):
        raise ToolError("Invalid insert_line %d: it should be within [0, %d]." % (at, len(lines)))
    new_lines = args.new_str.split("\n")
    new_text = "\n".join(lines[:at] + new_lines + lines[at:])
    write_text(args.path, new_text)
    push_history(args.path, text)
    return snippet(new_text, at + 1, len(new_lines) - 1, args.path)


def cmd_undo_edit(args):
    previous = pop_history(args.path)
    if previous is None:  # the last edit created the file
        os.remove(args.path)
        return "Undid the creation of %s (file removed)." % args.path
    write_text(args.path, previous)
    return "Last edit to %s undone successfully.\n%s" % (
        args.path,
        cmd_view(argparse.Namespace(path=args.path, view_range=None)),
    )


COMMANDS = {
    "view": cmd_view,
    "create": cmd_create,
    "str_replace": cmd_str_replace,
    "insert": cmd_insert,
    "undo_edit": cmd_undo_edit,
}


def main(argv=None):
    parser = argparse.ArgumentParser(prog="file_editor")
    parser.add_argument("command")
    parser.add_argument("--path", required=True)
    for name in ("file_text", "old_str", "new_str", "insert_line", "view_range", "concise", "auto_concise"):
        parser.add_argument("--" + name, default=None)
    args = parser.parse_args(argv)
    try:
        if args.command not in COMMANDS:
            raise ToolError("Unknown command %r; allowed: %s." % (args.command, ", ".join(COMMANDS)))
        if not os.path.isabs(args.path):
            raise ToolError("The path %s is not an absolute path; it should start with `/`." % args.path)
        emit(clip(visible(COMMANDS[args.command](args))))
        return 0
    except (ToolError, OSError, MemoryError) as e:
        emit(clip(visible("ERROR: %s" % e)))
        return 1


if __name__ == "__main__":
    sys.exit(main())
