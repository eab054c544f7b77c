"""Git-history leakage: a task repo whose repository holds the future fix (later commit, branch, annotated tag,
remote-tracking ref, stash, reflog entries, notes, a dangling commit, packed refs). Its image must not let a
sandbox reach any of it, and grading must still judge the gold, empty and wrong patches as before."""

from __future__ import annotations

import subprocess
import uuid
from pathlib import Path

import pytest
import yaml

from sandboxes import make_sandbox

pytestmark = pytest.mark.docker

BUGGY = "def add(a, b):\n    return a - b\n\n\ndef sub(a, b):\n    return a - b\n"
FIXED = BUGGY.replace("return a - b\n\n\ndef sub", "return a + b\n\n\ndef sub")
TESTS = "from calc import add, sub\n\n\ndef test_sub():\n    assert sub(3, 1) == 2\n"
NEW_TEST = "\n\ndef test_add():\n    assert add(2, 2) == 4\n"


def _git(cwd: Path, *args: str) -> str:
    env = {"GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@t", "GIT_COMMITTER_NAME": "t",
           "GIT_COMMITTER_EMAIL": "t@t", "HOME": str(cwd), "PATH": "/usr/bin:/bin"}  # fmt: skip
    return subprocess.run(
        ["git", *args], cwd=cwd, env=env, check=True, capture_output=True, text=True
    ).stdout.strip()


def _leaky_task_repo(root: Path, image: str) -> dict[str, str]:
    """A one-task SWE-bench 5.x task repo whose testbed repository contains the fix; returns the hashes."""
    task = root / "tasks" / "leaky-1"
    repo = task / "repo"
    (repo / "tests").mkdir(parents=True)
    (repo / "calc.py").write_text(BUGGY)
    (repo / "tests" / "test_calc.py").write_text(TESTS)
    _git(repo, "init", "-q", "-b", "main")
    _git(repo, "add", "-A")
    _git(repo, "commit", "-qm", "base")
    _git(repo, "tag", "v1.0")
    base = _git(repo, "rev-parse", "HEAD")
    (repo / "calc.py").write_text(FIXED)
    (repo / "tests" / "test_calc.py").write_text(TESTS + NEW_TEST)
    gold = _git(repo, "diff", "--", "calc.py") + "\n"
    test_patch = _git(repo, "diff", "--", "tests") + "\n"
    _git(repo, "commit", "-qam", "Fix add (the future)")
    fix = _git(repo, "rev-parse", "HEAD")
    _git(repo, "tag", "-a", "v1.1", "-m", "release with the fix")
    _git(repo, "branch", "fix-branch")
    _git(repo, "notes", "add", "-m", "fixed in v1.1")
    _git(repo, "remote", "add", "origin", "https://example.invalid/calc.git")
    _git(repo, "update-ref", "refs/remotes/origin/main", fix)
    _git(repo, "reset", "-q", "--hard", base)  # the reflog now remembers the fix
    (repo / "calc.py").write_text(FIXED.replace("a + b", "b + a"))
    _git(repo, "stash", "-q")  # a stash made on top of the base, holding another fix
    stash = _git(repo, "rev-parse", "refs/stash")
    tree = _git(repo, "rev-parse", f"{fix}^{{tree}}")
    dangling = _git(repo, "commit-tree", tree, "-p", base, "-m", "dangling fix")
    _git(repo, "pack-refs", "--all")
    assert _git(repo, "rev-parse", "HEAD") == base and "a - b" in (repo / "calc.py").read_text()

    (root / "sweb.yaml").write_text("datasets:\n- swe-rl/leaky\nsplits:\n- test\n")
    (task / "Dockerfile").write_text("FROM swe-rl/base:bookworm\nCOPY repo /testbed\nWORKDIR /testbed\n")
    (task / "gold.patch").write_text(gold)
    (task / "test.patch").write_text(test_patch)
    (task / "problem_statement.md").write_text("add() subtracts.\n")
    (task / "tests.json").write_text(
        '{"FAIL_TO_PASS": ["tests/test_calc.py::test_add"], "PASS_TO_PASS": ["tests/test_calc.py::test_sub"]}'
    )
    (task / "eval.sh").write_text(
        "#!/bin/bash\nset -uxo pipefail\ncd /testbed\n"
        f"git checkout {base} -- tests/test_calc.py\n"
        f"git apply -v - <<'EOF_114329324912'\n{test_patch}EOF_114329324912\n"
        ": '>>>>> Start Test Output'\npython3 -m pytest -rA -p no:cacheprovider tests/test_calc.py\n"
        ": '>>>>> End Test Output'\n"
        f"git checkout {base} -- tests/test_calc.py\n"
    )
    meta = {"instance_id": "leaky-1", "repo": "swe-rl-test/calc", "base_commit": base, "image": image,
            "version": "1.0", "log_parser": "parse_log_pytest", "eval_type": "pass_and_fail",
            "created_at": "2024-01-01T00:00:00Z", "environment_setup_commit": base, "split": "test",
            "datasets": ["swe-rl/leaky"]}  # fmt: skip
    (task / "task.yaml").write_text(yaml.safe_dump(meta))
    return {"base": base, "fix": fix, "stash": stash, "dangling": dangling}


# every way to name a commit or object that the issue lists, plus raw text under .git
PROBES = (
    "git log --all --format=%H; git reflog --all --format=%H; git rev-list --all --reflog; "
    "git fsck --lost-found --unreachable --dangling 2>&1; git for-each-ref; cat .git/packed-refs; "
    "git stash list; git tag; git branch -a; git remote -v; git notes list 2>&1; ls .git/lost-found 2>&1; "
    "grep -rIl . .git --exclude-dir=objects --exclude-dir=hooks | xargs cat 2>/dev/null"
)


def _image_id(tag: str) -> str:
    return subprocess.run(
        ["docker", "image", "inspect", "-f", "{{.Id}}", tag], capture_output=True, text=True
    ).stdout.strip()


@pytest.fixture
def leaky(tmp_path):
    """The task repo, its image tag (unique to this test) and the hashes; removes the images it built."""
    image = f"swe-rl-test/leaky:{uuid.uuid4().hex[:10]}"
    ids: list[str] = []
    yield tmp_path, image, _leaky_task_repo(tmp_path, image), ids
    subprocess.run(["docker", "image", "rm", "-f", image, *ids], capture_output=True)


async def _probe(image: str) -> str:
    async with make_sandbox({"backend": "docker", "image": image}) as sb:
        return (await sb.exec(PROBES, cwd="/testbed", timeout=120)).output


@pytest.mark.timeout(600)
async def test_task_image_history_ends_at_the_base_commit(leaky):
    from swe_rl.images.task_images import build_task_images, is_scrubbed, sandboxes_builder
    from swe_rl.tasks.loaders import load_tasks

    root, image, h, ids = leaky
    task_dir = root / "tasks" / "leaky-1"
    sandboxes_builder(image, task_dir / "Dockerfile", task_dir)  # the plain build: the leak is really there
    ids.append(_image_id(image))
    raw = await _probe(image)
    assert all(h[k] in raw for k in ("fix", "stash", "dangling")) and "v1.1" in raw and "origin" in raw

    [res] = build_task_images(root)
    assert res.status == "built" and is_scrubbed(image, h["base"]), res
    out = await _probe(image)
    for name in ("fix", "stash", "dangling"):
        assert h[name] not in out, f"{name} commit {h[name]} still reachable:\n{out}"
    assert h["base"] in out and "v1.0" in out  # the past stays: base commit, its tag
    for leak in ("v1.1", "fix-branch", "origin", "refs/stash", "refs/notes"):
        assert leak not in out, f"{leak} still visible:\n{out}"
    async with make_sandbox({"backend": "docker", "image": image}) as sb:
        for obj in (h["fix"], h["stash"], h["dangling"], h["fix"][:10]):
            r = await sb.exec(f"git cat-file -t {obj}", cwd="/testbed")
            assert r.exit_code != 0, f"git cat-file reached {obj}: {r.output}"
        r = await sb.exec("git status --porcelain; git rev-parse HEAD; git count-objects -v", cwd="/testbed")
        assert r.output.startswith(h["base"]) and "garbage: 0" in r.output, r.output  # clean tree at the base
    assert build_task_images(root)[0].status == "present"  # scrubbed once, then current

    [task] = load_tasks(str(root))
    await _grades_unchanged(task)


async def _grades_unchanged(task) -> None:
    from swe_rl.grading.grader import docker_factory, grade

    factory = docker_factory(run_id="tasks-history")
    gold = await grade(task, task.patch, factory)
    assert gold.resolved and gold.reward == 1.0, gold.log[-2000:]
    empty = await grade(task, "", factory)
    assert not empty.resolved and empty.reward == 0.0
    assert empty.tests["tests_status"]["FAIL_TO_PASS"]["failure"] == ["tests/test_calc.py::test_add"]


def test_scrub_refuses_a_checkout_of_a_later_commit(tmp_path):
    from swe_rl.images.task_images import SCRUB_SCRIPT

    repo = tmp_path / "r"
    repo.mkdir()
    (repo / "f").write_text("1\n")
    _git(repo, "init", "-q")
    _git(repo, "add", "f")
    _git(repo, "commit", "-qm", "a")
    base = _git(repo, "rev-parse", "HEAD")
    (repo / "f").write_text("2\n")
    _git(repo, "commit", "-qam", "b")
    proc = subprocess.run(["bash", str(SCRUB_SCRIPT), str(repo), base], capture_output=True, text=True)
    assert proc.returncode == 3 and "is not the base commit" in proc.stderr
    assert _git(repo, "rev-list", "--all", "--count") == "2"  # nothing was touched
