"""Rules by class for the offline SWE-bench builder (swebench_rules.json, each with its `why`): what an env needs
that the spec table does not say, derived from the row, the spec and the project's own files, for any (repository,
version). swebench_overrides.json `envs` entries apply on top, as the exceptions.

- scm_version: a setuptools_scm project gets a pretend version, its newest PyPI release before the row's time bumped
  as setuptools_scm's guess-next-dev would (release dates cached in ~/.cache/swe-rl/releases, filled by
  `swe-rl images wheelhouse`, read offline by a build).
- spec_edits_on_host: the spec's `sed -i` pre_install lines that edit metadata files run on the host copy too.
- build_requirements + instance_time: pyproject's build requirements, as of the row's time, as wheels.
- project_from_metadata: the project's requirements from setup.cfg / pyproject when its setup.py cannot run.
- compilers: Debian's gcc, g++ and Python headers for a project that compiles extensions.
"""

from __future__ import annotations

import configparser
import json
import re
import shlex
import subprocess
import tempfile
import urllib.request
from pathlib import Path
from typing import Any

import tomllib
from packaging.requirements import InvalidRequirement, Requirement
from packaging.version import InvalidVersion, Version

from swe_rl.images.swebench_images import ImageInputError, read_source_file

RULES = Path(__file__).with_name("swebench_rules.json")
METADATA_FILES = ("setup.py", "setup.cfg", "pyproject.toml")
PYPI_JSON = "https://pypi.org/pypi/{name}/json"
SPLIT = re.compile(r"[\s<>=!~;\[]")


def load_rules(path: Path = RULES) -> dict[str, Any]:
    data = json.loads(path.read_text())
    for name, rule in data.items():
        if name != "about" and not (isinstance(rule, dict) and rule.get("why")):
            raise ImageInputError(f"{path}: rule {name!r} has no 'why' (every rule says why it holds)")
    return data


def _norm(name: str) -> str:
    return re.sub(r"[-_.]+", "-", SPLIT.split(name.strip(), maxsplit=1)[0]).lower()


def source_text(source: Path, rel: str) -> str | None:
    try:
        return read_source_file(source, rel).decode(errors="replace")
    except ImageInputError:
        return None


def host_edits(spec: dict[str, Any], rules: dict[str, Any]) -> list[str]:
    """The spec's pre_install lines that edit a metadata file in place (run on the host copy before resolving)."""
    pat = re.compile(rules["spec_edits_on_host"]["command"])
    out = []
    for cmd in spec.get("pre_install", []):
        if pat.search(cmd):
            target = shlex.split(cmd)[-1]
            if target in METADATA_FILES or target.startswith("requirements"):
                out.append(cmd)
    return out


def run_edits(edits: list[str], tree: Path) -> None:
    for cmd in edits:
        if (tree / shlex.split(cmd)[-1]).is_file():
            subprocess.run(["bash", "-c", cmd], cwd=tree, check=True, capture_output=True, timeout=60)


def edited_text(source: Path, rel: str, edits: list[str]) -> str | None:
    """A metadata file of the source as the image's install sees it: after the spec's edits."""
    text = source_text(source, rel)
    mine = [c for c in edits if shlex.split(c)[-1] == rel]
    if text is None or not mine:
        return text
    with tempfile.TemporaryDirectory(prefix="swe-rl-edit-") as tmp:
        (Path(tmp) / rel).write_text(text)
        run_edits(mine, Path(tmp))
        return (Path(tmp) / rel).read_text()


def uses_scm(source: Path, rules: dict[str, Any]) -> bool:
    rule = rules["scm_version"]
    texts = [source_text(source, f) or "" for f in rule["files"]]
    return any(m in t for t in texts for m in rule["markers"])


def _releases(name: str, offline: bool, what: str) -> dict[str, Any]:
    """{"dates": {version: first upload}, "files": {version: [file names]}} of a PyPI project, cached in
    ~/.cache/swe-rl/releases/ (filled by `swe-rl images wheelhouse`); `offline`: from the cache only."""
    from swe_rl.images.swebench_wheels import cache_dir

    path = cache_dir() / "releases" / f"{_norm(name)}.files.json"
    if path.is_file():
        return dict(json.loads(path.read_text()))
    if offline:
        raise ImageInputError(f"{path}: missing: PyPI's release list of {name} ({what}; fill the wheelhouse on a "
                              "machine that reaches PyPI: swe-rl images wheelhouse)")  # fmt: skip
    try:
        with urllib.request.urlopen(PYPI_JSON.format(name=name), timeout=60) as resp:
            data = json.load(resp)
    except OSError as e:
        msg = f"{name}: PyPI's release list unreachable ({e}); {what} needs it"
        raise ImageInputError(msg) from None
    rel = data["releases"]
    out = {"dates": {v: min(f["upload_time_iso_8601"] for f in fs) for v, fs in rel.items() if fs},
           "files": {v: sorted(f["filename"] for f in fs) for v, fs in rel.items() if fs}}  # fmt: skip
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(out, sort_keys=True))
    return out


def release_dates(name: str, offline: bool) -> dict[str, str]:
    """{version: first upload time} of a PyPI project."""
    return dict(_releases(name, offline, "its setuptools_scm version")["dates"])


def wheel_pins(lines: list[str], py_full: str, glibc: str, offline: bool) -> dict[str, str]:
    """wheel_for_pin: {name: line} for each exact pin of `lines` with no wheel on PyPI for the image's Python and
    glibc: the nearest later release of the same major.minor that has one (none: kept, pip builds the sdist)."""
    from packaging.utils import parse_wheel_filename

    from swe_rl.images.swebench_wheels import _tag_order

    order = _tag_order(py_full, glibc)

    def fits(files: list[str]) -> bool:
        for f in files:
            if f.endswith(".whl"):
                try:
                    tags = parse_wheel_filename(f)[3]
                except Exception:
                    continue
                if any(str(t) in order for t in tags):
                    return True
        return False

    out = {}
    for line in lines:
        try:
            req = Requirement(line)
        except InvalidRequirement:
            continue
        pins = [sp.version for sp in req.specifier if sp.operator == "==" and "*" not in sp.version]
        if len(pins) != 1 or req.marker is not None:
            continue
        files = _releases(req.name, offline, "the wheel of a pinned version")["files"]
        want = Version(pins[0])
        if fits(files.get(pins[0], [])):
            continue
        later = sorted(
            (Version(v) for v in files if _is_version(v) and Version(v).release[:2] == want.release[:2]
             and Version(v) > want and not Version(v).is_prerelease and fits(files[v])),
        )  # fmt: skip
        if later:
            extras = f"[{','.join(sorted(req.extras))}]" if req.extras else ""
            out[_norm(req.name)] = f"{req.name}{extras}=={later[0]}"
    return out


def _is_version(v: str) -> bool:
    try:
        Version(v)
        return True
    except InvalidVersion:
        return False


def scm_version(name: str, date: str, offline: bool) -> str:
    """guess-next-dev of the newest final release uploaded before `date` (ISO time): 5.2.4 -> 5.2.5.dev0."""
    best: Version | None = None
    for v, uploaded in release_dates(name, offline).items():
        try:
            ver = Version(v)
        except InvalidVersion:
            continue
        if not (ver.is_prerelease or ver.is_devrelease) and uploaded < date and (best is None or ver > best):
            best = ver
    if best is None:
        raise ImageInputError(
            f"{name}: no PyPI release before {date} to derive its setuptools_scm version from"
        )
    parts = list(best.release)
    parts[-1] += 1
    return ".".join(map(str, parts)) + ".dev0"


def build_requires(pyproject: str | None, setup_cfg: str | None = None) -> list[str]:
    """pyproject.toml's [build-system] requires, else setup.cfg's setup_requires (what setuptools fetches)."""
    if pyproject and "requires" in (system := tomllib.loads(pyproject).get("build-system", {})):
        return list(system["requires"])
    if setup_cfg:
        cfg = configparser.ConfigParser(interpolation=None)
        cfg.read_string(setup_cfg)
        if cfg.has_option("options", "setup_requires"):
            return _cfg_lines(cfg.get("options", "setup_requires"))
    return []


def _cfg_lines(value: str) -> list[str]:
    return [x for x in (re.sub(r"(^|\s)#.*$", "", ln).strip() for ln in value.splitlines()) if x]


def metadata_requirements(setup_cfg: str | None, pyproject: str | None, extras: list[str]) -> list[str]:
    """The project's requirements and the named extras from its static metadata (setup.cfg, else pyproject)."""
    if setup_cfg:
        cfg = configparser.ConfigParser(interpolation=None)
        cfg.read_string(setup_cfg)
        if cfg.has_option("options", "install_requires"):
            lines = _cfg_lines(cfg.get("options", "install_requires"))
            for extra in extras:
                if cfg.has_option("options.extras_require", extra):
                    lines += _cfg_lines(cfg.get("options.extras_require", extra))
            return lines
    project = tomllib.loads(pyproject).get("project", {}) if pyproject else {}
    if "dependencies" in project:
        lines = list(project["dependencies"])
        for extra in extras:
            lines += project.get("optional-dependencies", {}).get(extra, [])
        return lines
    raise ImageInputError("its setup.py cannot run on the host and neither setup.cfg [options] install_requires "
                          "nor pyproject.toml [project] dependencies lists its requirements")  # fmt: skip


def setup_py_imports(setup_py: str | None, names: list[str]) -> list[str]:
    """The `names` a setup.py imports at module level (not inside a function)."""
    found = re.findall(r"^(?:import|from)\s+([A-Za-z_]\w*)", setup_py or "", re.M)
    return [n for n in names if n in found]


def exclude_newer(date: str, lines: list[str]) -> list[str]:
    """uv arguments: nothing uploaded after `date`, except the exactly pinned packages of `lines`."""
    pinned = set()
    for line in lines:
        try:
            req = Requirement(line)
        except InvalidRequirement:
            continue
        if any(s.operator in ("==", "===") and "*" not in s.version for s in req.specifier):
            pinned.add(_norm(req.name))
    return ["--exclude-newer", date, *(f"--exclude-newer-package={n}=false" for n in sorted(pinned))]


def extras_of(spec: dict[str, Any]) -> list[str]:
    m = re.search(r"pip install (?:-e )?\.\[([\w,-]+)\]", str(spec.get("install", "")))
    return m.group(1).split(",") if m else []


def _spec_names(spec: dict[str, Any]) -> set[str]:
    pkgs = str(spec.get("packages", ""))
    listed = shlex.split(pkgs) if pkgs not in ("requirements.txt", "environment.yml") else []
    return {_norm(n) for n in [*listed, *spec.get("pip_packages", [])]}


def rule_fixes(row: dict[str, Any], spec: dict[str, Any], source: Path, offline: bool,
               rules: dict[str, Any] | None = None) -> dict[str, Any]:  # fmt: skip
    """What the rules give one instance, in the overrides' keys (env, build_requirements, project, apt) plus
    `host_edits`, `build_args` (uv arguments of the build-requirement resolution) and `rules` (those that applied)."""
    rules = rules or load_rules()
    out: dict[str, Any] = {"rules": []}
    edits = host_edits(spec, rules)
    if edits:
        out["host_edits"] = edits
        out["rules"].append("spec_edits_on_host")
    date = str(row.get(rules["instance_time"]["field"]) or "")
    if uses_scm(source, rules):
        name = str(row.get("repo", "")).rsplit("/", 1)[-1]
        if not date:
            raise ImageInputError(
                f"{row.get('instance_id')}: no created_at: its setuptools_scm version needs it"
            )
        version = scm_version(name, date, offline)
        var = _norm(name).replace("-", "_").upper()
        out["env"] = {v.format(NAME=var): version for v in rules["scm_version"]["vars"]}
        out["rules"].append("scm_version")
    pyproject = edited_text(source, "pyproject.toml", edits)
    cfg = edited_text(source, "setup.cfg", edits)
    isolated = "--no-build-isolation" not in str(spec.get("install", ""))
    if build := (build_requires(pyproject, cfg) if isolated else []):
        out["build_requirements"] = build
        out["build_args"] = exclude_newer(date, build) if date else []
        out["rules"] += ["build_requirements", *(["instance_time"] if date else [])]
    setup_py = source_text(source, "setup.py")
    if setup_py_imports(setup_py, rules["project_from_metadata"]["setup_py_imports"]):
        try:
            out["project"] = metadata_requirements(cfg, pyproject, extras_of(spec))
        except ImageInputError as e:
            raise ImageInputError(f"{row.get('instance_id')}: {e}") from None
        out["rules"].append("project_from_metadata")
    rule = rules["compilers"]
    compiles = {_norm(n) for n in build_requires(pyproject, cfg)}
    compiles |= {
        _norm(n) for n in setup_py_imports(setup_py, ["numpy", "Cython", "extension_helpers", "pybind11"])
    }
    if compiles & set(rule["names"]) or _spec_names(spec) & set(rule["spec_names"]):
        out["apt"] = list(rule["apt"])
        out["rules"].append("compilers")
    return out


def with_entry(ruled: dict[str, Any], entry: dict[str, Any]) -> dict[str, Any]:
    """The rules' fixes with an overrides entry on top: the entry's `project` and `build_requirements` replace
    the rules' (an exception says the whole list), `env` merges (the entry's value wins), `apt` adds up."""
    out = {**ruled, **entry}
    if "env" in ruled and "env" in entry:
        out["env"] = {**ruled["env"], **entry["env"]}
    if "apt" in ruled and "apt" in entry:
        out["apt"] = sorted({*ruled["apt"], *entry["apt"]})
    if "build_requirements" in entry:
        out.pop("build_args", None)  # the entry's list keeps the resolution it was written for
    return out


def unittest_startup(spec: dict[str, Any], python: Any, parser: str, rules: dict[str, Any]) -> str:
    """The .pth line that gives unittest the spec Python's test descriptions, or "" (unittest_descriptions)."""
    rule = rules["unittest_descriptions"]
    spec_py = str(spec.get("python", "") or "")
    if not spec_py or parser not in rule["parsers"] or python.minor == spec_py:
        return ""
    if Version(spec_py) >= Version(rule["spec_python_below"]):
        return ""
    return str(rule["pth"])
