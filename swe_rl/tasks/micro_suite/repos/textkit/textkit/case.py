"""Identifier case conversion."""

import re

# "HTTPResponse" -> "HTTP_Response": an upper-case run followed by a capitalised word.
_ACRONYM_BOUNDARY = re.compile(r"([A-Z]+)([A-Z][a-z])")
# "responseCode" / "code2Go" -> "response_Code" / "code2_Go": lower-case letter or digit, then upper-case.
_WORD_BOUNDARY = re.compile(r"([a-z0-9])([A-Z])")

_SMALL_WORDS = {"a", "an", "and", "as", "at", "but", "by", "for", "in", "of", "on", "or", "the", "to"}


def camel_to_snake(name):
    """``"HTTPResponseCode"`` -> ``"http_response_code"``; existing underscores and dashes are kept as one."""
    name = _ACRONYM_BOUNDARY.sub(r"\1_\2", name)
    name = _WORD_BOUNDARY.sub(r"\1_\2", name)
    name = name.replace("-", "_")
    return re.sub(r"_+", "_", name).lower()


def snake_to_camel(name, upper_first=False):
    """``"http_response_code"`` -> ``"httpResponseCode"`` (or ``"HttpResponseCode"`` with upper_first)."""
    leading = len(name) - len(name.lstrip("_"))
    parts = [p for p in name.split("_") if p]
    if not parts:
        return name
    head = parts[0].capitalize() if upper_first else parts[0].lower()
    return "_" * leading + head + "".join(p.capitalize() for p in parts[1:])


def title_case(text):
    """Title-case ``text``, keeping short connecting words lower case except at the start and end."""
    words = text.split()
    out = []
    for i, word in enumerate(words):
        lower = word.lower()
        if 0 < i < len(words) - 1 and lower in _SMALL_WORDS:
            out.append(lower)
        elif word.isupper() and len(word) > 1:
            out.append(word)  # keep acronyms such as "HTTP"
        else:
            out.append(word[:1].upper() + word[1:].lower())
    return " ".join(out)
