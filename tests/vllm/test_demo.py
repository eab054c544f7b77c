"""`swe-rl demo` with vLLM generating (the config override `train.rollout.engine=vllm`), shortened: 2 RL steps,
a small held-out evaluation, two micro-suite instances. Slow (an engine start plus the demo's phases)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]

pytestmark = [pytest.mark.vllm, pytest.mark.docker, pytest.mark.slow]


def test_demo_runs_with_the_vllm_engine(tmp_path):
    overrides = [
        f"out_dir={tmp_path}", "name=demo-vllm", "micro_limit=2", "train.rollout.engine=vllm",
        "train.steps=2", "train.save_every=2", "train.rollout.tasks_per_step=4", "train.rollout.n_samples=4",
        "train.rollout.slots=8", "train.eval.every=0", "train.eval.n_tasks=8", "train.eval.sampled=0",
    ]  # fmt: skip
    exe = str(Path(sys.executable).parent / "swe-rl")
    args = [a for o in overrides for a in ("-o", o)]
    res = subprocess.run([exe, "demo", *args], cwd=REPO, capture_output=True, text=True, timeout=2400)
    assert res.returncode == 0, res.stdout[-3000:] + res.stderr[-3000:]
    rows = [json.loads(x) for x in (tmp_path / "demo-vllm" / "rl" / "metrics.jsonl").read_text().splitlines()]
    steps = [r for r in rows if "rollout_lp_gap" in r]
    assert [r["step"] for r in steps] == [1, 2]
    assert all(r["rollout_lp_gap"] < 2e-3 for r in steps)  # vLLM sampled what the trainer scores
    assert steps[1]["cost/weight_syncs"] == 1  # step 1's update reached the engine before step 2's rollouts
    assert (tmp_path / "demo-vllm" / "report" / "report.md").is_file()
