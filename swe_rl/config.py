"""Typed configs: pydantic models with unknown keys rejected, merged from YAML files and dotted CLI overrides.

`load_config(Model, files=[...], overrides=["algo.aem.lam=0.5"])` returns a validated model. An unknown or
mistyped key fails with one `ConfigError` naming the key, the file it came from and the allowed keys.
`save_config` writes the resolved config into a run directory so a run can be reproduced or resumed.
"""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any, TypeVar

import yaml
from pydantic import BaseModel, ConfigDict, ValidationError

M = TypeVar("M", bound=BaseModel)


class StrictModel(BaseModel):
    """Base for every component config: unknown keys are an error, defaults are validated."""

    model_config = ConfigDict(extra="forbid", validate_default=True)


class ConfigError(ValueError):
    """One clear message about a bad config: which key, where it came from, what was expected."""


def parse_override(item: str) -> tuple[list[str], Any]:
    """`a.b.c=value` -> (["a", "b", "c"], yaml-parsed value)."""
    if "=" not in item:
        raise ConfigError(f"override {item!r}: expected KEY=VALUE with a dotted key, e.g. algo.aem.lam=0.5")
    key, raw = item.split("=", 1)
    parts = key.strip().split(".")
    if not all(parts):
        raise ConfigError(f"override {item!r}: empty component in dotted key {key!r}")
    try:
        value = yaml.safe_load(raw) if raw.strip() else ""
    except yaml.YAMLError:
        value = raw
    return parts, value


def deep_merge(base: dict[str, Any], update: dict[str, Any]) -> dict[str, Any]:
    out = copy.deepcopy(base)
    for k, v in update.items():
        if isinstance(v, dict) and isinstance(out.get(k), dict):
            out[k] = deep_merge(out[k], v)
        else:
            out[k] = copy.deepcopy(v)
    return out


def _read_yaml(path: Path) -> dict[str, Any]:
    if not path.is_file():
        raise ConfigError(f"config file {path}: not found")
    try:
        data = yaml.safe_load(path.read_text()) or {}
    except yaml.YAMLError as e:
        raise ConfigError(f"config file {path}: not valid YAML ({e})") from e
    if not isinstance(data, dict):
        raise ConfigError(f"config file {path}: expected a mapping at top level, got {type(data).__name__}")
    return data


def _model_at(model: type[BaseModel], loc: tuple[Any, ...]) -> type[BaseModel] | None:
    """The sub-model class that owns the field at `loc` (for listing allowed keys)."""
    current: Any = model
    for part in loc[:-1]:
        fields = getattr(current, "model_fields", None)
        if fields is None or part not in fields:
            return None
        ann = fields[part].annotation
        current = ann if isinstance(ann, type) and issubclass(ann, BaseModel) else None
        if current is None:
            return None
    return current if isinstance(current, type) and issubclass(current, BaseModel) else None


def _origin_of(loc: tuple[Any, ...], origins: dict[tuple[str, ...], str]) -> str:
    key = tuple(str(p) for p in loc)
    while key:
        if key in origins:
            return origins[key]
        key = key[:-1]
    return "defaults"


def _record_origins(
    data: Any, source: str, prefix: tuple[str, ...], origins: dict[tuple[str, ...], str]
) -> None:
    if isinstance(data, dict):
        for k, v in data.items():
            origins[(*prefix, str(k))] = source
            _record_origins(v, source, (*prefix, str(k)), origins)


def load_config(
    model: type[M],
    files: list[str | Path] | None = None,
    overrides: list[str] | None = None,
    base: dict[str, Any] | None = None,
) -> M:
    """Merge `base`, then each YAML file in order, then dotted overrides; validate into `model`."""
    data: dict[str, Any] = copy.deepcopy(base or {})
    origins: dict[tuple[str, ...], str] = {}
    for f in files or []:
        layer = _read_yaml(Path(f))
        _record_origins(layer, str(f), (), origins)
        data = deep_merge(data, layer)
    for item in overrides or []:
        parts, value = parse_override(item)
        node = data
        for p in parts[:-1]:
            if not isinstance(node.get(p), dict):
                node[p] = {}
            node = node[p]
        node[parts[-1]] = value
        origins[tuple(parts)] = f"override {item!r}"
    try:
        return model.model_validate(data)
    except ValidationError as e:
        raise ConfigError(_format_error(model, e, origins)) from None


def _format_error(model: type[BaseModel], err: ValidationError, origins: dict[tuple[str, ...], str]) -> str:
    lines = []
    for item in err.errors():
        loc = tuple(item["loc"])
        dotted = ".".join(str(p) for p in loc)
        where = _origin_of(loc, origins)
        if not loc:  # a model-wide rule (fields that do not go together): its message names them
            lines.append(str(item["msg"]).removeprefix("Value error, "))
        elif item["type"] == "extra_forbidden":
            owner = _model_at(model, loc)
            allowed = ", ".join(sorted(owner.model_fields)) if owner else "?"
            lines.append(f"unknown key '{dotted}' (from {where}); allowed keys here: {allowed}")
        else:
            lines.append(f"bad value for '{dotted}' (from {where}): {item['msg']}")
    return "invalid config:\n  " + "\n  ".join(lines)


def save_config(cfg: BaseModel, path: str | Path) -> Path:
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(path.suffix + ".tmp")
    tmp.write_text(yaml.safe_dump(cfg.model_dump(mode="json"), sort_keys=False))
    tmp.replace(path)
    return path
