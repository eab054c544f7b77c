"""Exceptions raised by confini."""


class ConfigError(Exception):
    """Base class of every confini error."""


class ParseError(ConfigError):
    def __init__(self, lineno, line, reason):
        super().__init__(f"line {lineno}: {reason}: {line!r}")
        self.lineno = lineno
        self.line = line


class DuplicateSectionError(ParseError):
    pass


class MissingOptionError(ConfigError, KeyError):
    def __init__(self, section, option):
        super().__init__(f"no option {option!r} in section {section!r}")
        self.section = section
        self.option = option

    def __str__(self):
        return self.args[0]


class InterpolationError(ConfigError):
    pass
