"""Foundation: light imports, config errors, the CLI entry points, tiny offline models."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from swe_rl.config import ConfigError, StrictModel, load_config


def _modules_after_import(stmt: str) -> set[str]:
    code = f"import sys; {stmt}; print('\\n'.join(sys.modules))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    return set(out.split())


@pytest.mark.parametrize("pkg", ["swe_rl", "sandboxes"])
def test_import_pulls_no_heavy_deps(pkg):
    mods = _modules_after_import(f"import {pkg}")
    heavy = {"ray", "vllm", "openrlhf", "deepspeed"} & {m.split(".")[0] for m in mods}
    assert not heavy, f"importing {pkg} imported {heavy}"


def test_sandboxes_does_not_import_torch_or_swe_rl():
    mods = {m.split(".")[0] for m in _modules_after_import("import sandboxes, sandboxes.base")}
    assert "torch" not in mods and "swe_rl" not in mods


class Inner(StrictModel):
    lam: float = 1.0
    min_range: float = 0.1


class Outer(StrictModel):
    name: str = "run"
    inner: Inner = Inner()


def test_config_merges_files_then_overrides(tmp_path):
    a = tmp_path / "a.yaml"
    b = tmp_path / "b.yaml"
    a.write_text(yaml.safe_dump({"name": "x", "inner": {"lam": 2.0}}))
    b.write_text(yaml.safe_dump({"inner": {"min_range": 0.3}}))
    cfg = load_config(Outer, files=[a, b], overrides=["inner.lam=0.5"])
    assert cfg == Outer(name="x", inner=Inner(lam=0.5, min_range=0.3))


def test_config_unknown_key_names_key_file_and_allowed(tmp_path):
    f = tmp_path / "bad.yaml"
    f.write_text(yaml.safe_dump({"inner": {"lamb": 2.0}}))
    with pytest.raises(ConfigError) as e:
        load_config(Outer, files=[f])
    msg = str(e.value)
    assert "inner.lamb" in msg and str(f) in msg and "lam, min_range" in msg


def test_config_bad_value_and_bad_override():
    with pytest.raises(ConfigError, match=r"inner\.lam"):
        load_config(Outer, overrides=["inner.lam=notanumber"])
    with pytest.raises(ConfigError, match="KEY=VALUE"):
        load_config(Outer, overrides=["inner.lam"])


@pytest.mark.parametrize("cmd", ["swe-rl", "sandboxes"])
def test_cli_help(cmd):
    exe = __import__("shutil").which(cmd) or str(__import__("pathlib").Path(sys.executable).parent / cmd)
    out = subprocess.run([exe, "--help"], capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    assert "Usage" in out.stdout


def test_tiny_model_chat_roundtrip(tiny_tokenizer, tiny_model):
    import torch

    msgs = [{"role": "system", "content": "tools"}, {"role": "user", "content": "fix 42"}]
    ids = tiny_tokenizer.apply_chat_template(msgs, add_generation_prompt=True, tokenize=False)
    assert ids.endswith("<|im_start|>assistant\n")
    enc = tiny_tokenizer(ids, add_special_tokens=False)["input_ids"]
    assert tiny_tokenizer.decode(enc) == ids
    with torch.no_grad():
        logits = tiny_model(torch.tensor([enc])).logits
    assert logits.shape == (1, len(enc), len(tiny_tokenizer))
    assert torch.isfinite(logits).all()


def test_train_backend_switch_dry_run():
    from typer.testing import CliRunner

    from swe_rl.cli import app

    runner = CliRunner()
    recipe = Path(__file__).resolve().parents[2] / "configs/train/qwen25_coder_7b_grpo_aem.yaml"
    out = runner.invoke(app, ["train", "--backend", "openrlhf", "-c", str(recipe), "--dry-run"])
    assert out.exit_code == 0, out.output
    assert (
        "openrlhf.cli.train_ppo_ray" in out.output and "--algo.advantage.estimator group_norm" in out.output
    )
    bad = runner.invoke(app, ["train", "--backend", "nope"])
    assert bad.exit_code != 0 and "builtin" in bad.output
