"""`swe-rl images plan --all-specs`: an environment-planning dry run over every (repository, version) of swebench
4.1.0's spec table, no image built and no source: the env's Python (swebench_env.choose_python) and its requirement
lock resolved from PyPI by the rules alone (the spec's packages / pip_packages, pip<25.3 + setuptools + wheel, an
overrides entry only where one exists), `uv pip compile` for the image's exact Python and glibc. A spec that reads
its requirements from the repository (requirements.txt, environment.yml) is "needs the source". What it cannot say
without a source: the project's own requirements and its build (those are planned per instance, with the source,
by `swe-rl images wheelhouse`)."""

from __future__ import annotations

import functools
import json
import shlex
import subprocess
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from swe_rl.images.swebench_env import choose_python, env_fixes, load_overrides, replace_pins
from swe_rl.images.swebench_wheels import _platform, uv_binary

# the python3 and glibc of each Debian suite's base image (swe-rl/base:<suite>; probed on this machine's images)
SUITES = {"bullseye": ("3.9.2", "2.31"), "bookworm": ("3.11.2", "2.36"), "trixie": ("3.13.5", "2.41")}


@dataclass
class SpecPlan:
    repo: str
    version: str
    spec_python: str
    python: str  # the image's Python ("3.9.2")
    status: str  # "plans" | "needs the source" | "fails"
    pins: int = 0
    reason: str = ""  # the failure (uv's last lines), or what needs the source
    seconds: float = 0.0


def spec_lines(spec: dict[str, Any], fixes: dict[str, Any]) -> tuple[list[str], str]:
    """(requirement lines the spec names, what in it needs the repository's files or "")."""
    pkgs = str(spec.get("packages", "")).strip()
    if pkgs in ("requirements.txt", "environment.yml"):
        return [], f"packages: {pkgs} (read from the repository at the instance's commit)"
    replace = {k.lower(): v for k, v in fixes.get("replace", {}).items()}
    notes: list[str] = []
    lines = replace_pins([*shlex.split(pkgs), *spec.get("pip_packages", [])], replace, notes, "spec")
    return [*lines, *fixes.get("requirements", [])], ""


@functools.cache
def _compile(lines: tuple[str, ...], full: str, glibc: str) -> tuple[bool, str]:
    """(resolved, the pin count or uv's last error lines); specs with the same lines and Python share one run."""
    with tempfile.TemporaryDirectory(prefix="swe-rl-plan-") as tmp:
        (Path(tmp) / "in.txt").write_text("\n".join(lines) + "\n")
        cmd = [uv_binary(), "pip", "compile", "-q", "--no-header", "--no-annotate", "in.txt",
               "--python-version", full, "--python-platform", _platform(glibc)]  # fmt: skip
        proc = subprocess.run(cmd, cwd=tmp, capture_output=True, text=True, timeout=600)
    if proc.returncode != 0:
        err = [x.strip() for x in proc.stderr.strip().splitlines() if x.strip()]
        return False, " / ".join(err[-3:])[-400:]
    return True, str(sum(1 for x in proc.stdout.splitlines() if "==" in x))


def plan_spec(repo: str, version: str, spec: dict[str, Any], overrides: dict[str, Any]) -> SpecPlan:
    t0 = time.monotonic()
    fixes = env_fixes(overrides, repo, version)
    py = choose_python(str(spec.get("python", "")), overrides["pythons"], fixes.get("python", ""))
    full, glibc = SUITES[py.suite]
    plan = SpecPlan(repo, version, str(spec.get("python", "")), full, "plans")
    lines, needs = spec_lines(spec, fixes)
    if needs:
        plan.status, plan.reason = "needs the source", needs
    lines = [*overrides["pypi_base"]["requirements"], *lines]
    ok, out = _compile(tuple(lines), full, glibc)
    if not ok:
        plan.status, plan.reason = "fails", out
    else:
        plan.pins = int(out)
    plan.seconds = time.monotonic() - t0
    return plan


def plan_all(table_specs: dict[str, dict[str, Any]], out: Path, workers: int = 4) -> list[SpecPlan]:
    """Every (repo, version) planned; results written to `out` (JSON lines) as they come."""
    overrides = load_overrides()
    jobs = [(r, v, s) for r, vs in sorted(table_specs.items()) for v, s in vs.items()]
    results: list[SpecPlan] = []
    with ThreadPoolExecutor(workers) as pool, out.open("w") as f:
        for p in pool.map(lambda j: plan_spec(j[0], j[1], j[2], overrides), jobs):
            results.append(p)
            f.write(json.dumps(asdict(p)) + "\n")
            f.flush()
    return results


def table_markdown(results: list[SpecPlan]) -> str:
    """Per repository: versions that plan, need the source, fail (with the reasons)."""
    rows = ["| repository | versions | plan | need the source | fail (reason) |", "|---|---|---|---|---|"]
    by: dict[str, list[SpecPlan]] = {}
    for r in results:
        by.setdefault(r.repo, []).append(r)
    for repo, ps in sorted(by.items()):
        fails = [p for p in ps if p.status == "fails"]
        why = "; ".join(f"{p.version}: {p.reason[:160]}" for p in fails)
        rows.append(f"| {repo} | {len(ps)} | {sum(p.status == 'plans' for p in ps)} | "
                    f"{sum(p.status == 'needs the source' for p in ps)} | {len(fails)}{' (' + why + ')' if why else ''} |")  # fmt: skip
    return "\n".join(rows) + "\n"
