"""scripts/eval_checkpoints.py answers bad input with one clear error (the evaluation itself is HeldOutEval's)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
SCRIPT = REPO / "scripts" / "eval_checkpoints.py"
CKPT = REPO / "swe_rl" / "train" / "assets" / "demo_sft"


def _run(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, str(SCRIPT), *args], capture_output=True, text=True, cwd=REPO)


def test_bad_input_gets_one_clear_error(tmp_path):
    usage = _run("only-one-arg")
    assert usage.returncode == 2 and "usage:" in usage.stderr
    cfg = tmp_path / "c.yaml"
    cfg.write_text("steps: 1\n")
    missing = _run(str(cfg), str(tmp_path / "o.json"), f"x={tmp_path / 'nope'}")
    assert missing.returncode == 2 and "x=" in missing.stderr and "config.json" in missing.stderr
    bad = tmp_path / "bad.yaml"
    bad.write_text("stepz: 1\n")
    wrong = _run(str(bad), str(tmp_path / "o.json"), f"a={CKPT}")
    assert wrong.returncode == 2 and "stepz" in wrong.stderr
    broken = tmp_path / "broken.json"
    broken.write_text("{not json")
    corrupt = _run(str(cfg), str(broken), f"a={CKPT}")
    assert corrupt.returncode == 2 and "broken.json" in corrupt.stderr and "JSON" in corrupt.stderr
    toy = tmp_path / "toy.yaml"
    toy.write_text("data:\n  source: toy\n")
    no_eval = _run(str(toy), str(tmp_path / "o.json"), f"a={CKPT}")
    assert no_eval.returncode == 2 and "held-out" in no_eval.stderr
    assert not (tmp_path / "o.json").exists()
