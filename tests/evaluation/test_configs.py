"""Every shipped eval config validates, and the CLI turns a bad key into one clear error (exit 2)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from swe_rl.cli import app
from swe_rl.config import load_config
from swe_rl.evaluation.config import EvalConfig

ROOT = Path(__file__).resolve().parents[2]
SWE_RL = str(Path(sys.executable).with_name("swe-rl"))
CONFIGS = sorted((ROOT / "configs" / "eval").glob("*.yaml"))


@pytest.mark.parametrize("path", CONFIGS, ids=[p.stem for p in CONFIGS])
def test_eval_configs_validate(path):
    cfg = load_config(EvalConfig, files=[path])
    assert cfg.runs >= 1 and cfg.agent.max_steps >= 1


def test_deepswe_settings():
    cfg = load_config(EvalConfig, files=[p for p in CONFIGS if p.stem == "deepswe_swe_bench_verified"])
    assert (cfg.runs, cfg.agent.temperature, cfg.agent.max_steps, cfg.agent.max_context_tokens) == (
        16,
        1.0,
        100,
        65536,
    )


def test_cli_rejects_unknown_key_with_a_clear_message(tmp_path):
    res = CliRunner().invoke(app, ["eval", "--output-dir", str(tmp_path), "agent.max_stepz=3"])
    assert res.exit_code == 2
    assert "agent.max_stepz" in res.output and "max_steps" in res.output


def test_overrides_are_also_taken_as_dash_o_like_swe_rl_train(tmp_path):
    """`-o KEY=VALUE` as `swe-rl train` and `swe-rl demo` take them, after the positional ones; once it was
    "No such option: -o". The installed entry point, from the repository root, with the relative config path."""
    args = [SWE_RL, "eval", "-c", "configs/eval/micro.yaml", "--output-dir", str(tmp_path), "runs=2"]

    def run(*extra: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([*args, *extra], cwd=ROOT, capture_output=True, text=True, timeout=120)

    res = run("-o", "agent.max_stepz=3")
    assert res.returncode == 2 and "agent.max_stepz" in res.stderr and "max_steps" in res.stderr, res.stderr
    res = run("--override", "runs=0")  # the later value wins: runs=0 is refused
    assert res.returncode == 2 and "greater than or equal to 1" in res.stderr, res.stderr
    assert not any(tmp_path.iterdir()), "a refused config starts nothing"


def test_report_on_a_missing_run_dir_is_one_error(tmp_path):
    res = CliRunner().invoke(app, ["report", str(tmp_path / "nope")])
    assert res.exit_code == 2 and "no config.yaml" in res.output
    assert not (tmp_path / "nope").exists()
