"""Test patches that create files (many SWE-bench instances add a test file), graded through the real grader on a
micro task's image (Docker).

- The graded run: the eval script's `git apply` of the test patch is atomic. A patch that creates a file the test
  patch creates makes the whole test patch fail to apply, and the official run then runs the patch's own version
  of the tests (SWE-bench's harness does the same). The tree guard removes such files first
  (`test_files_removed`): the test patch applies as it does for the gold patch.
- The probe run starts in the graded run's sandbox, where the graded run's apply left the created files: the probe
  removes them first, so that its own apply works and it observes the graded run's tests (before, it silently ran
  the modified test files at their base version, issue 35 / the cost helper's note). A test patch that still does
  not apply there is a probe note."""

from __future__ import annotations

import pytest

from swe_rl.grading.grader import docker_factory, grade

pytestmark = [pytest.mark.docker, pytest.mark.timeout(900)]

TASK = "swe-rl-micro__textkit-3"
ADDED = """
from textkit.wrap import truncate


def test_truncate_added():
    assert truncate("The quick brown fox", 10) == "The qui..."
"""
COMMAND = "python3 -m pytest -rA -p no:cacheprovider tests/test_wrap.py tests/test_added.py"


def _new_file(path: str, text: str) -> str:
    lines = text.strip("\n").split("\n")
    body = "".join(f"+{line}\n" for line in lines)
    return f"diff --git a/{path} b/{path}\nnew file mode 100644\n--- /dev/null\n+++ b/{path}\n@@ -0,0 +1,{len(lines)} @@\n{body}"


def _task(base, with_wrap: bool):
    """textkit-3 whose test patch also creates tests/test_added.py (with_wrap: and keeps its change to
    tests/test_wrap.py, whose FAIL_TO_PASS tests only run when the whole test patch applies)."""
    added = "tests/test_added.py::test_truncate_added"
    test_patch = (base.test_patch if with_wrap else "") + _new_file("tests/test_added.py", ADDED)
    f2p = [*base.FAIL_TO_PASS, added] if with_wrap else [added]
    return base.model_copy(update={"test_patch": test_patch, "FAIL_TO_PASS": f2p, "eval_script": COMMAND})


async def test_the_probe_observes_the_graded_tests_when_the_test_patch_creates_a_file(tasks_micro_images):
    task = _task(tasks_micro_images[TASK], with_wrap=True)
    gold = await grade(task, task.patch, docker_factory(run_id="tasks-test-files"))
    integrity = gold.tests["integrity"]
    probe = integrity["probe"]
    assert gold.resolved and gold.suspicious == () and integrity["test_files_removed"] == [], gold.log[-2000:]
    # every selected test ran in the probe run, and its test patch applied there
    assert probe["status"] == "ran" and probe.get("notes", []) == [], probe


async def test_a_patch_that_writes_the_test_file_itself_gets_the_real_tests(
    tasks_micro_images, tasks_redteam
):
    task = _task(tasks_micro_images[TASK], with_wrap=False)
    fake = "def test_truncate_added():\n    pass\n"  # the F2P test's name, a body that always passes; no fix
    patch, _ = tasks_redteam(TASK, f"cat > tests/test_added.py <<'EOF'\n{fake}EOF")
    factory = docker_factory(run_id="tasks-test-files")
    plain = await grade(task, patch, factory, guards=False, detect=False)
    assert plain.resolved, plain.log[
        -2000:
    ]  # the official run: the test patch failed to apply, its own test ran
    full = await grade(task, patch, factory)
    assert not full.resolved and full.tests["integrity"]["test_files_removed"] == ["tests/test_added.py"], (
        full.tests,
        full.log[-2000:],
    )
