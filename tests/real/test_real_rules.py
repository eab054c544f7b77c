"""Issue 63: the rules carry. The envs of the shared instances whose (repository, version) had an overrides entry
before the rules (swebench_overrides.json at 3d65b34 / 5d5e5da: pytest 5.2, astropy 5.1 removed; xarray 0.12,
matplotlib 3.5 and scikit-learn 0.20 kept for what no rule covers) are planned as the image builder plans them
(open_inputs + plan_instance: rules, what is left of the entries, the lock) with no network: the locks and wheels
come from the cache `make test-real` fills first (`swe-rl images wheelhouse`). Each plan must give what the removed
entry gave: the same setuptools_scm version, a wheel for every build requirement it named, the same project lines,
its Debian packages. No image is built."""

from __future__ import annotations

import tempfile
from pathlib import Path

import pytest
from packaging.version import Version

pytestmark = pytest.mark.slow

# what the entries removed by issue 63 said (swebench_overrides.json before; `git show 5d5e5da:...`)
REMOVED = {
    "pytest-dev__pytest-6202": {
        "env": "5.2.5.dev0",
        "build_requirements": ["setuptools", "setuptools-scm", "wheel"],
    },
    "pydata__xarray-4629": {
        "env": "0.16.3.dev0",
        "build_requirements": ["setuptools", "setuptools-scm", "wheel"],
    },
    "astropy__astropy-14182": {
        "env": "5.3.dev0",
        "project": [
            "numpy>=1.20",
            "pyerfa>=2.0",
            "PyYAML>=3.13",
            "packaging>=19.0",
            "pytest>=7.0",
            "pytest-doctestplus>=0.12",
            "pytest-astropy-header>=0.2.1",
            "pytest-astropy>=0.10",
            "pytest-xdist",
        ],
        "build_requirements": [
            "setuptools",
            "setuptools-scm",
            "wheel",
            "cython",
            "oldest-supported-numpy",
            "extension-helpers",
        ],
        "apt": ["gcc", "python3-dev"],
    },
    # the release line's next minor was pretended (3.6.0.dev0); the rule gives the 3.5 line's next patch
    "matplotlib__matplotlib-23476": {"env": "3.5.3.dev0"},
    "scikit-learn__scikit-learn-10908": {"apt": ["gcc", "g++", "python3-dev"]},
}
COVERED = {
    "env",
    "build_requirements",
    "apt",
}  # keys the rules now give: no entry left may hold them for these


def _norm(name: str) -> str:
    import re

    return re.sub(r"[-_.]+", "-", re.split(r"[\s<>=!~;\[]", name, maxsplit=1)[0]).lower()


@pytest.mark.parametrize("rid", sorted(REMOVED))
def test_rules_alone_plan_what_the_removed_entry_did(rid, real_inputs):
    from swe_rl.images.swebench_build import open_inputs, plan_instance
    from swe_rl.images.swebench_env import env_fixes
    from swe_rl.images.swebench_images import source_sha256
    from swe_rl.images.swebench_stage import StagedSource
    from tests.real.conftest import real_ids

    if rid not in real_ids():
        pytest.skip(f"{rid} not selected (SWE_RL_REAL_IDS) or not in {real_inputs}")
    want = REMOVED[rid]
    s, [(_, inst)] = open_inputs(real_inputs, [rid], offline=True)
    repo, version = inst.row["repo"], inst.row["version"]
    left = env_fixes(s.overrides, repo, version)
    # what the rules give is in no entry left (matplotlib's keeps its FreeType 2.6.1 input, qhull and libraries)
    scm = [k for k in left.get("env", {}) if k.startswith("SETUPTOOLS_SCM")]
    assert not scm and "build_requirements" not in left, left
    assert "project" not in left or rid.startswith("scikit-learn"), (
        left
    )  # 0.20's requirements are in its code
    with tempfile.TemporaryDirectory() as tmp:
        src = StagedSource(inst.source, Path(tmp) / "testbed", source_sha256(inst.source))
        env, _, _ = plan_instance(inst, s, src)
    assert env.lock and env.wheels_from == "pypi", (
        "no lock: run `swe-rl images wheelhouse` (make test-real does)"
    )
    if "env" in want:
        assert env.build_env["SETUPTOOLS_SCM_PRETEND_VERSION"] == want["env"], env.build_env
        assert Version(want["env"]).release[:2] >= Version(version.lstrip("v")).release[:2]
    have = {_norm(w.name.split("-", 1)[0]) for w in env.wheels}
    missing = {_norm(b) for b in want.get("build_requirements", [])} - have
    assert not missing, f"no wheel in the env's wheelhouse for the build requirements {missing}"
    locked = {_norm(x) for x in env.lock}
    if (
        "project" in want
    ):  # every project requirement the entry named is in the lock (the rule read setup.cfg)
        assert {_norm(p) for p in want["project"]} <= locked, sorted(
            {_norm(p) for p in want["project"]} - locked
        )
    assert any(x.startswith("rules applied (swebench_rules.json)") for x in env.left_out), env.left_out
    if "apt" in want:
        [note] = [x for x in env.left_out if x.startswith("Debian packages in the base image")]
        assert set(want["apt"]) <= set(note.rsplit(": ", 1)[1].split()) and env.headers, note
