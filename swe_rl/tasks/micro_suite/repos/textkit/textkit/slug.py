"""URL slugs."""

import re
import unicodedata

_NON_WORD = re.compile(r"[^a-z0-9]+")


def _strip_accents(text):
    # NFKD splits "é" into "e" + a combining accent; dropping the combining marks keeps the base letter.
    decomposed = unicodedata.normalize("NFKD", text)
    return "".join(ch for ch in decomposed if not unicodedata.combining(ch))


def slugify(text, sep="-", max_length=None, lowercase=True):
    """Turn ``text`` into a URL slug.

    Accents are stripped, every run of characters that is not a letter or digit becomes one ``sep``,
    and leading/trailing separators are removed. With ``max_length`` the slug is cut to at most that
    many characters, never ending in a separator.
    """
    if not isinstance(text, str):
        raise TypeError(f"slugify() expects a str, got {type(text).__name__}")
    if max_length is not None and max_length < 1:
        raise ValueError("max_length must be a positive integer")
    text = _strip_accents(text)
    if lowercase:
        text = text.lower()
        slug = _NON_WORD.sub(sep, text)
    else:
        slug = re.sub(r"[^A-Za-z0-9]+", sep, text)
    slug = slug.strip(sep)
    if max_length is not None and len(slug) > max_length:
        slug = slug[:max_length].rstrip(sep)
    return slug
