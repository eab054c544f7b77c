"""A model path that is not a usable HF folder gets one clear line in every entry point (CLI from the repo root,
relative paths), not a transformers traceback."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from swe_rl.policy.model_dir import ModelPathError, check_model_dir

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def bad_dirs(tmp_path):
    """Relative paths (from the repo root) to: nothing, a folder without config.json, one without a tokenizer."""
    (tmp_path / "noconfig").mkdir()
    (tmp_path / "noconfig" / "model.safetensors").write_bytes(b"")
    (tmp_path / "notok").mkdir()
    (tmp_path / "notok" / "config.json").write_text("{}")
    (tmp_path / "notok" / "model.safetensors").write_bytes(b"")
    rel = os.path.relpath(tmp_path, ROOT)
    return {k: f"{rel}/{k}" for k in ("missing", "noconfig", "notok")}


def test_check_model_dir_cases(bad_dirs, tiny_tokenizer, tmp_path):
    os.chdir(ROOT)
    with pytest.raises(ModelPathError, match=r"^model.init='.*missing': no such folder"):
        check_model_dir(bad_dirs["missing"], "model.init")
    with pytest.raises(ModelPathError, match=r"no config.json"):
        check_model_dir(bad_dirs["noconfig"], "x")
    with pytest.raises(ModelPathError, match="no tokenizer in the folder"):
        check_model_dir(bad_dirs["notok"], "x")
    check_model_dir(bad_dirs["notok"], "x", tokenizer=False)  # config + weights are enough when asked so
    check_model_dir("Qwen/Qwen3-32B", "model.path")  # a hub id is transformers' to resolve
    with pytest.raises(ModelPathError, match="no such folder"):
        check_model_dir("Qwen/Qwen3-32B", "--model", local_only=True)
    tiny_tokenizer.save_pretrained(tmp_path / "tok")
    check_model_dir(tmp_path / "tok", "policy.tokenizer", weights=False)


CASES = [  # one entry point per kind of bad folder (each CLI start costs seconds); the unit test covers them all
    ("eval", ["eval", "-c", "configs/eval/micro.yaml", "policy.kind=hf", "policy.model={path}"], "noconfig",
     "policy.model=", "no config.json"),
    ("train", ["train", "-o", "model.init={path}", "-o", "steps=1"], "notok", "model.init=", "no tokenizer"),
    ("gateway", ["gateway", "--model", "{path}", "--port", "0"], "missing", "--model=", "no such folder"),
    ("train-openrlhf", ["train-openrlhf", "-c", "configs/train/qwen3_32b_deepswe_grpo_pp.yaml",
                        "-o", "model.path={path}", "--dry-run"], "notok", "model.path=", "no tokenizer"),
]  # fmt: skip


@pytest.mark.parametrize(
    ("entry", "argv", "which", "field", "reason"), CASES, ids=[f"{c[0]}-{c[2]}" for c in CASES]
)
def test_entry_points_say_one_line(bad_dirs, entry, argv, which, field, reason):
    path = bad_dirs[which]
    args = [a.replace("{path}", path) for a in argv]
    res = subprocess.run([sys.executable, "-m", "swe_rl.cli", *args], cwd=ROOT, capture_output=True, text=True,
                         timeout=300)  # fmt: skip
    lines = [ln for ln in (res.stdout + res.stderr).splitlines() if ln.strip()]
    assert res.returncode == 2 and len(lines) == 1, (res.returncode, lines[-20:])
    assert lines[0].startswith("error: ") and field in lines[0] and reason in lines[0], lines[0]
    assert path.rsplit("/", 1)[-1] in lines[0] and "Traceback" not in res.stderr
