"""The README's evaluation commands typed as a user types them: `.venv/bin/swe-rl ...` started in the repository
root, with relative paths and the default output folder (runs/<name>), real Docker, the bundled micro suite.

Library-level tests hand absolute tmp paths to the harness, which hid the bug of issue 15: `--grader official`
gave swebench's subprocess (cwd = its own work folder) paths relative to ours.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import uuid
from pathlib import Path

import pytest

pytestmark = pytest.mark.docker

REPO = Path(__file__).resolve().parents[2]
SWE_RL = Path(sys.executable).parent / "swe-rl"
INSTANCE = "swe-rl-micro__confini-1"


@pytest.fixture
def run_name():
    """A fresh run name under the repository's runs/; its folders (and runs/ if this test made it) are removed."""
    runs = REPO / "runs"
    made_runs = not runs.exists()
    name = f"test-cli-{uuid.uuid4().hex[:8]}"
    yield name
    for d in runs.glob(f"{name}*"):
        shutil.rmtree(d, ignore_errors=True)
    if made_runs and runs.is_dir() and not any(runs.iterdir()):
        runs.rmdir()


def swe_rl(*args: str, timeout: float = 600) -> subprocess.CompletedProcess[str]:
    proc = subprocess.run([str(SWE_RL), *args], cwd=REPO, capture_output=True, text=True, timeout=timeout)
    assert proc.returncode == 0, f"swe-rl {' '.join(args)}: exit {proc.returncode}\n{proc.stderr[-3000:]}"
    return proc


def test_eval_official_grader_then_report_and_grade_with_relative_paths(run_name, eval_containers):
    # eval/README.md: `swe-rl eval -c configs/eval/micro.yaml` (+ `--grader official`, `-i`), default runs/.
    out = swe_rl(
        "eval", "-c", "configs/eval/micro.yaml", "--grader", "official", "-i", INSTANCE, "--name", run_name
    )
    assert "resolve rate 100.0%" in out.stdout, out.stdout
    # the grading phase (swebench's output is captured) says what it did
    assert "official grader: run 00: 1/1 resolved" in out.stderr, out.stderr
    run = REPO / "runs" / run_name
    record = json.loads((run / "grading" / "run_00" / f"{INSTANCE}.json").read_text())
    assert record["grader"] == "official" and record["resolved"] and record["failure"] is None
    assert (run / "grading" / "official_run_00" / "predictions.jsonl").is_file()
    assert eval_containers(run_name) == []

    # `swe-rl report runs/<name>` rebuilds the same report from the relative run directory.
    before = json.loads((run / "report" / "report.json").read_text())
    swe_rl("report", f"runs/{run_name}")
    assert json.loads((run / "report" / "report.json").read_text()) == before

    # `swe-rl grade` on the run's predictions file, relative --predictions and --out.
    graded = swe_rl(
        "grade", "--tasks", "micro", "--predictions", f"runs/{run_name}/predictions/run_00.jsonl",
        "--out", f"runs/{run_name}-grade", "--id", INSTANCE,
    )  # fmt: skip
    assert "resolved 1/1" in graded.stdout, graded.stdout
    summary = json.loads((REPO / "runs" / f"{run_name}-grade" / "summary.json").read_text())
    assert summary["resolved_ids"] == [INSTANCE]


@pytest.mark.ray
def test_eval_of_generated_held_out_tasks_from_a_jsonl_file(run_name, eval_containers):
    # eval/README.md: `swe-rl tasks generate ... -o FILE` then `swe-rl eval --dataset FILE`. A generated task's repo
    # lives in its metadata (no image holds it): the episode's sandbox must get it before the agent starts.
    data = f"runs/{run_name}-data/heldout.jsonl"
    swe_rl("tasks", "generate", "-n", "2", "--split", "held_out", "--seed", "3", "-o", data)
    out = swe_rl("eval", "-c", "configs/eval/micro.yaml", "--dataset", data, "--name", run_name)
    assert "resolve rate 100.0%" in out.stdout and "infra failure 0" in out.stdout, out.stdout
    report = json.loads((REPO / "runs" / run_name / "report" / "report.json").read_text())
    assert report["episodes"] == 2 and report["counts"]["infra_failure"] == 0, report["counts"]
    assert eval_containers(run_name) == []
