"""Issue 63: the offline builder's rules by class (swe_rl/images/swebench_rules.json): a setuptools_scm version from
the project's release history as of the row's time, build requirements from pyproject / setup.cfg resolved as of
that time (exact pins exempt), the spec's metadata edits applied before resolving, the project's requirements from
static metadata when setup.py cannot run, compilers for a project that compiles. Real tar archives, the shipped rules
file; no Docker, no network (release dates put in the cache as `swe-rl images wheelhouse` leaves them)."""

from __future__ import annotations

import io
import json
import tarfile
from pathlib import Path

import pytest

from swe_rl.images.swebench_images import ImageInputError

PYPROJECT = """[build-system]
requires = ["setuptools", "setuptools_scm>=6.2", "wheel", "cython==0.29.30", "extension-helpers"]
build-backend = 'setuptools.build_meta'
[tool.setuptools_scm]
"""
SETUP_CFG = """[metadata]
name = demo
[options]
install_requires =
    numpy>=1.20
    PyYAML>=3.13  # a comment
[options.extras_require]
test =
    pytest>=7.0
docs =
    sphinx
"""
SETUP_PY = "import sys\nfrom setuptools import setup\nfrom extension_helpers import get_extensions\nsetup()\n"


def _tar(path: Path, files: dict[str, str]) -> Path:
    with tarfile.open(path, "w") as tar:
        for name, text in files.items():
            data = text.encode()
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    return path


@pytest.fixture
def releases(tmp_path, monkeypatch):
    """The release dates of `demo` in the cache, as a wheelhouse fill leaves them."""
    monkeypatch.setenv("SWE_RL_CACHE", str(tmp_path / "cache"))
    d = tmp_path / "cache" / "releases"
    d.mkdir(parents=True)
    dates = {"5.1": "2022-05-24T00:00:00Z", "5.1.1": "2022-10-23T00:00:00Z", "5.2": "2022-12-13T00:00:00Z",
             "5.2.1": "2023-01-06T00:00:00Z", "5.3rc1": "2022-12-14T00:00:00Z"}  # fmt: skip
    files = {v: [f"demo-{v}-py3-none-any.whl"] for v in dates}
    (d / "demo.files.json").write_text(json.dumps({"dates": dates, "files": files}))
    return dates


def test_every_rule_says_why(tmp_path):
    from swe_rl.images.swebench_rules import load_rules

    rules = load_rules()
    assert {
        "scm_version",
        "build_requirements",
        "instance_time",
        "project_from_metadata",
        "compilers",
    } <= set(rules)
    bad = tmp_path / "r.json"
    bad.write_text(json.dumps({"about": "x", "scm_version": {"files": []}}))
    with pytest.raises(ImageInputError, match=r"rule 'scm_version' has no 'why'"):
        load_rules(bad)


def test_scm_version_is_the_next_dev_of_the_newest_release_before_the_row(releases):
    from swe_rl.images.swebench_rules import scm_version

    # 5.2 came out three days before the row; the 5.3 release candidate is no final release
    assert scm_version("demo", "2022-12-16T11:13:37Z", offline=True) == "5.3.dev0"
    assert scm_version("demo", "2022-12-01T00:00:00Z", offline=True) == "5.1.2.dev0"
    with pytest.raises(ImageInputError, match=r"no PyPI release before 2000"):
        scm_version("demo", "2000-01-01T00:00:00Z", offline=True)
    with pytest.raises(ImageInputError, match=r"other.files.json: missing.*swe-rl images wheelhouse"):
        scm_version("other", "2022-12-16T00:00:00Z", offline=True)


def test_rules_of_a_compiled_scm_project(tmp_path, releases):
    from swe_rl.images.swebench_rules import rule_fixes

    src = _tar(
        tmp_path / "demo.tar", {"pyproject.toml": PYPROJECT, "setup.cfg": SETUP_CFG, "setup.py": SETUP_PY}
    )
    row = {"instance_id": "d-1", "repo": "org/demo", "created_at": "2022-12-16T11:13:37Z"}
    spec = {"install": "python -m pip install -e .[test] --verbose",
            "pre_install": ["sed -i 's/requires = \\[\"setuptools\",/requires = \\[\"setuptools==68.0.0\",/' pyproject.toml",
                            "sed -i 's/pytest/pytest -rA/' tox.ini"]}  # fmt: skip
    got = rule_fixes(row, spec, src, offline=True)
    assert got["env"] == {"SETUPTOOLS_SCM_PRETEND_VERSION": "5.3.dev0",
                          "SETUPTOOLS_SCM_PRETEND_VERSION_FOR_DEMO": "5.3.dev0"}  # fmt: skip
    assert got["host_edits"] == spec["pre_install"][:1]  # tox.ini is no metadata file
    # the build requirements as the image's install sees them: after the spec's sed
    assert got["build_requirements"][0] == "setuptools==68.0.0"
    assert got["build_args"] == ["--exclude-newer", row["created_at"], "--exclude-newer-package=cython=false",
                                 "--exclude-newer-package=setuptools=false"]  # fmt: skip
    assert got["project"] == ["numpy>=1.20", "PyYAML>=3.13", "pytest>=7.0"]  # the [test] extra, not docs
    assert got["apt"] == ["gcc", "g++", "python3-dev"]


def test_rules_of_a_plain_project_and_a_no_isolation_install(tmp_path, releases):
    from swe_rl.images.swebench_rules import rule_fixes

    plain = _tar(tmp_path / "p.tar", {"setup.py": "from setuptools import setup\nsetup(name='p')\n"})
    row = {"instance_id": "p-1", "repo": "org/p", "created_at": "2020-01-01T00:00:00Z"}
    assert rule_fixes(row, {"install": "python -m pip install -e ."}, plain, offline=True) == {"rules": []}
    cfg_only = _tar(tmp_path / "c.tar", {"setup.cfg": "[options]\nsetup_requires =\n    setuptools_scm\n"})
    later = {**row, "repo": "org/demo", "created_at": "2023-02-01T00:00:00Z"}
    got = rule_fixes(later, {"install": "pip install -e ."}, cfg_only, offline=True)
    assert got["build_requirements"] == ["setuptools_scm"]  # setup.cfg's setup_requires, no pyproject
    assert got["env"]["SETUPTOOLS_SCM_PRETEND_VERSION"] == "5.2.2.dev0"
    sk = _tar(tmp_path / "s.tar", {"pyproject.toml": PYPROJECT.replace("[tool.setuptools_scm]", "")})
    spec = {
        "install": "python -m pip install -v --no-use-pep517 --no-build-isolation -e .",
        "packages": "numpy 'cython==3.0.10'",
    }
    got = rule_fixes(later, spec, sk, offline=True)  # the env builds it: no build requirements, but compilers
    assert "build_requirements" not in got and got["apt"] == ["gcc", "g++", "python3-dev"], got


def test_setup_py_that_cannot_run_and_no_static_metadata_is_one_error(tmp_path, releases):
    from swe_rl.images.swebench_rules import rule_fixes

    src = _tar(tmp_path / "x.tar", {"setup.py": "import numpy\nfrom setuptools import setup\nsetup()\n"})
    row = {"instance_id": "x-1", "repo": "org/x", "created_at": "2020-01-01T00:00:00Z"}
    with pytest.raises(
        ImageInputError, match=r"x-1: its setup.py cannot run on the host and neither setup.cfg"
    ):
        rule_fixes(row, {"install": "pip install -e ."}, src, offline=True)


def test_an_entry_goes_on_top_of_the_rules():
    from swe_rl.images.swebench_rules import with_entry

    ruled = {"rules": ["scm_version"], "env": {"A": "1", "B": "2"}, "apt": ["gcc", "g++"],
             "build_requirements": ["x"], "build_args": ["--exclude-newer", "d"]}  # fmt: skip
    got = with_entry(
        ruled, {"why": "w", "env": {"B": "3"}, "apt": ["libqhull-dev", "gcc"], "build_requirements": ["y"]}
    )
    assert got["env"] == {"A": "1", "B": "3"} and got["apt"] == ["g++", "gcc", "libqhull-dev"]
    assert got["build_requirements"] == ["y"] and "build_args" not in got


def test_unittest_descriptions_of_a_replaced_python_3_6(tmp_path):
    """django 3.2 (spec Python 3.6) on 3.9: the .pth line gives 3.6's shortDescription back, so django's runner
    prints `test_x (module.Class) ... ok` for a docstring that starts with a newline, as SWE-bench's lists name it.
    Run in a real interpreter with the line as site.py would run it (a .pth in a site dir)."""
    import subprocess
    import sys

    from swe_rl.images.swebench_env import PythonChoice
    from swe_rl.images.swebench_rules import load_rules, unittest_startup

    rules = load_rules()
    py39 = PythonChoice("3.6", "3.9", "bullseye", "no Debian suite ships Python 3.6")
    line = unittest_startup({"python": "3.6"}, py39, "parse_log_django", rules)
    assert line.startswith("import ")
    assert unittest_startup({"python": "3.6"}, py39, "parse_log_pytest", rules) == ""  # names from pytest ids
    assert (
        unittest_startup({"python": "3.8"}, PythonChoice("3.8", "3.9", "bullseye"), "parse_log_django", rules)
        == ""
    )
    site = tmp_path / "site"
    site.mkdir()
    (site / "swe_rl_startup.pth").write_text(line + "\n")
    code = ("import site, sys, unittest; site.addsitedir(sys.argv[1])\n"
            "class T(unittest.TestCase):\n"
            "    def test_a(self):\n        '''\n        Starts on the next line.\n        '''\n"
            "    def test_b(self):\n        '''One line.'''\n"
            "print(T('test_a').shortDescription(), T('test_b').shortDescription())\n")  # fmt: skip
    out = subprocess.run([sys.executable, "-c", code, str(site)], capture_output=True, text=True, check=True)
    assert out.stdout.split() == ["None", "One", "line."], out
    plain = subprocess.run(
        [sys.executable, "-c", code, str(tmp_path)], capture_output=True, text=True, check=True
    )
    assert plain.stdout.startswith("Starts on the next line."), plain.stdout  # what 3.9+ does without it


def test_extra_input_files_go_outside_the_testbed_and_into_the_hash(tmp_path):
    """An entry's `extra` (matplotlib 3.5: FreeType 2.6.1's source from the inputs' extra/) is copied to
    /opt/swe-rl-extra, not into /testbed (the base commit stays the source's); without one, the instance's
    Dockerfile and hash are what they were, so images built before keep theirs."""
    from swe_rl.images.swebench_images import Instance
    from swe_rl.images.swebench_stage import stage_instance

    src = _tar(tmp_path / "s.tar", {"setup.py": ""})
    inst = Instance({"instance_id": "a-1", "repo": "o/a"}, {"install": "pip install -e ."}, src)
    digests = []
    for extra in (None, "v1", "v2"):
        ctx = tmp_path / f"ctx-{extra}"
        ctx.mkdir()
        files = None
        if extra:
            (tmp_path / "extra").mkdir(exist_ok=True)
            (tmp_path / "extra" / "ft.tar.gz").write_text(extra)
            files = [tmp_path / "extra" / "ft.tar.gz"]
        digests.append(stage_instance(inst, ctx, "env:1", [], "sha", None, files))
        text = (ctx / "Dockerfile").read_text()
        assert ("COPY extra/ /opt/swe-rl-extra/" in text) == bool(extra), text
    assert len(set(digests)) == 3  # the extra file's content is in the hash
    assert (tmp_path / "ctx-v2" / "extra" / "ft.tar.gz").read_text() == "v2"


def test_a_pin_with_no_wheel_for_the_python_becomes_the_nearest_patch_with_one(tmp_path, monkeypatch):
    """scikit-learn 1.3's numpy==1.19.2 on Python 3.9: PyPI's first cp39 wheel is 1.19.3 (names as PyPI lists
    them); a pin with a wheel, a pure wheel, or no later patch with one stays."""
    from swe_rl.images.swebench_rules import wheel_pins

    monkeypatch.setenv("SWE_RL_CACHE", str(tmp_path / "cache"))
    d = tmp_path / "cache" / "releases"
    d.mkdir(parents=True)
    numpy = {"1.19.2": ["numpy-1.19.2-cp38-cp38-manylinux2010_x86_64.whl", "numpy-1.19.2.zip"],
             "1.19.3": ["numpy-1.19.3-cp39-cp39-manylinux2010_x86_64.whl"],
             "1.19.5": ["numpy-1.19.5-cp39-cp39-manylinux2010_x86_64.whl"],
             "1.20.0": ["numpy-1.20.0-cp39-cp39-manylinux2010_x86_64.whl"],
             "1.21.0": ["numpy-1.21.0-cp39-cp39-manylinux_2_12_x86_64.manylinux2010_x86_64.whl"]}  # fmt: skip
    old = {"1.0": ["old-1.0.tar.gz"], "2.0": ["old-2.0-py3-none-any.whl"]}
    for name, files in (
        ("numpy", numpy),
        ("old", old),
        ("six", {"1.16.0": ["six-1.16.0-py2.py3-none-any.whl"]}),
    ):
        (d / f"{name}.files.json").write_text(json.dumps({"dates": {}, "files": files}))
    got = wheel_pins(
        ["numpy==1.19.2", "numpy>=1.19", "old==1.0", "six==1.16.0"], "3.9.2", "2.31", offline=True
    )
    assert got == {"numpy": "numpy==1.19.3"}, got
    assert wheel_pins(["numpy==1.21.0"], "3.9.2", "2.31", offline=True) == {}
