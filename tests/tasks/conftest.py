"""Shared helpers for the tasks tests (fixtures prefixed `tasks_`)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

WRONG_PATCH = """diff --git a/NOTES.md b/NOTES.md
new file mode 100644
--- /dev/null
+++ b/NOTES.md
@@ -0,0 +1,2 @@
+Investigated the report; could not reproduce yet.
+TODO: add a regression test.
"""


@pytest.fixture(scope="session")
def tasks_micro():
    from swe_rl.tasks.loaders import load_tasks

    return {t.instance_id: t for t in load_tasks("micro")}


@pytest.fixture(scope="session")
def tasks_micro_images(tasks_micro):
    """Build (or find) the micro suite's images once per session; fails loudly when a build fails."""
    from swe_rl.images.task_images import build_task_images
    from swe_rl.tasks.loaders import MICRO_SUITE

    results = build_task_images(MICRO_SUITE, workers=2)
    failed = [r for r in results if r.status == "failed"]
    assert not failed, failed
    return tasks_micro


@pytest.fixture(scope="session")
def tasks_no_record():
    """make(textkit task) -> the task as a suite whose runner pytest's junit record cannot reach (sphinx's tox):
    the log is all the grader has."""
    from swe_rl.grading.plan import plan_grading

    def make(task):
        # pytest started through `pytest.main`, as a repository's runner script would: the grader cannot tell
        # that pytest runs, so it neither adds its junit option nor expects a record (nor runs a probe)
        cmd = "\npython3 -m pytest -rA -p no:cacheprovider tests/test_wrap.py\n"
        launcher = "python3 -c 'import sys, pytest; sys.exit(pytest.main())'"
        assert task.eval_script.count(cmd) == 1
        script = task.eval_script.replace(cmd, cmd.replace("python3 -m pytest", launcher))
        out = task.model_copy(update={"eval_script": script})
        assert not plan_grading(out).junit
        return out

    return make


@pytest.fixture
def tasks_wrong_patch() -> str:
    """A well-formed patch that applies to any repo and fixes nothing (adds a notes file)."""
    return WRONG_PATCH


@pytest.fixture
def tasks_write_jsonl():
    def write(path: Path, rows: list[dict]) -> Path:
        path.write_text("".join(json.dumps(r) + "\n" for r in rows))
        return path

    return write


@pytest.fixture(scope="session")
def tasks_redteam(tmp_path_factory):
    """make(task_id, edit, reproducer=None) -> (patch, reproducer output): `edit` (shell, run in the repo) made
    on the host in a fresh copy of the task's testbed (the suite's make_testbed.sh: the repo at base_commit), the
    patch its `git diff`; `reproducer` (shell) runs afterwards in the edited tree, so that a red-team patch can
    show the bug is still there outside the tests."""
    import os
    import shutil
    import subprocess
    import threading
    import uuid

    from swe_rl.tasks.loaders import MICRO_SUITE

    root = Path(MICRO_SUITE)
    work = tmp_path_factory.mktemp("redteam")
    bases: dict[str, Path] = {}

    # plain Python outside any test run: no PYTEST_* variables of this session leak into the reproducer
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTEST")}

    def sh(cmd: str, cwd: Path) -> str:
        res = subprocess.run(
            ["bash", "-c", cmd], cwd=cwd, capture_output=True, text=True, timeout=120, env=env
        )
        assert res.returncode == 0, (cmd, res.stdout[-2000:], res.stderr[-2000:])
        return res.stdout

    lock = threading.Lock()  # callers may make patches from threads side by side

    def make(task_id: str, edit: str, reproducer: str | None = None) -> tuple[str, str]:
        repo = task_id.split("__", 1)[1].rsplit("-", 1)[0]  # swe-rl-micro__<repo>-<n>
        with lock:
            if task_id not in bases:
                base = work / f"base-{task_id}"
                ignore = shutil.ignore_patterns("__pycache__", "*.pyc", ".pytest_cache")
                shutil.copytree(root / "repos" / repo, base, ignore=ignore)
                sh(f"bash {root / 'make_testbed.sh'} . {root / 'tasks' / task_id}", base)
                bases[task_id] = base
        tree = work / f"edit-{uuid.uuid4().hex[:12]}"
        shutil.copytree(bases[task_id], tree, symlinks=True)
        sh(edit, tree)
        patch = sh("git add -A && git -c core.quotepath=off diff --cached --binary", tree)
        assert patch.startswith("diff --git"), (task_id, edit)
        return patch, sh(reproducer, tree) if reproducer else ""

    return make


@pytest.fixture
def tasks_git_repo(tmp_path):
    """make(base: {path: text}, after: {path: text}) -> a git repo at tmp_path/repo with `base` committed and
    `after` written on top, uncommitted: what the grader finds in the tree after a patch."""
    import subprocess
    import textwrap

    def make(base: dict[str, str], after: dict[str, str]) -> Path:
        repo = tmp_path / "repo"
        repo.mkdir(parents=True)
        for path, text in base.items():
            (repo / path).write_text(textwrap.dedent(text))
        git = ["git", "-C", str(repo), "-c", "user.email=t@t", "-c", "user.name=t"]
        for args in (["init", "-q"], ["add", "."], ["commit", "-qm", "base"]):
            subprocess.run([*git, *args], check=True)
        for path, text in after.items():
            (repo / path).write_text(textwrap.dedent(text))
        return repo

    return make
