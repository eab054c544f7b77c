"""Issue 44: the offline builder's data for SWE-bench's other repositories: conda environment files as PyPI lines
(swebench_conda.json), the overrides' new keys (replace, project, env, apt, pre_install) and when an inputs'
wheelhouse covers an env. No Docker, no network: the real data files and real tar archives."""

from __future__ import annotations

import io
import json
import tarfile
from pathlib import Path

import pytest

from swe_rl.images.swebench_images import ImageInputError

ENV_YML = """name: mpl-dev
channels: [conda-forge]
dependencies:
  - numpy>=1.19
  - python-dateutil=2.8
  - pyqt
  - setuptools_scm
  - pip
  - pip:
      - pikepdf
"""


def _tar(path: Path, files: dict[str, str]) -> Path:
    with tarfile.open(path, "w") as tar:
        for name, text in files.items():
            data = text.encode()
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    return path


def test_conda_match_specs_become_pip_requirements():
    from swe_rl.images.swebench_conda import conda_to_pip

    assert conda_to_pip("numpy>=1.19") == "numpy>=1.19"
    assert conda_to_pip("python-dateutil=2.8") == "python-dateutil==2.8.*"  # conda's `=` is a prefix match
    assert conda_to_pip("pytest 7.1") == "pytest==7.1.*"
    assert conda_to_pip("sphinx>=1.8.1,!=2.0.0") == "sphinx>=1.8.1,!=2.0.0"


def test_matplotlib_environment_file_translated_with_each_drop_and_rename_said(tmp_path):
    from swe_rl.images.swebench_conda import environment_requirements

    src = _tar(tmp_path / "m.tar", {"environment.yml": ENV_YML})
    lines, notes = environment_requirements(src, "matplotlib/matplotlib", "3.5")
    assert lines == ["numpy>=1.19", "python-dateutil==2.8.*", "setuptools-scm", "pikepdf"], lines
    assert any("dropped (environment.yml): pyqt: Qt GUI backend" in n for n in notes), notes
    assert any("dropped (environment.yml): pip:" in n for n in notes), notes
    assert any("renamed (environment.yml): setuptools_scm -> setuptools-scm" in n for n in notes), notes


def test_environment_file_missing_from_the_source(tmp_path):
    from swe_rl.images.swebench_conda import environment_requirements

    src = _tar(tmp_path / "x.tar", {"setup.py": ""})
    lines, notes = environment_requirements(src, "pydata/xarray", "0.12")  # the data says what to use instead
    assert lines == [] and "none of ['ci/requirements/environment.yml', 'environment.yml']" in notes[0]
    with pytest.raises(ImageInputError, match=r"none of \['environment.yml'\].*no `when_missing`"):
        environment_requirements(src, "matplotlib/matplotlib", "3.5")
    with pytest.raises(ImageInputError, match=r"swebench_conda.json has no entry for 'a/b'"):
        environment_requirements(src, "a/b", "1.0")
    bad = _tar(tmp_path / "bad.tar", {"environment.yml": "dependencies: [a\n"})
    with pytest.raises(ImageInputError, match=r"environment.yml: not a conda environment file"):
        environment_requirements(bad, "matplotlib/matplotlib", "3.5")


def test_replace_pins_and_every_override_has_a_why():
    from swe_rl.images.swebench_env import FIX_KEYS, env_fixes, load_overrides, replace_pins

    notes: list[str] = []
    got = replace_pins(["numpy==1.19.2", "Cython", "six"], {"numpy": "numpy==1.19.5", "cython": "cython<3"}, notes,
                       "spec pip_packages")  # fmt: skip
    assert got == ["numpy==1.19.5", "cython<3", "six"] and len(notes) == 2 and "'numpy==1.19.2'" in notes[0]
    data = load_overrides()  # the shipped file passes its own check: known keys, each entry with a why
    # issue 63: what a rule covers is no entry any more; the exceptions left, each with its why
    entries = [(repo, version) for repo, versions in data["envs"].items() for version in versions]
    assert sorted(entries) == [("matplotlib/matplotlib", "3.5"), ("pydata/xarray", "0.12"),
                               ("scikit-learn/scikit-learn", "0.20")], entries  # fmt: skip
    for repo, version in entries:
        fix = env_fixes(data, repo, version)
        assert fix["why"] and set(fix) <= FIX_KEYS, (repo, fix)


def test_wheelhouse_covers_only_what_it_holds(tmp_path):
    from swe_rl.images.swebench_env import wheelhouse_covers

    for name in ("numpy-1.25.2-cp311-cp311-manylinux_2_17_x86_64.whl", "Django-5.0-py3-none-any.whl"):
        (tmp_path / name).write_bytes(b"")
    assert wheelhouse_covers(
        ["numpy==1.25.2", "django>=4", "pywin32; sys_platform == 'win32'"], tmp_path, "3.11"
    )
    assert not wheelhouse_covers(["numpy", "contourpy==1.1.0"], tmp_path, "3.11")


def test_instance_dockerfile_sets_the_overrides_env():
    from swe_rl.images.swebench_stage import dockerfile_instance

    text = dockerfile_instance("env:1", "source.tar", {"SETUPTOOLS_SCM_PRETEND_VERSION": "5.2.5.dev0"})
    assert "ENV SETUPTOOLS_SCM_PRETEND_VERSION=5.2.5.dev0\n" in text
    # the install sees it, and so does the eval script's reinstall
    assert text.index("ENV SETUPTOOLS") < text.index("RUN ")
    assert json.dumps(dockerfile_instance("env:1", "source.tar")).count("ENV") == 0


def test_offline_check_names_the_missing_lock_and_file(tmp_path, monkeypatch):
    """`swe-rl images wheelhouse --check` resolves nothing and fetches nothing: a lock or file missing from the
    cache is an error that names the command that fills it."""
    from swe_rl.images import swebench_wheels

    monkeypatch.setenv("SWE_RL_CACHE", str(tmp_path / "cache"))
    monkeypatch.setattr(swebench_wheels, "resolve", None)  # a resolution (network) would fail with TypeError
    with pytest.raises(ImageInputError, match=r"demo: no lock in .*swe-rl images wheelhouse --inputs DIR"):
        swebench_wheels.lock_env(["six"], tmp_path, ["k"], "3.9.2", "2.31", tmp_path, "demo", offline=True)
    url = "https://files.pythonhosted.org/x/six-1.16.0-py2.py3-none-any.whl"
    with pytest.raises(
        ImageInputError, match=r"six-1.16.0-py2.py3-none-any.whl: missing or its sha256 differs"
    ):
        swebench_wheels.download([{"url": url, "sha256": "0" * 64}], offline=True)


def test_wheelhouse_cli_answers_bad_inputs_with_one_error(tmp_path):
    """`swe-rl images wheelhouse` as a user types it from the repository root, relative paths: a folder that is not
    there, and one without rows.jsonl, each get one error naming what was wrong (exit 2), and nothing is fetched."""
    import subprocess
    import sys

    repo = Path(__file__).resolve().parents[2]
    exe = str(Path(sys.executable).with_name("swe-rl"))
    env = {"PATH": "/usr/bin:/bin", "HOME": str(tmp_path), "SWE_RL_CACHE": str(tmp_path / "cache")}
    run = lambda *a: subprocess.run([exe, "images", "wheelhouse", *a], cwd=repo, env=env,  # noqa: E731
                                    capture_output=True, text=True, timeout=120)  # fmt: skip
    missing = run("--inputs", "no/such/inputs", "--check")
    assert missing.returncode == 2 and "--inputs no/such/inputs: no such folder" in missing.stderr, (
        missing.stderr
    )
    empty = tmp_path / "inputs"
    empty.mkdir()
    bad = run("--inputs", str(empty), "--check")
    assert bad.returncode == 2 and "rows.jsonl" in bad.stderr, (bad.returncode, bad.stdout, bad.stderr)
    assert not (tmp_path / "cache" / "wheels").exists()
