"""The offline SWE-bench image builder on a synthetic instance (no third-party data): inputs dir -> image with
SWE-bench's names and layout, built --network none from a wheelhouse, cached by content, graded for real."""

from __future__ import annotations

import ensurepip
import io
import json
import os
import re
import subprocess
import sys
import tarfile
import xml.etree.ElementTree as ET
import zipfile
from pathlib import Path

import pytest

from swe_rl.images.swebench_images import (
    ImageInputError,
    directives_of,
    eval_script,
    image_tag,
    load_spec_table,
)

CALC = "def add(a, b):\n    return a - b\n"
RUNNER = """import sys
sys.path.insert(0, ".")
import tinydep, calc
from tests import test_calc
for name in sorted(n for n in dir(test_calc) if n.startswith("test_")):
    try:
        getattr(test_calc, name)(); print("PASSED tests/test_calc.py::" + name)
    except AssertionError:
        print("FAILED tests/test_calc.py::" + name)
"""
GOLD = """diff --git a/calc.py b/calc.py
--- a/calc.py
+++ b/calc.py
@@ -1,2 +1,2 @@
 def add(a, b):
-    return a - b
+    return a + b
"""
NOOP = GOLD.replace("+    return a + b", "+    return a - b  # looked at")
TEST_PATCH = """diff --git a/tests/test_calc.py b/tests/test_calc.py
new file mode 100644
--- /dev/null
+++ b/tests/test_calc.py
@@ -0,0 +1,6 @@
+from calc import add
+def test_add():
+    assert add(1, 2) == 3
+def test_zero():
+    assert add(0, 0) == 0
+
"""
SPEC = {"python": "3.11", "pip_packages": ["tinydep==1.0"], "install": "python -c 'import tinydep'",
        "pre_install": ["apt-get update && apt-get install -y locales"], "test_cmd": "python run_tests.py",
        "log_parser": "parse_log_pytest"}  # fmt: skip
ROW = {"instance_id": "swe-rl__calc-1", "repo": "swe-rl/calc", "version": "1.0", "base_commit": "0" * 40,
       "patch": GOLD, "test_patch": TEST_PATCH, "FAIL_TO_PASS": json.dumps(["tests/test_calc.py::test_add"]),
       "PASS_TO_PASS": json.dumps(["tests/test_calc.py::test_zero"]), "problem_statement": "add subtracts"}  # fmt: skip


def tiny_wheel(path: Path) -> None:
    """A hand-made pure-Python wheel: pip installs it offline like any other."""
    files = {"tinydep.py": "X = 1\n", "tinydep-1.0.dist-info/METADATA": "Metadata-Version: 2.1\nName: tinydep\n"
             "Version: 1.0\n", "tinydep-1.0.dist-info/WHEEL": "Wheel-Version: 1.0\nGenerator: t\n"
             "Root-Is-Purelib: true\nTag: py3-none-any\n"}  # fmt: skip
    files["tinydep-1.0.dist-info/RECORD"] = (
        "".join(f"{n},,\n" for n in files) + "tinydep-1.0.dist-info/RECORD,,\n"
    )
    with zipfile.ZipFile(path, "w") as z:
        for name, text in files.items():
            z.writestr(name, text)


@pytest.fixture
def inputs(tmp_path) -> Path:
    root = tmp_path / "inputs"
    (root / "src").mkdir(parents=True)
    (root / "wheels").mkdir()
    (root / "rows.jsonl").write_text(json.dumps(ROW) + "\n")
    (root / "specs.json").write_text(json.dumps({"swe-rl/calc": {"1.0": SPEC}}))
    with tarfile.open(root / "src" / "swe-rl__calc-1.tar", "w") as tar:
        for name, text in {"calc.py": CALC, "run_tests.py": RUNNER, "tests/__init__.py": ""}.items():
            info = tarfile.TarInfo(name)
            info.size = len(text.encode())
            tar.addfile(info, io.BytesIO(text.encode()))
    bundled = Path(ensurepip.__file__).parent / "_bundled"
    for wheel in bundled.glob("pip-*.whl"):
        (root / "wheels" / wheel.name).write_bytes(wheel.read_bytes())
    tiny_wheel(root / "wheels" / "tinydep-1.0-py3-none-any.whl")
    return root


def test_spec_table_is_read_from_the_swebench_wheel(tmp_path):
    constants = (
        'SPECS = {"3.0": {"python": "3.6", "test_cmd": "./tests/runtests.py"}}\n'
        'MAP_REPO_VERSION_TO_SPECS_PY = {"django/django": SPECS}\nMAP_REPO_TO_REQS_PATHS = {"django/django": ["r.txt"]}\n'
    )
    with zipfile.ZipFile(tmp_path / "swebench-4.1.0-py3-none-any.whl", "w") as z:
        z.writestr("swebench/harness/constants/python.py", constants)
        z.writestr(
            "swebench/harness/log_parsers/python.py", 'MAP = {\n    "django/django": parse_log_django,\n}\n'
        )
    table = load_spec_table(tmp_path)
    assert table.spec({"repo": "django/django", "version": "3.0"})["python"] == "3.6"
    assert table.parsers == {"django/django": "parse_log_django"} and table.reqs_paths["django/django"] == [
        "r.txt"
    ]
    with pytest.raises(ImageInputError, match=r"x: no install spec for repo 'django/django' version '9\.9'"):
        table.spec({"instance_id": "x", "repo": "django/django", "version": "9.9"})
    with pytest.raises(ImageInputError, match=r"no swebench-4\.1\.0-py3-none-any\.whl"):
        load_spec_table(tmp_path / "empty")


def test_eval_script_follows_swebench_4():
    row = {"repo": "django/django", "test_patch": "diff --git a/tests/foo/tests.py b/tests/foo/tests.py\n"}
    assert directives_of(row) == ["foo.tests"]
    script = eval_script(row, {"test_cmd": "./tests/runtests.py", "install": "pip install -e ."}, "abc")
    lines = script.splitlines()
    assert lines[:2] == ["#!/bin/bash", "set -uxo pipefail"]
    at = lines.index(": '>>>>> Start Test Output'")
    assert lines[at + 1] == "./tests/runtests.py foo.tests" and lines[at + 2] == ": '>>>>> End Test Output'"
    assert lines.count("git checkout abc tests/foo/tests.py") == 2 and "pip install -e ." in lines


def test_source_commit_starts_no_automatic_gc(tmp_path):
    """django/django's ~6,800 files are more loose objects than git's gc.auto: `git commit` then started a
    background `git gc` that was still writing .git when the staged context was removed ("Directory not empty:
    '.git'", the first django build). Here the threshold is the lowest git has and gc runs in the foreground, so
    any automatic gc of the builder's commit packs the objects before `_commit` returns."""
    import hashlib

    from swe_rl.images.swebench_stage import _commit

    repo = tmp_path / "src"
    repo.mkdir()
    subprocess.run(["git", "init", "-q", str(repo)], check=True)
    for key, value in (("gc.auto", "1"), ("gc.autoDetach", "false")):
        subprocess.run(["git", "-C", str(repo), "config", key, value], check=True)
    n = hits = 0
    while hits < 3:  # git estimates the loose objects from the objects/17/ bucket: fill it past the threshold
        text = f"{n}\n".encode()
        if hashlib.sha1(b"blob %d\0" % len(text) + text).hexdigest().startswith("17"):
            (repo / f"f{n}.txt").write_bytes(text)
            hits += 1
        n += 1
    _commit(repo)
    assert not list((repo / ".git" / "objects" / "pack").glob("*.pack"))
    assert len(list((repo / ".git" / "objects" / "17").iterdir())) >= 3  # still loose: no gc ran


@pytest.mark.docker
@pytest.mark.timeout(1200)
@pytest.mark.parametrize(
    "base_image",
    [  # bullseye is debootstrapped on demand: not in make test's budget
        "swe-rl/base:bookworm",
        pytest.param("swe-rl/base:bullseye", marks=[pytest.mark.slow, pytest.mark.ci_slow]),
    ],
)
def test_base_commit_in_the_image_is_the_host_commit(tmp_path, base_image):
    """The instance image makes its base commit itself (the archive ADDed, then git in the image): the sha must be
    the one `_commit` gives on the host for the same source, or task rows' base commits would move with the git
    version. A source with what git treats specially: an executable, a symlink, an ignored file, an empty folder,
    CRLF lines under an eol attribute, and files owned by another user (git's safe.directory)."""
    from sandboxes.docker_sandbox import docker_client
    from sandboxes.images import ensure_base_image
    from swe_rl.images.swebench_stage import (
        _commit,
        _unpack,
        base_commit_lines,
        base_commit_of,
        dockerfile_instance,
        stage_archive,
    )
    from swe_rl.images.task_images import sandboxes_builder

    ensure_base_image(docker_client(), base_image)  # as the builder does: debootstrapped when missing
    src = tmp_path / "src.tar"
    with tarfile.open(src, "w") as tar:
        for name, text, mode in (("run.sh", "#!/bin/sh\n", 0o755), ("pkg/a.py", "A = 1\n", 0o644),
                                 (".gitignore", "*.log\n", 0o644), ("build.log", "x\n", 0o644),
                                 (".gitattributes", "*.txt text eol=lf\n", 0o644), ("w.txt", "a\r\nb\r\n", 0o644)):  # fmt: skip
            info = tarfile.TarInfo(name)
            info.size, info.mode, info.uid, info.gid = len(text.encode()), mode, 1000, 1000
            tar.addfile(info, io.BytesIO(text.encode()))
        for name, kind in (("link.py", tarfile.SYMTYPE), ("empty", tarfile.DIRTYPE)):
            info = tarfile.TarInfo(name)
            info.type, info.linkname, info.mode = kind, "pkg/a.py" if kind == tarfile.SYMTYPE else "", 0o755
            tar.addfile(info)
    _unpack(src, tmp_path / "host")
    expected = _commit(tmp_path / "host")
    folder = tmp_path / "dir" / "src"
    _unpack(src, folder)
    for source in (src, folder):  # a tar as it is, a directory tarred by the builder
        ctx = tmp_path / f"ctx-{source.name}"
        ctx.mkdir()
        stage_archive(source, ctx)
        (ctx / "local-requirements.txt").write_text("")
        (ctx / "setup.sh").write_text("\n".join(["set -euxo pipefail", "cd /testbed", *base_commit_lines()]))
        (ctx / "Dockerfile").write_text(dockerfile_instance(base_image, "source.tar"))
        tag = f"swe-rl/test-base-commit:{os.getpid()}"
        try:
            log = sandboxes_builder(tag, ctx / "Dockerfile", ctx)
        finally:
            subprocess.run(["docker", "rmi", "-f", tag], capture_output=True)
        assert base_commit_of(log) == expected, log[-2000:]


@pytest.mark.docker
@pytest.mark.timeout(600)
def test_build_grade_and_cache(inputs, tmp_path, monkeypatch):
    """Each build below replaces the instance image under the same tag (the first one an image an earlier run
    left): the builder removes what it replaced, so that no run leaves untagged images behind."""
    built = [i for i in [_image_id(image_tag("swe-rl__calc-1"))] if i]
    try:
        _build_grade_and_cache(inputs, tmp_path, monkeypatch, built)
    finally:
        tagged = _image_id(image_tag("swe-rl__calc-1"))
        left = [i for i in dict.fromkeys(built) if i != tagged and _image_id(i)]
        for i in left:
            subprocess.run(["docker", "rmi", i], capture_output=True)
    assert not left, f"images replaced by a rebuild were left behind: {left}"


def _image_id(tag: str) -> str:
    return subprocess.run(["docker", "image", "inspect", "-f", "{{.Id}}", tag], capture_output=True,
                          text=True).stdout.strip()  # fmt: skip


def _build_grade_and_cache(inputs, tmp_path, monkeypatch, built: list[str]) -> None:
    from swe_rl.grading.grader import docker_factory, grade_sync
    from swe_rl.images import swebench_stage
    from swe_rl.images.swebench_build import build_inputs
    from swe_rl.images.swebench_stage import base_commit_of
    from swe_rl.tasks.loaders import load_tasks

    (first,) = build_inputs(inputs, tmp_path / "tasks.jsonl", force=True)
    built.append(_image_id(image_tag("swe-rl__calc-1")))
    assert first.status == "built", first.error
    assert first.image == image_tag("swe-rl__calc-1") == "sweb.eval.x86_64.swe-rl__calc-1:latest"
    (task,) = load_tasks(tmp_path / "tasks.jsonl")
    assert task.metadata["upstream_base_commit"] == "0" * 40 and task.metadata["spec_python"] == "3.11"
    assert task.metadata["python"].startswith("3.11.") and task.metadata["python_deviation"] == ""
    assert task.metadata["base_image"] == "swe-rl/base:bookworm" and task.metadata["wheels_from"] == "inputs"
    assert task.metadata["left_out"] == [
        "pre_install left out (offline): apt-get update && apt-get install -y locales"
    ]
    layout = subprocess.run(["docker", "run", "--rm", "--network", "none", task.image, "bash", "-c",
                             "source /opt/miniconda3/bin/activate && conda activate testbed && which python "
                             "&& python -c 'import tinydep' && ln -s \"$(command -v python)\" /tmp/py "
                             "&& /tmp/py -c 'import tinydep, sys; assert sys.prefix == \"/opt/miniconda3/envs/testbed\", sys.prefix' "
                             "&& git -C /testbed rev-list --max-parents=0 HEAD && git -C /testbed rev-list --all --count"], capture_output=True, text=True)  # fmt: skip
    assert layout.stdout.split() == ["/opt/miniconda3/envs/testbed/bin/python", task.base_commit, "2"], (
        layout.stderr
    )
    factory = docker_factory()
    gold, empty, noop = (grade_sync(task, p, factory) for p in (GOLD, "", NOOP))
    assert gold.resolved and gold.reward == 1.0, gold.log[-1500:]
    assert not empty.resolved and not noop.resolved and noop.reward == 0.0
    # pytest.fail raises a BaseException: build_one's per-row catch lets it through
    with monkeypatch.context() as m:
        m.setattr(swebench_stage, "_unpack", lambda *a: pytest.fail("a present image unpacked its source"))
        (again,) = build_inputs(inputs, tmp_path / "tasks2.jsonl")
    assert again.status == "present", again.error  # same inputs hash: no rebuild, no unpack
    assert (tmp_path / "tasks2.jsonl").read_text() == (tmp_path / "tasks.jsonl").read_text()
    spec = json.loads((inputs / "specs.json").read_text())
    spec["swe-rl/calc"]["1.0"]["install"] = "python -c 'import tinydep, sys'"
    (inputs / "specs.json").write_text(json.dumps(spec))
    (changed,) = build_inputs(inputs, tmp_path / "tasks3.jsonl")
    built.append(_image_id(image_tag("swe-rl__calc-1")))
    assert changed.status == "built"  # another install step is another image
    # the same context again: Docker reuses every cached layer, the setup script prints no base commit, and the
    # builder reads it from the image instead
    from swe_rl.images import swebench_build

    printed: list[str | None] = []
    with monkeypatch.context() as m:
        m.setattr(
            swebench_build, "base_commit_of", lambda log: printed.append(base_commit_of(log)) or printed[-1]
        )
        (forced,) = build_inputs(inputs, tmp_path / "tasks4.jsonl", force=True)
        built.append(_image_id(image_tag("swe-rl__calc-1")))
    assert forced.status == "built" and forced.task is not None, forced.error
    assert printed == [None]  # the cached layer printed nothing: the base commit came from the image
    assert forced.task["base_commit"] == changed.task["base_commit"] == task.base_commit


def test_bad_inputs_fail_their_row_with_the_reason(inputs, tmp_path):
    from swe_rl.images.swebench_build import build_inputs

    (inputs / "src" / "swe-rl__calc-1.tar").unlink()
    (res,) = build_inputs(inputs, tmp_path / "t.jsonl")
    assert res.status == "failed" and "src/swe-rl__calc-1.tar: missing" in res.error
    with pytest.raises(ImageInputError, match=r"rows\.jsonl: missing"):
        build_inputs(tmp_path / "nowhere")


def test_sources_as_tar_gzip_or_directory(inputs, tmp_path):
    """src/<id>.tar, .tar.gz and a directory give the same files; the hash is the uncompressed tar's."""
    import gzip
    import hashlib

    from swe_rl.images.swebench_images import read_source_file, source_of, source_tar_sha256

    tar = inputs / "src" / "swe-rl__calc-1.tar"
    raw = tar.read_bytes()
    assert (
        source_of(inputs, "swe-rl__calc-1") == tar
        and source_tar_sha256(tar) == hashlib.sha256(raw).hexdigest()
    )
    gz = tmp_path / "gz" / "src" / "swe-rl__calc-1.tar.gz"
    gz.parent.mkdir(parents=True)
    gz.write_bytes(gzip.compress(raw))
    assert source_of(tmp_path / "gz", "swe-rl__calc-1") == gz and source_tar_sha256(gz) == source_tar_sha256(
        tar
    )
    folder = tmp_path / "dir" / "src" / "swe-rl__calc-1"
    with tarfile.open(tar) as t:
        t.extractall(folder, filter="tar")
    assert source_of(tmp_path / "dir", "swe-rl__calc-1") == folder and source_tar_sha256(folder) is None
    for src in (tar, gz, folder):
        assert read_source_file(src, "calc.py").decode() == CALC
        with pytest.raises(ImageInputError, match=r"no file 'nope\.py'"):
            read_source_file(src, "nope.py")


FIXTURE_USER = """
def test_one(iid, real_tasks):
    assert real_tasks.tasks[iid].image.startswith("sweb.eval.x86_64.")

def test_all(real_tasks):
    assert sorted(real_tasks.tasks) == ["swe-rl__calc-1"] and sorted(real_tasks.tasks.failed) == [
        "swe-rl__calc-2", "swe-rl__calc-3"]
"""


@pytest.mark.docker
@pytest.mark.timeout(900)
def test_real_fixture_fails_only_the_bad_instances(inputs, tmp_path):
    """tests/real/conftest.py as a user of its fixtures sees it: one good instance (src .tar.gz), one whose source
    is missing, one whose source does not match manifest.json. Only the bad instances' tests fail, each with its
    reason; the session builds once (no retry per test) and only the instances the selected tests need."""
    import gzip
    import shutil

    tar = inputs / "src" / "swe-rl__calc-1.tar"
    (inputs / "src" / "swe-rl__calc-3.tar").write_bytes(tar.read_bytes())
    (inputs / "src" / "swe-rl__calc-1.tar.gz").write_bytes(gzip.compress(tar.read_bytes()))
    tar.unlink()
    rows = [{**ROW, "instance_id": f"swe-rl__calc-{n}"} for n in (1, 2, 3)]
    (inputs / "rows.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    suite = tmp_path / "tests" / "real"
    suite.mkdir(parents=True)
    shutil.copy(Path(__file__).parents[1] / "real" / "conftest.py", suite / "conftest.py")
    entry = {"repo": "swe-rl/calc", "base_commit": "0" * 40, "source_tar_sha256": "f" * 64}
    (suite / "manifest.json").write_text(json.dumps({"instances": {"swe-rl__calc-3": entry}}))
    (suite / "test_user.py").write_text(FIXTURE_USER)

    def run(*args: str) -> tuple[str, dict[str, tuple[str, str]]]:
        """The session's output and, from its junit record (not the terminal's short summary, whose lines pytest
        cuts to the terminal's width), each test's outcome and failure message."""
        env = {**os.environ, "SWE_RL_REAL_INPUTS": str(inputs)}
        record = tmp_path / f"junit-{len(list(tmp_path.glob('junit-*')))}.xml"
        proc = subprocess.run([sys.executable, "-m", "pytest", str(suite), "-s", "-rf", "-p", "no:cacheprovider",
                               f"--junitxml={record}", *args], capture_output=True, text=True, env=env,
                              cwd=Path(__file__).parents[2])  # fmt: skip
        out = proc.stdout + proc.stderr
        assert record.is_file(), out[-3000:]
        results = {}
        for case in ET.parse(record).iter("testcase"):
            bad = case.find("failure") if case.find("failure") is not None else case.find("error")
            results[case.get("name")] = ("passed", "") if bad is None else (bad.tag, bad.get("message", ""))
        return out, results

    out, results = run()
    assert [k for k, (o, _) in results.items() if o == "passed"] == [
        "test_one[swe-rl__calc-1]",
        "test_all",
    ], (
        results,
        out[-3000:],
    )
    outcome, why = results["test_one[swe-rl__calc-2]"]
    assert outcome == "failure" and re.search(
        r"swe-rl__calc-2: image build failed: .*calc-2\.tar: missing", why
    ), why
    outcome, why = results["test_one[swe-rl__calc-3]"]
    assert outcome == "failure" and re.search(r"swe-rl__calc-3: source sha256 \w+ \(of the uncompressed tar\), "
                                              r"manifest.json expects f{64}", why), why  # fmt: skip
    assert out.count("image swe-rl__calc-2: failed") == 1 and out.count("image swe-rl__calc-1: ") == 1
    out, results = run("-k", "test_one and calc-1")
    assert (
        results == {"test_one[swe-rl__calc-1]": ("passed", "")}
        and "image swe-rl__calc-1: present" in out
        and "calc-2" not in out
    ), out[-3000:]


@pytest.mark.slow
@pytest.mark.timeout(600)
def test_pypi_lock_for_another_python(tmp_path, monkeypatch):
    """A Python the wheelhouse is not built for: uv resolves on the host for the image's exact Python (markers
    included), the wheelhouse's versions preferred, the files come from PyPI into the cache, sha256-checked; the
    source it resolved is left as it was (building its metadata writes *.egg-info) and a second lock is offline."""
    from swe_rl.images import swebench_wheels

    monkeypatch.setenv("SWE_RL_CACHE", str(tmp_path / "cache"))
    src = tmp_path / "src"
    src.mkdir()
    (src / "setup.py").write_text("from setuptools import setup\nsetup(name='demo', version='1.0', install_requires="
                                  "['six', 'importlib-metadata; python_version < \"3.10\"'])\n")  # fmt: skip
    wheels = tmp_path / "wheels"
    wheels.mkdir()
    (wheels / "six-1.15.0-py2.py3-none-any.whl").write_bytes(b"")  # a preference: the wheelhouse's version
    lines = ["pip", f"-e {src}"]
    pins, files = swebench_wheels.lock_env(lines, src, ["k"], "3.9.2", "2.31", wheels, "demo")
    names = {p.split("==")[0] for p in pins}
    # importlib-metadata: its marker holds for the image's 3.9, not for the host's Python
    assert "six==1.15.0" in pins and "importlib-metadata" in names and "demo" not in names, pins
    assert sorted(p.name for p in src.iterdir()) == ["setup.py"]
    assert all(f.parent == tmp_path / "cache" / "wheels" and f.stat().st_size > 0 for f in files)
    assert any(f.name.startswith("pip-") for f in files)
    monkeypatch.setattr(swebench_wheels, "resolve", None)  # cached: no second resolution
    assert swebench_wheels.lock_env(lines, src, ["k"], "3.9.2", "2.31", wheels, "demo") == (pins, files)


def test_python_of_a_spec_and_its_deviation():
    from swe_rl.images.swebench_env import choose_python, load_overrides

    pythons = load_overrides()["pythons"]
    assert pythons == {"3.9": "bullseye", "3.11": "bookworm", "3.13": "trixie"}
    same = choose_python("3.9", pythons)
    assert (same.minor, same.base_image, same.deviation) == ("3.9", "swe-rl/base:bullseye", "")
    for spec, minor in (("3.6", "3.9"), ("3.8", "3.9"), ("3.10", "3.11"), ("3.12", "3.13"), ("3.14", "3.13")):
        got = choose_python(spec, pythons)
        assert got.minor == minor and f"no Debian suite ships Python {spec}" in got.deviation, got
    forced = choose_python("3.9", pythons, forced="3.11")
    assert forced.suite == "bookworm" and "swebench_overrides.json says 3.11" in forced.deviation


def test_env_inputs_from_requirements_and_overrides(tmp_path):
    from swe_rl.images.swebench_env import env_fixes, load_overrides, split_requirements, wheelhouse_pythons

    env, local = split_requirements(
        "# header\n-e .[testutils]\nastroid==2.11.6  # pinned\n\npytest~=7.1\n./sub\n"
    )
    assert env == ["astroid==2.11.6", "pytest~=7.1"] and local == ["-e .[testutils]", "./sub"]
    bad = tmp_path / "o.json"
    bad.write_text(json.dumps({"pythons": {}, "envs": {"a/b": {"1.0": {"pins": []}}}}))
    with pytest.raises(ImageInputError, match=r"envs\.a/b\.1\.0: unknown keys \['pins'\] or no 'why'"):
        load_overrides(bad)
    data = {
        "envs": {
            "a/b": {"*": {"why": "w", "requirements": ["x<2"]}, "1.0": {"why": "v", "requirements": ["y"]}}
        }
    }
    assert (
        env_fixes(data, "a/b", "1.0")["requirements"] == ["x<2", "y"] and env_fixes(data, "a/c", "1.0") == {}
    )
    for name in (
        "pkg-1.0-py3-none-any.whl",
        "bin-2.0-cp311-cp311-manylinux2014_x86_64.whl",
        "ab-1-cp39-abi3-any.whl",
    ):
        (tmp_path / name).write_bytes(b"")
    assert wheelhouse_pythons(tmp_path) == {"3.11"}  # abi3 and pure wheels serve any Python


def test_pick_files_takes_the_best_wheel_for_the_image():
    from swe_rl.images.swebench_wheels import pick_files

    def w(name: str) -> dict:
        return {"url": f"https://x/{name}", "hashes": {"sha256": name}}

    lock = {"packages": [
        {"name": "a", "wheels": [w("a-1-py3-none-any.whl"), w("a-1-cp39-cp39-manylinux_2_17_x86_64.whl"),
                                 w("a-1-cp39-cp39-manylinux_2_34_x86_64.whl"), w("a-1-cp311-cp311-manylinux1_x86_64.whl")]},
        {"name": "b", "wheels": [w("b-1-cp311-cp311-manylinux1_x86_64.whl")], "sdist": w("b-1.tar.gz")},
        {"name": "c", "wheels": [w("c-1-cp37-abi3-manylinux1_x86_64.whl")]},
    ]}  # fmt: skip
    got = [f["url"].rsplit("/", 1)[1] for f in pick_files(lock, "3.9.2", "2.31")]
    # the most specific compatible tag (cp39 manylinux 2.17; 2.34 needs a newer glibc), an sdist, an abi3 wheel
    assert got == [
        "a-1-cp39-cp39-manylinux_2_17_x86_64.whl",
        "b-1.tar.gz",
        "c-1-cp37-abi3-manylinux1_x86_64.whl",
    ]
    with pytest.raises(ImageInputError, match=r"b 1: no wheel for Python 3\.9\.2 and no sdist"):
        pick_files(
            {"packages": [{"name": "b", "version": "1", "wheels": lock["packages"][1]["wheels"]}]},
            "3.9.2",
            "2.31",
        )
