"""Commands fix their own preconditions or name the exact fix (issue 38), through the real CLI from the repository
root with relative paths and real Docker: `swe-rl grade` builds the missing images of task repos (the bundled micro
suite included), and every image it cannot make is named with the command that builds or pulls it for its source.
Only micro-suite task images (and images this test names and never creates) are touched."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import uuid
from pathlib import Path

import pytest
import yaml

pytestmark = pytest.mark.docker

REPO = Path(__file__).resolve().parents[2]
SWE_RL = str(Path(sys.executable).with_name("swe-rl"))
MICRO = REPO / "swe_rl" / "tasks" / "micro_suite"


def swe_rl(*args: str, timeout: float = 600) -> subprocess.CompletedProcess[str]:
    return subprocess.run([SWE_RL, *args], cwd=REPO, capture_output=True, text=True, timeout=timeout)


@pytest.fixture
def scratch():
    """A folder under the repository's runs/ (commands get it as a relative path); removed afterwards."""
    rel = Path("runs") / f"test-preconditions-{uuid.uuid4().hex[:8]}"
    (REPO / rel).mkdir(parents=True)
    yield rel
    shutil.rmtree(REPO / rel, ignore_errors=True)


def _image_present(tag: str) -> bool:
    return subprocess.run(["docker", "image", "inspect", tag], capture_output=True).returncode == 0


def test_grade_builds_the_micro_images_it_needs(scratch):
    ids = ["swe-rl-micro__exprcalc-4", "swe-rl-micro__textkit-2"]
    tags = [f"swe-rl/micro:{i.split('__')[1]}" for i in ids]
    for tag in tags:  # a fresh machine: no micro image yet (only these two tags; layers stay cached)
        rm = subprocess.run(["docker", "rmi", tag], capture_output=True, text=True)
        assert rm.returncode == 0 or "No such image" in rm.stderr, rm.stderr
        assert not _image_present(tag)
    args = ["--tasks", "micro", "--predictions", "gold", "--out", str(scratch / "grade")]
    proc = swe_rl("grade", *args, "--id", ids[0], "--id", ids[1])
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "building 2 task image(s) of micro_suite" in proc.stderr, proc.stderr[-3000:]
    assert "resolved 2/2" in proc.stdout and "(infra 0)" in proc.stdout, proc.stdout
    assert all(_image_present(t) for t in tags)


def _task_repo_with_missing_base(root: Path, suite: str) -> tuple[str, str]:
    """A copy of the micro suite whose first task builds FROM a base image nobody has; (instance id, image)."""
    shutil.copytree(MICRO, root, ignore=shutil.ignore_patterns("__pycache__"))
    task_dir = sorted((root / "tasks").iterdir())[0]
    docker = task_dir / "Dockerfile"
    docker.write_text(docker.read_text().replace("FROM swe-rl/base:bookworm", f"FROM swe-rl/base:{suite}"))
    meta = yaml.safe_load((task_dir / "task.yaml").read_text())
    meta["image"] = f"swe-rl/test-preconditions:{uuid.uuid4().hex[:8]}"
    (task_dir / "task.yaml").write_text(yaml.safe_dump(meta))
    return meta["instance_id"], meta["image"]


def test_a_missing_base_image_is_named_with_the_command_that_builds_it(scratch):
    suite = f"nosuch{uuid.uuid4().hex[:6]}"
    iid, image = _task_repo_with_missing_base(REPO / scratch / "repo", suite)
    proc = swe_rl("grade", "--tasks", str(scratch / "repo"), "--predictions", "gold", "--out",
                  str(scratch / "grade"), "--id", iid)  # fmt: skip
    fix = f"base image swe-rl/base:{suite} missing: sandboxes build-base --suite {suite} --tag swe-rl/base:{suite}"
    assert fix in proc.stderr, proc.stderr[-3000:]
    assert "resolved 0/1" in proc.stdout and "(infra 1)" in proc.stdout, proc.stdout
    assert not _image_present(image)


def test_rows_from_an_inputs_folder_and_prebuilt_rows_name_their_own_fix(scratch):
    from swe_rl.tasks.loaders import load_tasks

    inputs = REPO / scratch / "inputs"
    inputs.mkdir()
    (inputs / "rows.jsonl").write_text(
        "{}\n"
    )  # an inputs folder: its rows are what `swe-rl images build` reads
    rows = []
    for n, task in enumerate(sorted(load_tasks("micro"), key=lambda t: t.instance_id)[:2]):
        row = json.loads(task.model_dump_json())
        row["instance_id"] = f"docs-test__row-{n}"
        row["metadata"] = {"inputs_sha256": "0" * 64} if n == 0 else {}
        row["image"] = f"swe-rl-test-nosuch/sweb.eval.x86_64.row-{n}-{uuid.uuid4().hex[:8]}:latest"
        rows.append(json.dumps(row))
    (inputs / "tasks.jsonl").write_text("\n".join(rows) + "\n")
    source = str(scratch / "inputs" / "tasks.jsonl")
    proc = swe_rl("grade", "--tasks", source, "--predictions", "gold", "--out", str(scratch / "grade"))
    assert f"swe-rl images build --inputs {scratch / 'inputs'} --id docs-test__row-0" in proc.stderr, (
        proc.stderr
    )
    assert f"swe-rl tasks build-images --tasks {source} --id docs-test__row-1" in proc.stderr, proc.stderr
    assert "resolved 0/2" in proc.stdout and "(infra 2)" in proc.stdout, proc.stdout


def test_images_build_names_a_missing_inputs_folder(scratch):
    proc = swe_rl("images", "build", "--inputs", str(scratch / "nowhere"))
    assert proc.returncode == 2
    assert proc.stderr.strip() == (
        f"error: --inputs {scratch / 'nowhere'}: no such folder (expected rows.jsonl, src/<id>.tar and wheels/; "
        "the layout is in tests/real/README.md)"
    )


def test_tasks_list_images_is_the_images_file_of_a_task_set():
    proc = swe_rl("tasks", "list", "--tasks", "micro", "--images")
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.split()
    assert (
        len(lines) == 15 and lines == sorted(set(lines)) and all(x.startswith("swe-rl/micro:") for x in lines)
    )
