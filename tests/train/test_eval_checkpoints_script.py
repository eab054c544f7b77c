"""scripts/eval_checkpoints.py answers bad input with one clear error (the evaluation itself is HeldOutEval's)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

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


@pytest.mark.docker
@pytest.mark.timeout(300)
def test_checkpoints_are_evaluated_with_their_episodes_kept(tmp_path):
    """As a user runs it from the repo root: a run's config (the demo's settings, 2 held-out tasks) and the
    shipped checkpoint; OUT.json gets its metrics, OUT_episodes/NAME.jsonl every episode, agreeing with them."""
    import yaml

    demo = yaml.safe_load((REPO / "configs" / "demo.yaml").read_text())["train"]
    demo["eval"] = {**demo.get("eval", {}), "n_tasks": 2, "sampled": 2}
    path = tmp_path / "config.yaml"
    path.write_text(yaml.safe_dump(demo))
    out = tmp_path / "out.json"
    proc = _run(str(path), str(out), f"s0={CKPT.relative_to(REPO)}")
    assert proc.returncode == 0, proc.stderr[-3000:]
    metrics = json.loads(out.read_text())["s0"]
    lines = [json.loads(x) for x in (tmp_path / "out_episodes" / "s0.jsonl").read_text().splitlines()]
    assert [(r["mode"], r["sample"]) for r in lines] == [("greedy", 0)] * 2 + [
        ("sampled", 0),
        ("sampled", 1),
    ] * 2
    for mode in ("greedy", "sampled"):
        rs = [r for r in lines if r["mode"] == mode]
        assert metrics[f"{mode}_success"] == pytest.approx(sum(bool(r["resolved"]) for r in rs) / len(rs))
        assert all(r["messages"] and (r["failure"] is None) == r["resolved"] for r in rs)
