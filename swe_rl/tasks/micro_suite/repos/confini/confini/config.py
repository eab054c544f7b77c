"""The Config object: sections of options with typed, interpolated access."""

from confini.errors import ConfigError, MissingOptionError
from confini.interpolation import interpolate
from confini.parser import DEFAULT_SECTION, parse

_TRUE = {"1", "yes", "true", "on"}
_FALSE = {"0", "no", "false", "off"}
_MISSING = object()


class Config:
    def __init__(self):
        self._sections = {DEFAULT_SECTION: {}}
        self._order = []

    @classmethod
    def from_string(cls, text):
        cfg = cls()
        cfg._sections, cfg._order = parse(text)
        return cfg

    @classmethod
    def from_file(cls, path, encoding="utf-8"):
        with open(path, encoding=encoding) as fh:
            return cls.from_string(fh.read())

    # --- structure ---------------------------------------------------------------------------------------
    def sections(self):
        return list(self._order)

    def has_section(self, section):
        return section in self._sections and section != DEFAULT_SECTION

    def options(self, section):
        self._require_section(section)
        merged = dict(self._sections[DEFAULT_SECTION])
        merged.update(self._sections[section])
        return list(merged)

    def has_option(self, section, option):
        return self.get_raw(section, option.lower()) is not None

    def _require_section(self, section):
        if not self.has_section(section):
            raise ConfigError(f"no section {section!r}")

    # --- values ------------------------------------------------------------------------------------------
    def get_raw(self, section, option):
        """The uninterpolated value, falling back to the DEFAULT section; None when absent."""
        values = self._sections.get(section)
        if values is None:
            return None
        if option in values:
            return values[option]
        return self._sections[DEFAULT_SECTION].get(option)

    def get(self, section, option, fallback=_MISSING, raw=False):
        self._require_section(section)
        value = self.get_raw(section, option.lower())
        if value is None:
            if fallback is _MISSING:
                raise MissingOptionError(section, option)
            return fallback
        return value if raw else interpolate(self, section, value)

    def getint(self, section, option, fallback=_MISSING):
        value = self.get(section, option, fallback=fallback)
        if value is fallback:
            return value
        try:
            return int(value.strip(), 0)
        except ValueError:
            raise ConfigError(f"[{section}] {option} = {value!r} is not an integer") from None

    def getfloat(self, section, option, fallback=_MISSING):
        value = self.get(section, option, fallback=fallback)
        if value is fallback:
            return value
        try:
            return float(value)
        except ValueError:
            raise ConfigError(f"[{section}] {option} = {value!r} is not a number") from None

    def getbool(self, section, option, fallback=_MISSING):
        value = self.get(section, option, fallback=fallback)
        if value is fallback:
            return value
        word = value.strip().lower()
        if word in _TRUE:
            return True
        if word in _FALSE:
            return False
        raise ConfigError(f"[{section}] {option} = {value!r} is not a boolean")

    def getlist(self, section, option, fallback=_MISSING, sep=","):
        """Split on `sep` and on newlines (continuation lines), dropping empty items."""
        value = self.get(section, option, fallback=fallback)
        if value is fallback:
            return value
        items = []
        for line in value.splitlines():
            items.extend(item.strip() for item in line.split(sep))
        return [item for item in items if item]

    # --- editing and output ------------------------------------------------------------------------------
    def set(self, section, option, value):
        if section != DEFAULT_SECTION:
            self._require_section(section)
        self._sections[section][option.lower()] = str(value)

    def add_section(self, section):
        if section in self._sections:
            raise ConfigError(f"section {section!r} already exists")
        self._sections[section] = {}
        self._order.append(section)

    def to_string(self):
        chunks = []
        for name in [DEFAULT_SECTION, *self._order]:
            values = self._sections[name]
            if name == DEFAULT_SECTION and not values:
                continue
            lines = [f"[{name}]"]
            for key, value in values.items():
                first, *rest = value.split("\n")
                lines.append(f"{key} = {first}")
                lines.extend(f"    {line}" for line in rest)
            chunks.append("\n".join(lines))
        return "\n\n".join(chunks) + "\n"
