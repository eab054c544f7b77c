"""Environment images of the offline SWE-bench builder, like SWE-bench's env images: a Python with a repo version's
dependencies and no repository, shared by every instance that needs the same (swebench_build.py stacks an
instance's source and install on top).

An env is keyed by everything that goes into it: base image, install steps, requirements and wheels, so two
django 5.0 instances with the same requirements share one, and a changed pin makes another. Its Python is the
spec's, from the Debian suite that ships it (swebench_overrides.json `pythons`: bullseye 3.9, bookworm 3.11,
trixie 3.13); a spec Python no suite ships gets the nearest newer one, and the task row records the deviation.
Wheels: the inputs' wheelhouse when it is built for that Python, else a lock resolved on the host from PyPI
(swebench_wheels.py), downloaded into a cache outside the repository and then built offline like the rest.
The env is a conda-like prefix, not a venv: make_env.sh says why.
"""

from __future__ import annotations

import hashlib
import json
import re
import shlex
import tempfile
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from packaging.utils import parse_wheel_filename
from packaging.version import Version

from swe_rl.images.swebench_images import ENV_DIR, WHEELS_DIR, ImageInputError

OVERRIDES = Path(__file__).with_name("swebench_overrides.json")
MAKE_ENV = Path(__file__).with_name("make_env.sh")
BUILDER_LABEL = "org.swe-rl.builder"  # "swebench" on every image this builder makes: env and instance images
ENV_LABEL = "org.swe-rl.env-sha256"
PIP = f"{ENV_DIR}/bin/python -m pip install -q"
# why: a requirements line that names the source itself (`-e .[testutils]`) can only be installed with it
LOCAL_REQ = re.compile(r"^(-e|--editable)\s|^\.|^file:|@\s*file:")
FIX_KEYS = {
    "why",
    "python",
    "requirements",
    "left_out",
    "replace",
    "project",
    "build_requirements",
    "env",
    "apt",
    "pre_install",
    "apt_skipped",
    "extra",
}
# what swebench_rules.py adds to an instance's fixes (never written in an overrides entry)
RULE_KEYS = {"host_edits", "build_args", "rules"}


@dataclass(frozen=True)
class PythonChoice:
    spec: str  # the spec's python ("3.8"), "" when it names none
    minor: str  # the image's ("3.9")
    suite: str  # the Debian suite that ships it
    deviation: str = ""  # why minor differs from spec ("" when it does not)

    @property
    def base_image(self) -> str:
        return f"swe-rl/base:{self.suite}"


def load_overrides(path: Path = OVERRIDES) -> dict[str, Any]:
    data = json.loads(path.read_text())
    for repo, versions in data.get("envs", {}).items():
        for version, fix in versions.items():
            unknown = set(fix) - FIX_KEYS
            if unknown or "why" not in fix:
                raise ImageInputError(f"{path}: envs.{repo}.{version}: unknown keys {sorted(unknown)} or no 'why' "
                                      f"(expected {sorted(FIX_KEYS)})")  # fmt: skip
    return data


def env_fixes(overrides: dict[str, Any], repo: str, version: str) -> dict[str, Any]:
    """The overrides for one repo version: its '*' entry, then its own (lists add up, dicts merge, scalars
    replace)."""
    merged: dict[str, Any] = {}
    for part in (overrides.get("envs", {}).get(repo, {}).get(k) for k in ("*", version)):
        for key, value in (part or {}).items():
            if isinstance(value, list):
                merged[key] = merged.get(key, []) + value
            elif isinstance(value, dict):
                merged[key] = {**merged.get(key, {}), **value}
            else:
                merged[key] = value
    return merged


def choose_python(
    spec_python: str, pythons: dict[str, str], forced: str = "", reason: str = ""
) -> PythonChoice:
    """The suite's Python for a spec's: the same minor when a suite ships it, else the nearest newer one."""
    want = forced or spec_python or "3.11"
    why = f"spec says {spec_python or 'nothing'}, swebench_overrides.json says {forced}" if forced else ""
    why += f" ({reason})" if why and reason else ""
    if want in pythons:
        return PythonChoice(spec_python, want, pythons[want], why)
    newer = sorted((v for v in pythons if Version(v) >= Version(want)), key=Version)
    minor = newer[0] if newer else max(pythons, key=Version)
    why = f"{why}; " if why else ""
    return PythonChoice(spec_python, minor, pythons[minor],
                        f"{why}no Debian suite ships Python {want}: {minor} ({pythons[minor]}) is the nearest")  # fmt: skip


def split_requirements(text: str) -> tuple[list[str], list[str]]:
    """(environment lines, lines that need the source), comments and blank lines dropped."""
    env: list[str] = []
    local: list[str] = []
    for raw in text.splitlines():
        line = re.sub(r"(^|\s)#.*$", "", raw).strip()
        if line:
            (local if LOCAL_REQ.search(line) else env).append(line)
    return env, local


def spec_packages(spec: dict[str, Any], row: dict[str, Any], source: Path) -> tuple[list[str], list[str]]:
    """(the spec's `packages` as pip requirements, notes). SWE-bench gives them to conda; here pip installs them,
    a conda environment file translated by swebench_conda.json (each rename and drop in the notes)."""
    pkgs = str(spec.get("packages", "")).strip()
    if pkgs == "environment.yml":
        from swe_rl.images.swebench_conda import environment_requirements

        return environment_requirements(source, str(row.get("repo", "")), str(row.get("version", "")))
    return ([] if pkgs in ("", "requirements.txt") else shlex.split(pkgs)), []


def _req_name(line: str) -> str:
    return re.sub(r"[-_.]+", "-", re.split(r"[\s<>=!~;\[]", line.strip(), maxsplit=1)[0]).lower()


def replace_pins(lines: list[str], replace: dict[str, str], notes: list[str], where: str) -> list[str]:
    """Each line whose package `replace` names swapped for its line there (swebench_overrides.json, with a why)."""
    out = []
    for line in lines:
        new = replace.get(_req_name(line))
        if new is not None and new != line:
            notes.append(f"{where} {line!r} -> {new!r} (swebench_overrides.json)")
        out.append(line if new is None else new)
    return out


@dataclass
class EnvPlan:
    """One env image: its steps, wheels and the key that names it."""

    repo: str
    version: str
    python: PythonChoice
    packages: list[str]
    pip_packages: list[str]
    requirements: list[str]  # the requirements file's lines for the env, plus the overrides' extra lines
    wheels: list[Path]  # the env's wheelhouse
    lock: list[str] = field(default_factory=list)  # pinned closure installed last (PyPI-resolved envs only)
    wheels_from: str = "inputs"  # "inputs" (the inputs' wheelhouse) or "pypi" (a lock fetched on the host)
    left_out: list[str] = field(default_factory=list)
    # ENV of the instance image (SETUPTOOLS_SCM_PRETEND_VERSION)
    build_env: dict[str, str] = field(default_factory=dict)
    # the base image it is built on (python.base_image, or one with Debian packages added)
    base_image: str = ""
    headers: bool = False  # link Debian's Python headers (python3-dev) into the prefix: C extensions compile
    # a .pth line run at the env Python's start (swebench_rules.json unittest_descriptions): "" when none
    startup: str = ""

    def script(self) -> str:
        """SWE-bench's env script without conda: packages, requirements, pip_packages, in its order."""
        lines = ["set -euxo pipefail", "source /opt/miniconda3/bin/activate", "conda activate testbed"]
        # sysconfig's include dir is <prefix>/include/pythonX.Y; Debian puts the headers in /usr/include
        if self.headers:
            lines.append(f'v=$(python -c \'import sys; print("%d.%d" % sys.version_info[:2])\'); '
                         f'mkdir -p {ENV_DIR}/include && ln -sfn /usr/include/python$v {ENV_DIR}/include/python$v')  # fmt: skip
        if self.startup:  # into the env's own site-packages (the prefix's python answers for it)
            where = "$(python -c 'import sysconfig; print(sysconfig.get_path(\"purelib\"))')"
            lines.append(f'd="{where}" && mkdir -p "$d" && printf "%s\\n" {shlex.quote(self.startup)} > "$d/swe_rl_startup.pth"')  # fmt: skip
        return self._install(lines)

    def _install(self, lines: list[str]) -> str:
        if self.packages:
            lines.append(f"{PIP} {' '.join(shlex.quote(p) for p in self.packages)}")
        if self.requirements:
            lines.append(f"{PIP} -r /opt/swe-rl-env/requirements.txt")
        if self.pip_packages:
            lines.append(f"{PIP} {' '.join(shlex.quote(p) for p in self.pip_packages)}")
        if self.lock:  # the rest of the closure the instances' installs will ask for, at the lock's versions
            lines.append(f"{PIP} -r /opt/swe-rl-env/lock.txt")
        return "\n".join(lines) + "\n"

    def base_packages(self) -> list[str]:
        names = {_dist_name(w.name) for w in self.wheels}
        return [n for n in ("pip", "setuptools", "wheel") if n in names]

    def pip_wheel(self) -> str:
        pips = sorted((w.name for w in self.wheels if _dist_name(w.name) == "pip"), key=_wheel_version)
        if not pips:
            raise ImageInputError(
                f"{self.repo} {self.version}: no pip wheel for the env (inputs' wheels/ or lock)"
            )
        return pips[-1]

    def key(self, base_id: str) -> str:
        h = hashlib.sha256()
        for part in (base_id, self.script(), "\n".join(self.requirements), "\n".join(self.lock),
                     MAKE_ENV.read_text(), dockerfile_env("", "", "", self.base_packages())):  # fmt: skip
            h.update(part.encode() + b"\0")
        for w in sorted(self.wheels, key=lambda p: p.name):
            h.update(f"{w.name}:{w.stat().st_size}\n".encode())
        return h.hexdigest()

    def tag(self, key: str) -> str:
        return f"sweb.env.py.x86_64.{key[:22]}:latest"


def _dist_name(filename: str) -> str:
    return re.sub(r"[-_.]+", "-", filename.split("-", 1)[0]).lower()


def _wheel_version(filename: str) -> Version:
    try:
        return Version(filename.split("-")[1])
    except Exception:
        return Version("0")


def dockerfile_env(base_image: str, key: str, pip_wheel: str, packages: list[str], labels: str = "") -> str:
    return f"""FROM {base_image}
COPY wheels/ {WHEELS_DIR}/
COPY activate /opt/miniconda3/bin/activate
COPY make_env.sh /opt/swe-rl-make-env.sh
RUN bash /opt/swe-rl-make-env.sh {ENV_DIR} {pip_wheel} {" ".join(packages)}
ENV PIP_NO_INDEX=1 PIP_FIND_LINKS={WHEELS_DIR} PIP_DISABLE_PIP_VERSION_CHECK=1 PIP_ROOT_USER_ACTION=ignore
COPY env/ /opt/swe-rl-env/
RUN bash /opt/swe-rl-env/env.sh
LABEL {BUILDER_LABEL}="swebench" {ENV_LABEL}="{key}" {labels}
"""


def wheelhouse_pythons(wheels: Path) -> set[str]:
    """The Pythons the wheelhouse's binary wheels are built for ({"3.11"}); empty when it holds pure wheels only."""
    found = set()
    for w in wheels.glob("*.whl"):
        for t in parse_wheel_filename(w.name)[3]:
            if m := re.fullmatch(r"cp(\d)(\d+)", t.abi):
                found.add(f"{m.group(1)}.{m.group(2)}")
    return found


def wheelhouse_covers(lines: list[str], wheels: Path, minor: str) -> bool:
    """Whether the wheelhouse holds a distribution for every requirement line that applies on Linux with Python
    `minor`: a conda environment file (matplotlib) names packages an inputs' wheelhouse built for others lacks."""
    from packaging.requirements import InvalidRequirement, Requirement

    have = {_dist_name(w.name) for w in wheels.iterdir()} if wheels.is_dir() else set()
    for line in lines:
        try:
            req = Requirement(line)
        except InvalidRequirement:
            return False
        env = {
            "python_version": minor,
            "sys_platform": "linux",
            "platform_system": "Linux",
            "os_name": "posix",
        }
        if req.marker is not None and not req.marker.evaluate(env):
            continue
        if re.sub(r"[-_.]+", "-", req.name).lower() not in have:
            return False
    return True


@dataclass(frozen=True)
class BaseInfo:
    image: str
    image_id: str
    python: str  # full version of its python3 ("3.9.2")
    glibc: str  # "2.31"


def project_line(spec: dict[str, Any], testbed: Path) -> str:
    """The source itself as a requirement, with the extras the spec's install asks for (`pip install -e .[test]`)."""
    m = re.search(r"pip install (?:-e )?\.(\[[\w,-]+\])?", str(spec.get("install", "")))
    extras = (m.group(1) or "") if m else ""
    return f"-e {testbed}{extras}"


def build_wheels(build: list[str], base: BaseInfo, wheels: Path, what: str, offline: bool,
                 uv_args: list[str] | None = None) -> tuple[list[str], list[Path]]:  # fmt: skip
    """(pins, wheels) not installed: what pip's isolated build of the project takes from the env's wheelhouse."""
    from swe_rl.images.swebench_wheels import lock_env

    if not build:
        return [], []
    with tempfile.TemporaryDirectory(prefix="swe-rl-build-reqs-") as empty:  # no project in these lines
        key = [*build, "build"]
        return lock_env(build, Path(empty), key, base.python, base.glibc, wheels, f"{what} build",
                        offline=offline, uv_args=uv_args)  # fmt: skip


def plan_env(iid: str, row: dict[str, Any], spec: dict[str, Any], reqs: str, inputs: Path, testbed: Path,
             source_id: str, base: BaseInfo, python: PythonChoice, fixes: dict[str, Any], pypi_base: list[str],
             prepare: Callable[[], object], source: Path, offline: bool = False) -> tuple[EnvPlan, list[str]]:  # fmt: skip
    """The env an instance needs and its requirement lines that need the source (installed with it).
    `testbed` is where the source is, once `prepare()` ran (only a PyPI resolution needs the files). `offline`:
    the lock and its files must be in the cache already (swe-rl images wheelhouse --check)."""
    from swe_rl.images.swebench_wheels import lock_env

    env_reqs, local = split_requirements(reqs)
    dropped = {re.sub(r"[-_.]+", "-", n).lower() for n in fixes.get("left_out", [])}
    kept = [
        r for r in env_reqs if re.sub(r"[-_.]+", "-", re.split(r"[\s<>=!~;\[]", r)[0]).lower() not in dropped
    ]
    notes = [f"requirement left out (swebench_overrides.json): {r}" for r in env_reqs if r not in kept]
    replace = {_req_name(k): v for k, v in fixes.get("replace", {}).items()}
    packages, conda_notes = spec_packages(spec, row, source)
    notes += conda_notes
    plan = EnvPlan(str(row.get("repo", "")), str(row.get("version", "")), python,
                   replace_pins(packages, replace, notes, "spec packages"),
                   replace_pins(list(spec.get("pip_packages", [])), replace, notes, "spec pip_packages"),
                   replace_pins(kept, replace, notes, "requirement") + list(fixes.get("requirements", [])), [],
                   left_out=notes, build_env=dict(fixes.get("env", {})))  # fmt: skip
    wheels = inputs / "wheels"
    named = [*plan.packages, *plan.requirements, *plan.pip_packages]
    if (not wheelhouse_pythons(wheels) or python.minor in wheelhouse_pythons(wheels)) and wheelhouse_covers(
        named, wheels, python.minor
    ):
        plan.wheels = sorted(p for p in wheels.iterdir() if p.is_file())
        return plan, local
    # swebench_rules.json wheel_for_pin: a spec pin PyPI has no wheel of for this Python (conda had a build)
    from swe_rl.images.swebench_rules import wheel_pins

    if swap := wheel_pins([*plan.packages, *plan.pip_packages], base.python, base.glibc, offline):
        plan.packages = replace_pins(plan.packages, swap, plan.left_out, "spec packages (wheel_for_pin)")
        plan.pip_packages = replace_pins(
            plan.pip_packages, swap, plan.left_out, "spec pip_packages (wheel_for_pin)"
        )
    local_abs = [
        re.sub(r"^(-e\s+|--editable\s+)?\.", lambda m: f"{m.group(1) or ''}{testbed}", x) for x in local
    ]
    # the project's own metadata is built on the host unless the rules or overrides give its requirements (a
    # setup.py that needs numpy.distutils or compiled helpers cannot run on the host's Python)
    project = fixes["project"] if "project" in fixes else [project_line(spec, testbed)]
    if fixes.get("build_args") and "project" not in fixes:
        # a build backend of the instance's time may predate PEP 660 (setuptools < 64 has no build_editable):
        # the same metadata through the wheel hook
        project = [p.removeprefix("-e ") for p in project]
    lines = [*pypi_base, *plan.packages, *plan.requirements, *plan.pip_packages, *local_abs, *project]
    key_parts = [x.replace(str(testbed), "<src>") for x in lines] + [source_id]
    if plan.build_env:  # (only then: the locks of envs without it keep their keys)
        key_parts.append(json.dumps(plan.build_env, sort_keys=True))
    edits = list(fixes.get("host_edits", []))
    key_parts += [f"edit:{e}" for e in edits]
    what = f"{iid} (Python {base.python})"
    build = list(fixes.get("build_requirements", []))
    build_pins, build_files = build_wheels(build, base, wheels, what, offline, fixes.get("build_args"))
    # the lock's metadata build of the project takes the same build requirements as the image's (rules only: an
    # entry's build requirements keep the lock they had)
    bc = build_pins if fixes.get("build_args") else None
    run = _once(prepare, edits, testbed)
    try:
        pins, plan.wheels = lock_env(lines, testbed, key_parts, base.python, base.glibc, wheels, what, run,
                                     plan.build_env, offline, build_pins=bc)  # fmt: skip
    except ImageInputError as e:
        if "No solution found" not in str(e) and not offline:
            raise
        # swebench_rules.json install_order: the spec pins an env package the project's (edited) metadata excludes
        # (sphinx 4.3: Jinja2==3.0.3 against setup.py's Jinja2<3.0); the image installs the project last, so pip
        # replaces it: the env's steps are locked alone, the project over them (their pins preferred)
        # (offline: the combined lock is missing, so it failed when the cache was filled, or was never made)
        first = [*pypi_base, *plan.packages, *plan.requirements, *plan.pip_packages]
        try:
            env_pins, env_files = lock_env(first, testbed, [*key_parts, "env steps"], base.python, base.glibc,
                                           wheels, f"{what} env steps", offline=offline)  # fmt: skip
            pins, files = lock_env([*pypi_base, *local_abs, *project], testbed, [*key_parts, "project last"],
                                   base.python, base.glibc, wheels, what, run, plan.build_env, offline,
                                   build_pins=bc, prefer=env_pins)  # fmt: skip
        except ImageInputError:
            if offline:
                raise e from None
            raise
        plan.wheels = sorted({*env_files, *files})
        plan.left_out.append(
            "install order (swebench_rules.json): the spec's env pins and the project's "
            "requirements conflict; locked in the image's order, the project's last"
        )
    plan.wheels = sorted({*plan.wheels, *build_files})
    plan.lock, plan.wheels_from = pins, "pypi"
    return plan, local


def _once(prepare: Callable[[], object], edits: list[str], testbed: Path) -> Callable[[], None]:
    """prepare(), then the spec's metadata edits on the host copy (swebench_rules.json spec_edits_on_host), once:
    a sed that appends is not idempotent."""
    done: list[bool] = []

    def run() -> None:
        prepare()
        if edits and not done:
            from swe_rl.images.swebench_rules import run_edits

            run_edits(edits, testbed)
            done.append(True)

    return run
