"""Real SWE-bench instances from an inputs directory (rows.jsonl + src/ + wheels/; swe_rl/images/swebench_images.py).

The directory comes from SWE_RL_REAL_INPUTS (`make test-real REAL_INPUTS=DIR`), default ../shared/real_instances;
SWE_RL_REAL_IDS (`make test-real REAL_IDS="id id"`) narrows it to some ids. Nothing of it is in the repository
(third-party source and dataset rows); tests/real/manifest.json names what we checked. Without the directory every
test here is skipped with one line saying where it looked.

Fixtures other test files rely on (names and meaning stable):
- `iid`: one test per selected instance id (parametrized here).
- `real_tasks`: `(rows_path, tasks)`: the task rows of the images built this session and {iid: Task}, each with its
  validation (`metadata["validation"]`, swe_rl.grading.validate). Looking up an
  instance whose build (or source check) failed fails that test with the reason; the build runs once per session,
  only for the instances the selected tests need, and is never retried per test.
- `real_inputs`: the inputs directory; `real_manifest`: manifest.json's {iid: entry}.
"""

from __future__ import annotations

import json
import os
import re
from pathlib import Path
from typing import Any, NamedTuple

import pytest

REPO = Path(__file__).resolve().parents[2]
INPUTS = Path(os.environ.get("SWE_RL_REAL_INPUTS") or REPO.parent / "shared" / "real_instances").resolve()
MANIFEST = Path(__file__).with_name("manifest.json")
NEEDED = pytest.StashKey[list[str]]()


def real_ids() -> list[str]:
    """The inputs' instance ids, in rows.jsonl order, narrowed by SWE_RL_REAL_IDS (spaces or commas)."""
    rows = INPUTS / "rows.jsonl"
    if not rows.is_file():
        return []
    ids = [json.loads(x)["instance_id"] for x in rows.read_text().splitlines() if x.strip()]
    wanted = re.split(r"[\s,]+", os.environ.get("SWE_RL_REAL_IDS", "").strip())
    wanted = [w for w in wanted if w]
    unknown = sorted(set(wanted) - set(ids))
    if unknown:
        raise pytest.UsageError(f"SWE_RL_REAL_IDS names ids not in {rows}: {', '.join(unknown)}")
    return [i for i in ids if i in wanted] if wanted else ids


def pytest_collection_modifyitems(config, items):
    if real_ids():
        return
    skip = pytest.mark.skip(reason=f"no real-instance inputs at {INPUTS} (set SWE_RL_REAL_INPUTS)")
    for item in items:
        if "tests/real/" in str(item.fspath):
            item.add_marker(skip)


def pytest_collection_finish(session):
    """The instances the selected tests need: a per-instance test needs its own; any other real test needs all."""
    needed: set[str] = set()
    for item in session.items:
        if "tests/real/" not in str(item.fspath) or "real_tasks" not in getattr(item, "fixturenames", ()):
            continue
        callspec = getattr(item, "callspec", None)
        if callspec is not None and "iid" in callspec.params:
            needed.add(callspec.params["iid"])
        else:
            needed.update(real_ids())
    session.config.stash[NEEDED] = [i for i in real_ids() if i in needed]


def pytest_generate_tests(metafunc):
    if "iid" in metafunc.fixturenames:  # one test per instance of the inputs dir
        metafunc.parametrize("iid", real_ids() or ["none"])


class BuiltTasks(dict):
    """{iid: Task} of the built instances; a failed one's lookup fails the asking test with the reason."""

    def __init__(self, tasks: dict[str, Any], failed: dict[str, str]):
        super().__init__(tasks)
        self.failed = failed

    def __missing__(self, iid: str) -> Any:
        reason = self.failed.get(iid, "not built this session (not selected: SWE_RL_REAL_IDS / -k)")
        pytest.fail(f"{iid}: {reason}", pytrace=False)


class RealTasks(NamedTuple):
    rows: Path
    tasks: BuiltTasks


@pytest.fixture(scope="session")
def real_inputs() -> Path:
    return INPUTS


@pytest.fixture(scope="session")
def real_manifest() -> dict[str, dict[str, Any]]:
    return json.loads(MANIFEST.read_text())["instances"]


def source_mismatch(iid: str, entry: dict[str, Any]) -> str:
    """'' when the instance's source is the one manifest.json records (or there is nothing to compare)."""
    from swe_rl.images.swebench_images import ImageInputError, source_of, source_tar_sha256

    try:
        digest = source_tar_sha256(source_of(INPUTS, iid))
    except ImageInputError as e:
        return str(e)
    if digest is None or digest == entry["source_tar_sha256"]:
        return ""
    return (f"source sha256 {digest} (of the uncompressed tar), manifest.json expects {entry['source_tar_sha256']} "
            f"(git archive --format=tar {entry['base_commit']} of {entry['repo']})")  # fmt: skip


@pytest.fixture(scope="session")
def real_tasks(request, tmp_path_factory, real_manifest) -> RealTasks:
    """The needed instances' images (built, or present with the same inputs hash) and their task rows."""
    from swe_rl.images.swebench_build import build_inputs
    from swe_rl.tasks.loaders import load_tasks

    needed = request.config.stash.get(NEEDED, None) or real_ids()
    failed = {i: m for i in needed if i in real_manifest and (m := source_mismatch(i, real_manifest[i]))}
    out = tmp_path_factory.mktemp("real") / "tasks.jsonl"
    todo = [i for i in needed if i not in failed]
    capture = request.config.pluginmanager.getplugin("capturemanager")
    with capture.global_and_fixture_disabled():  # the builder's progress line per image shows as it happens
        results = build_inputs(INPUTS, out, ids=todo) if todo else []
    for r in results:
        print(f"image {r.instance_id}: {r.status} in {r.seconds:.0f}s" + (f" ({r.error})" if r.error else ""))
        if r.status == "failed":
            failed[r.instance_id] = f"image build failed: {r.error}"
    if not todo:
        out.write_text("")
    tasks = {t.instance_id: t for t in load_tasks(out)} if out.read_text().strip() else {}
    return RealTasks(out, BuiltTasks(validated(tasks), failed))


def validated(tasks: dict[str, Any]) -> dict[str, Any]:
    """Each built instance with its validation (gold graded once per image, cached; swe_rl.grading.validate), as
    `swe-rl grade` and `swe-rl eval` grade it: the tests it leaves out are left out of every check here too."""
    from swe_rl.grading import docker_factory, validate_tasks_sync

    checked = validate_tasks_sync(list(tasks.values()), docker_factory(run_id="real-validate"))
    return {t.instance_id: t for t in checked}
