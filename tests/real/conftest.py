"""Real SWE-bench instances from an inputs directory (rows.jsonl + src/ + wheels/; swe_rl/tasks/swebench_images.py).

The directory comes from SWE_RL_REAL_INPUTS (`make test-real REAL_INPUTS=DIR`), default ../shared/real_instances.
Nothing of it is in the repository (third-party source and dataset rows); tests/real/manifest.json names what we
checked. Without the directory every test here is skipped with one line saying where it looked.
"""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
INPUTS = Path(os.environ.get("SWE_RL_REAL_INPUTS") or REPO.parent / "shared" / "real_instances").resolve()


def real_ids() -> list[str]:
    rows = INPUTS / "rows.jsonl"
    if not rows.is_file():
        return []
    return [json.loads(x)["instance_id"] for x in rows.read_text().splitlines() if x.strip()]


def pytest_collection_modifyitems(config, items):
    if real_ids():
        return
    skip = pytest.mark.skip(reason=f"no real-instance inputs at {INPUTS} (set SWE_RL_REAL_INPUTS)")
    for item in items:
        if "tests/real/" in str(item.fspath):
            item.add_marker(skip)


def pytest_generate_tests(metafunc):
    if "iid" in metafunc.fixturenames:  # one test per instance of the inputs dir
        metafunc.parametrize("iid", real_ids() or ["none"])


@pytest.fixture(scope="session")
def real_inputs() -> Path:
    return INPUTS


@pytest.fixture(scope="session")
def real_tasks(tmp_path_factory):
    """Every instance's image (built, or present with the same inputs hash) and its task row file."""
    from swe_rl.tasks.loaders import load_tasks
    from swe_rl.tasks.swebench_build import build_inputs

    manifest = json.loads((Path(__file__).with_name("manifest.json")).read_text())["instances"]
    for iid, entry in manifest.items():  # a listed instance must come with the very source we checked
        src = INPUTS / "src" / f"{iid}.tar"
        if iid in real_ids() and src.is_file():
            digest = hashlib.sha256(src.read_bytes()).hexdigest()
            assert digest == entry["source_tar_sha256"], (
                f"{src}: sha256 {digest}, manifest.json expects "
                f"{entry['source_tar_sha256']} (git archive --format=tar {entry['base_commit']} of {entry['repo']})"
            )
    out = tmp_path_factory.mktemp("real") / "tasks.jsonl"
    results = build_inputs(INPUTS, out)
    failed = [f"{r.instance_id}: {r.error}" for r in results if r.status == "failed"]
    assert not failed, "\n".join(failed)
    for r in results:
        print(f"image {r.instance_id}: {r.status} in {r.seconds:.0f}s")
    return out, {t.instance_id: t for t in load_tasks(out)}
