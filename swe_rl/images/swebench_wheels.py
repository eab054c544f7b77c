"""Wheels for an env whose Python the inputs' wheelhouse is not built for (it holds cp311 wheels; sympy 1.12 wants
3.9): resolved on the host, downloaded once into a cache outside the repository, then built offline.

`uv pip compile` resolves for the image's exact Python and glibc (markers included: `pip download --python-version`
evaluates markers against the host's Python), preferring the wheelhouse's versions wherever they fit, so the era
the inputs chose carries over. The pinned closure is then turned into files (`--format pylock.toml`: URLs and
sha256), the best wheel per package for the image is downloaded from PyPI and checked. The lock is cached by
everything it was resolved from, so rebuilding needs no network.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import urllib.request
from collections.abc import Callable
from pathlib import Path
from typing import Any

import tomllib
from packaging import tags
from packaging.utils import parse_wheel_filename
from packaging.version import InvalidVersion, Version

from swe_rl.images.swebench_images import ImageInputError


def cache_dir() -> Path:
    return Path(os.environ.get("SWE_RL_CACHE") or Path.home() / ".cache" / "swe-rl")


def uv_binary() -> str:
    beside = Path(sys.executable).with_name("uv")
    found = str(beside) if beside.is_file() else shutil.which("uv")
    if not found:
        raise ImageInputError("resolving wheels for a Python the wheelhouse lacks needs uv (pip install uv)")
    return found


def preferences(wheels: Path) -> str:
    """name==version per distribution of the wheelhouse (its highest version): what pip there would pick."""
    best: dict[str, Version] = {}
    for f in wheels.iterdir():
        m = re.match(r"([A-Za-z0-9_.]+?)-(\d[^-]*?)(-.*\.whl|\.tar\.gz|\.zip)$", f.name)
        if not m:
            continue
        try:
            name, version = re.sub(r"[-_.]+", "-", m.group(1)).lower(), Version(m.group(2))
        except InvalidVersion:
            continue
        if name not in best or version > best[name]:
            best[name] = version
    return "".join(f"{n}=={v}\n" for n, v in sorted(best.items()))


def _platform(glibc: str) -> str:
    minor = int(glibc.split(".")[1])
    return "x86_64-manylinux_2_28" if minor < 31 else f"x86_64-manylinux_2_{min(minor, 40)}"


def _uv(args: list[str], cwd: Path, what: str, env: dict[str, str] | None = None) -> None:
    proc = subprocess.run([uv_binary(), "pip", "compile", "-q", "--no-header", "--no-annotate", *args], cwd=cwd,
                          capture_output=True, text=True, timeout=900, env={**os.environ, **(env or {})})  # fmt: skip
    if proc.returncode != 0:
        raise ImageInputError(f"{what}: `uv pip compile` failed (PyPI must be reachable from this host, or put "
                              f"wheels for this Python in the inputs' wheels/):\n{proc.stderr.strip()[-2000:]}")  # fmt: skip


def resolve(
    lines: list[str],
    src: Path,
    py_full: str,
    glibc: str,
    prefs: str,
    what: str,
    env: dict[str, str] | None = None,
    uv_args: list[str] | None = None,
    build_pins: list[str] | None = None,
) -> list[str]:
    """The pinned closure of `lines` for the image's Python (local `-e DIR` lines resolved, not emitted).
    `src` (named in `lines`) is resolved from a copy: building its metadata writes into it (*.egg-info).
    `uv_args` (--exclude-newer ...) apply to this resolution; `build_pins` constrain the isolated builds of the
    project's metadata (swebench_rules.json build_requirements)."""
    target = ["--python-version", py_full, "--python-platform", _platform(glibc)]
    with tempfile.TemporaryDirectory(prefix="swe-rl-lock-") as tmp:
        work = Path(tmp)
        shutil.copytree(src, work / "src", symlinks=True, ignore=shutil.ignore_patterns(".git"))
        (work / "in.txt").write_text("\n".join(x.replace(str(src), str(work / "src")) for x in lines) + "\n")
        (work / "lock.txt").write_text(prefs)  # uv prefers an existing output file's pins
        extra = list(uv_args or [])
        if build_pins:
            (work / "build.txt").write_text("\n".join(build_pins) + "\n")
            extra += ["--build-constraints", "build.txt"]
        _uv(["in.txt", "-o", "lock.txt", *target, *extra], work, what, env)
        pins = [
            x
            for x in (work / "lock.txt").read_text().splitlines()
            # (the project itself, also as a non-editable `./src`, is installed from /testbed, not locked)
            if x and not x.startswith(("-e", "#", ".", "/")) and "file:" not in x
        ]
        (work / "pins.txt").write_text("\n".join(pins) + "\n")
        _uv(["pins.txt", "--format", "pylock.toml", "-o", "pylock.toml", *target], work, what)
        files = pick_files(tomllib.loads((work / "pylock.toml").read_text()), py_full, glibc)
    return [*pins, *("#file " + json.dumps(f) for f in files)]


def _tag_order(py_full: str, glibc: str) -> dict[str, int]:
    major, minor = (int(x) for x in py_full.split(".")[:2])
    g = int(glibc.split(".")[1])
    plats = [f"manylinux_2_{x}_x86_64" for x in range(g, 4, -1)]
    plats += ["manylinux2014_x86_64", "manylinux2010_x86_64", "manylinux1_x86_64", "linux_x86_64"]
    order = [
        *tags.cpython_tags((major, minor), platforms=plats),
        *tags.compatible_tags((major, minor), f"cp{major}{minor}", plats),
    ]
    return {str(t): i for i, t in reversed(list(enumerate(order)))}


def pick_files(lock: dict[str, Any], py_full: str, glibc: str) -> list[dict[str, str]]:
    """Per locked package, its best wheel for the image (by tag preference), else its sdist."""
    order, out = _tag_order(py_full, glibc), []
    for pkg in lock.get("packages", []):
        best: tuple[int, dict[str, Any]] | None = None
        for w in pkg.get("wheels", []):
            name = w["url"].rsplit("/", 1)[-1]
            rank = min((order.get(str(t), 1 << 30) for t in parse_wheel_filename(name)[3]), default=1 << 30)
            if rank < (1 << 30) and (best is None or rank < best[0]):
                best = (rank, w)
        chosen = best[1] if best else pkg.get("sdist")
        if not chosen:
            raise ImageInputError(
                f"{pkg['name']} {pkg.get('version')}: no wheel for Python {py_full} and no sdist"
            )
        out.append({"url": chosen["url"], "sha256": chosen["hashes"]["sha256"]})
    return out


def download(files: list[dict[str, str]], offline: bool = False) -> list[Path]:
    """Each file into the cache (kept by name, checked by sha256); the paths. `offline`: a missing or wrong file
    is an error, nothing is fetched."""
    dest = cache_dir() / "wheels"
    dest.mkdir(parents=True, exist_ok=True)
    paths = []
    for f in files:
        path = dest / f["url"].rsplit("/", 1)[-1]
        if not (path.is_file() and hashlib.sha256(path.read_bytes()).hexdigest() == f["sha256"]):
            if offline:
                raise ImageInputError(f"{path}: missing or its sha256 differs from the lock's (fill the wheelhouse: "
                                      "swe-rl images wheelhouse --inputs DIR)")  # fmt: skip
            with urllib.request.urlopen(f["url"], timeout=120) as resp:
                data = resp.read()
            if hashlib.sha256(data).hexdigest() != f["sha256"]:
                raise ImageInputError(f"{f['url']}: sha256 differs from the lock's {f['sha256']}")
            tmp = path.with_suffix(path.suffix + ".part")
            tmp.write_bytes(data)
            tmp.replace(path)
        paths.append(path)
    return paths


def lock_env(lines: list[str], src: Path, key_parts: list[str], py_full: str, glibc: str, wheels: Path,
             what: str, prepare: Callable[[], object] = lambda: None, env: dict[str, str] | None = None,
             offline: bool = False, uv_args: list[str] | None = None,
             build_pins: list[str] | None = None,
             prefer: list[str] | None = None) -> tuple[list[str], list[Path]]:  # fmt: skip
    """(pins, wheel files) for `lines` on the image's Python: from the cache when resolved before, else PyPI
    (`prepare()` first: it puts the source at `src`, which only a resolution needs)."""
    prefs = preferences(wheels) if wheels.is_dir() else ""
    if prefer:  # pins preferred over the wheelhouse's (an earlier install step's, swebench_env.plan_env)
        prefs = "".join(f"{p}\n" for p in prefer) + prefs
    # (uv arguments and build pins join the key only when given: locks made without them keep their keys)
    extra = [*(uv_args or []), *(f"build:{p}" for p in build_pins or [])]
    key = hashlib.sha256("\0".join([*key_parts, py_full, glibc, prefs, *extra]).encode()).hexdigest()
    cached = cache_dir() / "locks" / f"{key}.txt"
    if cached.is_file():
        text = cached.read_text().splitlines()
    elif offline:
        raise ImageInputError(f"{what}: no lock in {cached.parent} for these requirements (fill the wheelhouse on a "
                              "machine that reaches PyPI: swe-rl images wheelhouse --inputs DIR)")  # fmt: skip
    else:
        prepare()
        text = resolve(lines, src, py_full, glibc, prefs, what, env, uv_args, build_pins)
        cached.parent.mkdir(parents=True, exist_ok=True)
        cached.write_text("\n".join(text) + "\n")
    pins = [x for x in text if not x.startswith("#")]
    files = [json.loads(x.removeprefix("#file ")) for x in text if x.startswith("#file ")]
    return pins, download(files, offline)
