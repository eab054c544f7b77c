"""Wrapping, truncating and indenting text."""


def wrap(text, width=70):
    """Greedy word wrap. Returns a list of lines, none longer than ``width`` unless a single word is.

    Existing newlines are kept as paragraph breaks; runs of whitespace inside a paragraph collapse.
    """
    if width < 1:
        raise ValueError("width must be at least 1")
    lines = []
    for paragraph in text.split("\n"):
        words = paragraph.split()
        if not words:
            lines.append("")
            continue
        current = words[0]
        for word in words[1:]:
            if len(current) + 1 + len(word) <= width:
                current = f"{current} {word}"
            else:
                lines.append(current)
                current = word
        lines.append(current)
    return lines


def truncate(text, length, suffix="..."):
    """Cut ``text`` to at most ``length`` characters, ending in ``suffix`` when something was cut."""
    if length < 0:
        raise ValueError("length must be non-negative")
    if len(text) <= length:
        return text
    if len(suffix) >= length:
        return suffix[:length]
    return text[: length - len(suffix)] + suffix


def indent(text, prefix="    ", skip_blank=True):
    """Prefix every line of ``text``; blank lines stay empty unless ``skip_blank`` is False."""
    out = []
    for line in text.splitlines(keepends=True):
        if skip_blank and not line.strip():
            out.append(line)
        else:
            out.append(prefix + line)
    return "".join(out)
