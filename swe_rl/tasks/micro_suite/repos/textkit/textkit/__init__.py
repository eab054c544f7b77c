"""textkit: small, dependency-free text utilities."""

from textkit.case import camel_to_snake, snake_to_camel, title_case
from textkit.distance import levenshtein, similarity
from textkit.durations import format_duration, parse_duration
from textkit.slug import slugify
from textkit.wrap import indent, truncate, wrap

__version__ = "0.4.0"

__all__ = [
    "camel_to_snake",
    "format_duration",
    "indent",
    "levenshtein",
    "parse_duration",
    "similarity",
    "slugify",
    "snake_to_camel",
    "title_case",
    "truncate",
    "wrap",
]
