"""${key} and ${section:key} references inside values."""

import re

from confini.errors import InterpolationError

_REF = re.compile(r"\$\{([^}]*)\}")
MAX_DEPTH = 10


def interpolate(config, section, value, depth=0, chain=()):
    """Expand references in `value`, read from `section` of `config`. `$$` is a literal dollar sign."""
    if depth > MAX_DEPTH:
        raise InterpolationError(
            f"interpolation too deep in section {section!r}: {' -> '.join(chain)} (circular reference?)"
        )

    def replace(match):
        ref = match.group(1).strip()
        if not ref:
            raise InterpolationError(f"empty reference ${{}} in section {section!r}")
        if ":" in ref:
            ref_section, ref_key = (part.strip() for part in ref.split(":", 1))
        else:
            ref_section, ref_key = section, ref
        ref_key = ref_key.lower()
        raw = config.get_raw(ref_section, ref_key)
        if raw is None:
            raise InterpolationError(f"bad reference ${{{ref}}} in section {section!r}: no such option")
        return interpolate(config, ref_section, raw, depth + 1, (*chain, f"{ref_section}:{ref_key}"))

    parts = value.split("$$")
    return "$".join(_REF.sub(replace, part) for part in parts)
