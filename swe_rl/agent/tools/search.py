#!/usr/bin/env python3
# ruff: noqa: UP031  (%-formatting on purpose: these scripts must run on the old Pythons of task images)
"""search: find a term in a file or recursively in a directory. Runs inside the sandbox (stdlib only).

Usage: search.py --search_term TERM [--path PATH]
In a directory: the files that contain TERM with match counts (hidden dirs skipped; past MAX_FILES files the
agent is asked to narrow the search). In a file: the matching lines with line numbers (capped: lines, each line's
length and the whole output, so a minified file or a log of long lines stays a short observation).
"""

import argparse
import os
import re
import sys

MAX_FILES = 100
MAX_LINES = 200
MAX_LINE_CHARS = 300  # a matching line longer than this is shown around its first match
MAX_OUTPUT_CHARS = 16000
CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f]")


def shorten(line, term):
    if len(line) <= MAX_LINE_CHARS:
        return line
    at = max(0, line.find(term) - MAX_LINE_CHARS // 3)
    piece = line[at : at + MAX_LINE_CHARS]
    return "%s%s... [line of %d characters]" % ("..." if at else "", piece, len(line))


def emit(text):
    """Printable UTF-8 whatever the sandbox's locale; control characters shown as \\xNN; capped."""
    text = CONTROL.sub(lambda m: "\\x%02x" % ord(m.group(0)), text)
    if len(text) > MAX_OUTPUT_CHARS:
        text = text[:MAX_OUTPUT_CHARS] + "\n<response clipped: narrow the search>"
    out = getattr(sys.stdout, "buffer", None)
    if out is None:
        sys.stdout.write(text + "\n")
    else:
        out.write((text + "\n").encode("utf-8", "replace"))
        out.flush()


def search_file(term, path):
    with open(path, "rb") as f:
        data = f.read()
    text = data.decode("utf-8", errors="replace")
    hits = [(i, line) for i, line in enumerate(text.split("\n"), 1) if term in line]
    if not hits:
        return 'No matches found for "%s" in %s' % (term, path)
    shown = "\n".join("%d:%s" % (i, shorten(line, term)) for i, line in hits[:MAX_LINES])
    more = (
        "" if len(hits) <= MAX_LINES else "\n[... %d more matching lines not shown]" % (len(hits) - MAX_LINES)
    )
    return 'Matches for "%s" in %s:\n%s%s' % (term, path, shown, more)


def search_dir(term, path):
    needle = term.encode("utf-8")
    counts = {}
    for root, dirs, files in os.walk(path):
        dirs[:] = sorted(d for d in dirs if not d.startswith(".") and d != "__pycache__")
        for name in sorted(files):
            full = os.path.join(root, name)
            try:
                with open(full, "rb") as f:
                    data = f.read()
            except OSError:
                continue
            if b"\0" in data[:1024]:  # binary file
                continue
            n = data.count(needle)
            if n:
                counts[full] = n
    if not counts:
        return 'No matches found for "%s" in %s' % (term, path)
    total = sum(counts.values())
    if len(counts) > MAX_FILES:
        return (
            'More than %d files matched for "%s" in %s (%d files, %d matches). Please narrow your search.'
            % (MAX_FILES, term, path, len(counts), total)
        )
    lines = ["./%s (%d matches)" % (os.path.relpath(p, path), n) for p, n in sorted(counts.items())]
    return 'Found %d matches for "%s" in %s:\n%s\nEnd of matches for "%s" in %s' % (
        total,
        term,
        path,
        "\n".join(lines),
        term,
        path,
    )


def main(argv=None):
    parser = argparse.ArgumentParser(prog="search")
    parser.add_argument("--search_term", required=True)
    parser.add_argument("--path", default=".")
    args = parser.parse_args(argv)
    if not args.search_term:
        emit("ERROR: search_term must not be empty.")
        return 1
    if not os.path.exists(args.path):
        emit("ERROR: The path %s does not exist." % args.path)
        return 1
    if os.path.isdir(args.path):
        emit(search_dir(args.search_term, args.path))
    else:
        emit(search_file(args.search_term, args.path))
    return 0


if __name__ == "__main__":
    sys.exit(main())
