"""Truncated importance sampling on the sampler/trainer ratio, and its OpenRLHF flags."""

from __future__ import annotations

import math
import os

import pytest
import torch

from swe_rl.algo.config import AlgoConfig
from swe_rl.algo.offpolicy import is_weights, openrlhf_is_flags
from swe_rl.algo.pipeline import compute_policy_loss

# ρ = exp(old − rollout) per token: 0.2, 1.0, 3.0, 8.0 on row 0; 1.1, 0.9, 1.0 (pad) on row 1
RHO = torch.tensor([[0.2, 1.0, 3.0, 8.0], [1.1, 0.9, 1.0, 1.0]])
OLD = torch.full((2, 4), -1.0)
ROLL = OLD - RHO.log()
MASK = torch.tensor([[1, 1, 1, 1], [1, 1, 0, 0]])


def test_clip_mask_and_seq_mask_weights():
    w, m = is_weights(OLD, ROLL, MASK, mode="clip", low=0.5, high=5.0)
    assert w[0].tolist() == pytest.approx([0.5, 1.0, 3.0, 5.0]) and w[1, :2].tolist() == pytest.approx(
        [1.1, 0.9]
    )
    assert m["is/changed_frac"] == pytest.approx(2 / 6)
    w, _ = is_weights(OLD, ROLL, MASK, mode="mask", low=0.5, high=5.0)
    assert w[0].tolist() == pytest.approx([0.0, 1.0, 3.0, 0.0])
    # seq_mask: row 0's geometric mean is (0.2·1·3·8)^(1/4) = 1.36 (kept whole), row 1's ~0.995
    w, _ = is_weights(OLD, ROLL, MASK, mode="seq_mask", low=0.5, high=1.2)
    assert w[0].tolist() == [0.0] * 4 and w[1, :2].tolist() == pytest.approx([1.1, 0.9])
    w, _ = is_weights(OLD, ROLL, MASK, mode="seq_mask", low=0.5, high=5.0)
    assert w[0].tolist() == pytest.approx(RHO[0].tolist())
    assert (w[1, 2:] == 1).all()  # off the mask the weight is 1 (the loss there is zero anyway)
    off, metrics = is_weights(OLD, ROLL, MASK, mode="off", low=0.5, high=5.0)
    assert (off == 1).all() and metrics == {}


def test_policy_loss_is_weighted_per_token():
    adv = torch.ones(2, 4)
    logp = OLD.clone().requires_grad_(True)
    on = AlgoConfig.model_validate({"off_policy": {"mode": "mask", "low": 0.5, "high": 5.0}})
    loss, metrics = compute_policy_loss(on, logp, OLD, adv, MASK, rollout_logp=ROLL)
    loss.backward()
    # token-mean over 6 tokens of −A·ρ_ppo·w with ρ_ppo = 1: the gradient on each token is −w/6
    assert logp.grad[0].tolist() == pytest.approx([0.0, -1 / 6, -3 / 6, 0.0])
    assert loss.item() == pytest.approx(-(1 + 3 + 1.1 + 0.9) / 6)
    assert "is/rho_mean" in metrics
    with pytest.raises(ValueError, match="rollout_logp"):
        compute_policy_loss(on, logp, OLD, adv, MASK)
    plain, _ = compute_policy_loss(AlgoConfig(), OLD, OLD, adv, MASK)
    assert plain.item() == pytest.approx(-1.0)


def test_openrlhf_flag_mapping():
    assert openrlhf_is_flags("off", 0.5, 5.0) == {"--algo.advantage.is_correction_level": "off"}
    f = openrlhf_is_flags("clip", 0.0, 2.0)
    assert f["--algo.advantage.is_correction_level"] == "token"
    assert f["--algo.advantage.is_correction_mode"] == "clip"
    assert f["--algo.advantage.is_correction_threshold"] == [0.0, 2.0]
    assert openrlhf_is_flags("seq_mask", 0.5, 5.0)["--algo.advantage.is_correction_level"] == "seq"
    with pytest.raises(ValueError):
        openrlhf_is_flags("icepop", 0.5, 5.0)


def test_flag_choices_match_upstream_parser():
    """The values we emit are among the choices OpenRLHF 0.11.2's own parser accepts (read from its source)."""
    import importlib.util
    import pathlib
    import re

    spec = importlib.util.find_spec("openrlhf")
    if spec is None or not spec.submodule_search_locations:
        msg = "openrlhf is not installed (make setup installs it with --no-deps)"
        pytest.fail(msg) if os.environ.get("CI") else pytest.skip(msg)  # CI installs it: never skip there
    src = (pathlib.Path(spec.submodule_search_locations[0]) / "cli" / "train_ppo_ray.py").read_text()
    for mode in ("clip", "mask", "seq_mask"):
        for flag, value in openrlhf_is_flags(mode, 0.5, 5.0).items():
            block = src[src.index(f'"{flag}"') :][:600]
            choices = re.search(r"choices=\[([^\]]*)\]", block)
            if choices is not None:
                assert f'"{value}"' in choices.group(1), (flag, value)
            else:
                assert "nargs" in block and isinstance(value, list) and not math.isnan(value[0])
