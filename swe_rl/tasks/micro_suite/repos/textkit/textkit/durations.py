"""Human-readable durations: "1h30m" <-> 5400 seconds."""

import re

_UNITS = {"w": 604800, "d": 86400, "h": 3600, "m": 60, "s": 1, "ms": 0.001}
_TOKEN = re.compile(r"(\d+(?:\.\d+)?)\s*(ms|w|d|h|m|s)", re.IGNORECASE)


def parse_duration(text):
    """Parse "1h30m", "2d 4h", "90s", "1.5h" or "250ms" into seconds (float).

    A bare number is taken as seconds. Anything that is not a sequence of number+unit pairs is a ValueError.
    """
    text = text.strip()
    if not text:
        raise ValueError("empty duration")
    try:
        return float(text)
    except ValueError:
        pass
    total = 0.0
    pos = 0
    for match in _TOKEN.finditer(text):
        if text[pos : match.start()].strip():
            raise ValueError(f"invalid duration: {text!r}")
        total += float(match.group(1)) * _UNITS[match.group(2).lower()]
        pos = match.end()
    if pos == 0 or text[pos:].strip():
        raise ValueError(f"invalid duration: {text!r}")
    return total


def format_duration(seconds):
    """Format seconds as "1h30m" using the largest units first; zero is "0s"."""
    if seconds < 0:
        return "-" + format_duration(-seconds)
    if seconds == 0:
        return "0s"
    parts = []
    remaining = int(round(seconds))
    for unit in ("w", "d", "h", "m", "s"):
        size = _UNITS[unit]
        count, remaining = divmod(remaining, size)
        if count:
            parts.append(f"{count}{unit}")
    return "".join(parts) or "0s"
