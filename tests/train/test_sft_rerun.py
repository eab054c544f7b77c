"""`swe-rl sft` rerun into the same folder, run from the repo root as a user does: the saved model is reused when
the settings are the same, other settings are one error naming them, and a run cut short before it saved its model
trains again with its metrics rows set aside (before: it retrained, overwrote the model and appended its metrics
to the earlier run's)."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import uuid
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
SWE_RL = str(Path(sys.executable).with_name("swe-rl"))
pytestmark = pytest.mark.docker  # the expert episodes play in sandboxes
SMALL = ["n_tasks=2", "slots=2", "steps=2", "batch=2", "warmup=1", "log_every=1", "model.vocab_size=512"]


@pytest.fixture
def scratch():
    rel = Path("runs") / f"test-sft-rerun-{uuid.uuid4().hex[:8]}"
    yield rel
    shutil.rmtree(REPO / rel, ignore_errors=True)


def _sft(scratch: Path, *extra: str) -> subprocess.CompletedProcess[str]:
    cmd = [SWE_RL, "sft"]
    for o in [f"out_dir={scratch}", "name=s", *SMALL, *extra]:
        cmd += ["-o", o]
    return subprocess.run(cmd, cwd=REPO, capture_output=True, text=True, timeout=600)


def test_a_rerun_reuses_refuses_or_restarts(scratch):
    root = REPO / scratch / "s"
    model = root / "checkpoints" / "sft" / "model.safetensors"
    first = _sft(scratch)
    assert first.returncode == 0, first.stderr[-3000:]
    rows = (root / "metrics.jsonl").read_text()
    assert len(rows.splitlines()) == 2 and model.is_file()
    stamp = model.stat().st_mtime_ns

    # the same settings (how the episodes are played may differ): the saved model, nothing retrained or appended
    again = _sft(scratch, "slots=1")
    assert again.returncode == 0, again.stderr[-3000:]
    assert f"sft: {scratch}/s/checkpoints/sft was trained with these settings; reusing it" in again.stdout
    assert model.stat().st_mtime_ns == stamp and (root / "metrics.jsonl").read_text() == rows

    # other settings: one error naming them, the folder untouched
    other = _sft(scratch, "steps=3", "lr=0.001")
    assert other.returncode == 2, other.stderr[-3000:]
    err = other.stderr.strip().splitlines()[-1]
    assert err.startswith(f"error: run directory {scratch}/s holds an SFT run with other settings (lr: "), err
    assert "steps: 2 -> 3" in err and "-o name=..." in err, err
    assert model.stat().st_mtime_ns == stamp and (root / "metrics.jsonl").read_text() == rows

    # cut short before its model was saved: trained again, the earlier rows set aside, the transcripts reused
    shutil.rmtree(root / "checkpoints" / "sft")
    transcripts = (root / "expert.jsonl").read_text()
    cut = _sft(scratch)
    assert cut.returncode == 0, cut.stderr[-3000:]
    assert (
        "stopped before saving its model; training again (2 metrics rows moved to metrics.interrupted.jsonl)"
        in (cut.stdout)
    )
    assert (root / "metrics.interrupted.jsonl").read_text() == rows and model.is_file()
    assert [json.loads(x)["step"] for x in (root / "metrics.jsonl").read_text().splitlines()] == [1, 2]
    assert (root / "expert.jsonl").read_text() == transcripts
