"""confini: a small INI-style configuration parser."""

from confini.config import Config
from confini.errors import ConfigError, DuplicateSectionError, InterpolationError, MissingOptionError, ParseError

__version__ = "1.2.0"

__all__ = [
    "Config",
    "ConfigError",
    "DuplicateSectionError",
    "InterpolationError",
    "MissingOptionError",
    "ParseError",
]
