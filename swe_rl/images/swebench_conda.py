"""A spec's conda environment file (`packages: environment.yml`) as PyPI requirement lines, by the data of
swebench_conda.json: where the file is in the source, which conda names are renamed or dropped and why. No conda:
the builder installs the lines with pip from the env's wheelhouse like any other requirement."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import yaml

from swe_rl.images.swebench_images import ImageInputError, read_source_file

CONDA_DATA = Path(__file__).with_name("swebench_conda.json")


def conda_rules(repo: str, version: str, path: Path = CONDA_DATA) -> dict[str, Any]:
    """The translation rules of one repo version: its '*' entry, then its own (dicts merge, the rest replaces)."""
    repos = json.loads(path.read_text()).get("repos", {})
    if repo not in repos:
        raise ImageInputError(f"{repo} {version}: spec packages=environment.yml and {path.name} has no entry for "
                              f"{repo!r} (add where its environment file is and its conda->PyPI renames/drops)")  # fmt: skip
    merged: dict[str, Any] = {}
    for part in (repos[repo].get(k) for k in ("*", version)):
        for key, value in (part or {}).items():
            merged[key] = {**merged.get(key, {}), **value} if isinstance(value, dict) else value
    return merged


def conda_to_pip(dep: str) -> str:
    """One conda match spec as a pip requirement: `name=1.2` (conda: any 1.2.x) -> `name==1.2.*`; `name 1.2` too."""
    dep = re.sub(r"^([A-Za-z0-9_.\-\[\]]+)\s+(?=\d)", r"\1=", dep.strip())  # `name 1.2` is `name=1.2`
    dep = re.sub(r"^([A-Za-z0-9_.\-\[\]]+)\s+(?=[<>=!])", r"\1", dep)
    m = re.fullmatch(r"([A-Za-z0-9_.\-\[\],]+)=(?!=)([^=<>!,]+)", dep)
    return f"{m.group(1)}=={m.group(2).rstrip('.*')}.*" if m else dep


def _name(req: str) -> str:
    return re.split(r"[\s<>=!~;]", req, maxsplit=1)[0]


def translate(text: str, rules: dict[str, Any], where: str) -> tuple[list[str], list[str]]:
    """(pip requirement lines, notes: one per rename and drop) for an environment file's text."""
    try:
        deps = (yaml.safe_load(text) or {}).get("dependencies") or []
    except yaml.YAMLError as e:
        raise ImageInputError(f"{where}: not a conda environment file: {e}") from None
    rename, drop = rules.get("rename", {}), rules.get("drop", {})
    lines, notes = [], []
    for dep in deps:
        if isinstance(dep, dict):  # `- pip: [...]`: already PyPI requirements
            lines += [str(x) for x in dep.get("pip", [])]
            continue
        req = conda_to_pip(str(dep))
        name = _name(req)
        if name in drop:
            notes.append(f"conda package dropped ({where}): {dep}: {drop[name]}")
        elif name in rename:
            lines.append(rename[name] + req[len(name) :])
            notes.append(f"conda package renamed ({where}): {name} -> {rename[name]}")
        else:
            lines.append(req)
    return lines, notes


def environment_requirements(source: Path, repo: str, version: str) -> tuple[list[str], list[str]]:
    """(requirement lines, notes) for a spec whose packages are its source's conda environment file."""
    rules = conda_rules(repo, version)
    for rel in rules.get("files", []):
        try:
            text = read_source_file(source, rel).decode()
        except ImageInputError:
            continue
        return translate(text, rules, rel)
    missing = rules.get("when_missing")
    if not missing:
        raise ImageInputError(f"{source}: none of {rules.get('files', [])} (the spec's environment.yml) is in the "
                              f"source, and {CONDA_DATA.name} gives no `when_missing` for {repo} {version}")  # fmt: skip
    note = f"environment file: none of {rules.get('files', [])} in the source; used {CONDA_DATA.name}'s: {missing['why']}"
    return list(missing.get("requirements", [])), [note]
