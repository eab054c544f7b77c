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
    from swe_rl.tasks.images import build_task_images
    from swe_rl.tasks.loaders import MICRO_SUITE

    results = build_task_images(MICRO_SUITE, workers=2)
    failed = [r for r in results if r.status == "failed"]
    assert not failed, failed
    return tasks_micro


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
