"""The demo starts from the checkpoint the package ships (a missing folder would silently mean SFT from scratch)."""

from __future__ import annotations

from swe_rl.config import load_config
from swe_rl.experiments.demo import SHIPPED_SFT, DemoConfig


def test_demo_config_points_at_the_shipped_checkpoint():
    cfg = load_config(DemoConfig, files=["configs/demo.yaml"])
    assert (SHIPPED_SFT / "config.json").is_file() and (SHIPPED_SFT / "tokenizer").is_dir(), SHIPPED_SFT
    assert cfg.init == str(SHIPPED_SFT)
