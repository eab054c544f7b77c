"""Line-oriented parsing of INI text into {section: {key: raw value}}."""

import re

from confini.errors import DuplicateSectionError, ParseError

_SECTION = re.compile(r"^\[(?P<name>[^\]]+)\]\s*(?:[#;].*)?$")
_OPTION = re.compile(r"^(?P<key>[^=:\s][^=:]*?)\s*[=:]\s*(?P<value>.*)$")
DEFAULT_SECTION = "DEFAULT"


def strip_inline_comment(value):
    """Remove a trailing ` ;...` or ` #...` comment, unless the marker is inside single or double quotes."""
    quote = None
    for i, ch in enumerate(value):
        if quote:
            if ch == quote:
                quote = None
        elif ch in "\"'":
            quote = ch
        elif ch in "#;" and (i == 0 or value[i - 1].isspace()):
            return value[:i].rstrip()
    return value.rstrip()


def unquote(value):
    """'"a b"' -> 'a b': one pair of matching outer quotes is removed."""
    if len(value) >= 2 and value[0] == value[-1] and value[0] in "\"'":
        return value[1:-1]
    return value


def parse(text):
    """Parse INI text. Returns (sections, order): a dict of dicts of raw strings, and section order."""
    sections = {DEFAULT_SECTION: {}}
    order = []
    current = None
    key = None
    for lineno, raw in enumerate(text.splitlines(), start=1):
        line = raw.rstrip()
        stripped = line.strip()
        if not stripped or stripped[0] in "#;":
            key = None if not stripped else key
            continue
        if raw[0].isspace() and key is not None:
            # continuation line: appended to the previous value with a newline
            prev = sections[current][key]
            sections[current][key] = f"{prev}\n{strip_inline_comment(stripped)}" if prev else stripped
            continue
        match = _SECTION.match(stripped)
        if match:
            current = match.group("name").strip()
            if current in sections and current != DEFAULT_SECTION:
                raise DuplicateSectionError(lineno, raw, f"section {current!r} already defined")
            sections.setdefault(current, {})
            if current != DEFAULT_SECTION:
                order.append(current)
            key = None
            continue
        match = _OPTION.match(stripped)
        if not match:
            raise ParseError(lineno, raw, "expected '[section]' or 'key = value'")
        if current is None:
            raise ParseError(lineno, raw, "option outside of any section")
        key = match.group("key").strip().lower()
        sections[current][key] = unquote(strip_inline_comment(match.group("value")))
    return sections, order
