"""Issue 16's fixes in swe_rl.algo: the stated reward spec, δ = 0, and AEM's own diagnostics."""

from __future__ import annotations

import pytest
import torch

from swe_rl.algo.aem import aem_coefficients, aem_diagnostics
from swe_rl.algo.config import AlgoConfig
from swe_rl.algo.pipeline import compute_advantages

# Two groups of four: group 0 has a format-error ending whose patch was graded as a success.
REWARDS = torch.tensor([1.0, 0.0, 1.0, 1.0, 1.0, 0.0, 0.0, float("nan")])
GROUPS = torch.tensor([0, 0, 0, 0, 1, 1, 1, 1])
EXITS = [
    "submitted",
    "submitted",
    "submitted",
    "format_errors",
    "submitted",
    "max_steps",
    "submitted",
    "error",
]
MASK = torch.ones(8, 6)


def _adv(spec: dict, **algo) -> tuple:
    cfg = AlgoConfig.model_validate({"reward": spec, **algo})
    res = compute_advantages(cfg, REWARDS, GROUPS, ~REWARDS.isnan(), MASK, None, EXITS)
    return res, res.token_advantages[:, 1]


def test_unsubmitted_episode_scores_zero_by_default():
    res, adv = _adv({})
    assert adv[3] < 0  # the format-error ending no longer counts as a success: it is pushed down
    assert adv[0] > 0 and adv[0] == adv[2]
    assert adv[5] < 0 < adv[4]  # the truncated episode scores 0 as well (reward was 0 already)
    assert adv[7] == 0 and (res.loss_mask[7] == 0).all()  # the infra failure stays invalid, never scored
    assert res.diagnostics["adv/unsubmitted_frac"] == pytest.approx(2 / 7)


def test_legacy_grading_rewards_the_format_error_ending():
    _, adv = _adv({"unsubmitted": "grade"})
    assert adv[3] > 0  # the flaw issue 16 describes: a format-error ending with a passing patch is rewarded


def test_masked_unsubmitted_episodes_stay_in_the_baseline_without_gradient():
    res, adv = _adv({"unsubmitted": "mask"})
    assert (res.loss_mask[[3, 5]] == 0).all() and adv[3] == 0 and adv[5] == 0
    # baseline of group 0 = rewards (1, 0, 1, 0): the submitted success gets the same A as with "zero"
    _, zero = _adv({})
    assert adv[0] == pytest.approx(float(zero[0]))


def test_reward_spec_needs_exit_statuses():
    cfg = AlgoConfig()
    with pytest.raises(ValueError, match="exit_reasons"):
        compute_advantages(cfg, REWARDS, GROUPS, ~REWARDS.isnan(), MASK)


def test_zero_range_rule_gives_alpha_one():
    h = torch.tensor([0.3, 0.3, 0.3, 0.2, 0.5, 0.8, 1.4])
    g = torch.tensor([0, 0, 0, 1, 1, 1, 1])
    a = aem_coefficients(h, g, min_range=0.0)
    assert torch.isfinite(a).all()  # was 0/0 = NaN in the zero-range group
    assert a[:3].tolist() == [1.0, 1.0, 1.0]
    assert a[3:].tolist() == pytest.approx([1.4528, 1.1315, 0.8812, 0.5345], abs=1e-4)
    d = aem_diagnostics(a, h, g, torch.ones(7), min_range=0.0)
    assert d["frac_groups_range_rule"] == 0.5


def test_zero_delta_through_the_pipeline_is_finite():
    ent = torch.full((8, 6), 0.25)  # every span has the same entropy: every group has zero range
    cfg = AlgoConfig.model_validate({"modulator": {"kind": "aem", "aem": {"min_range": 0.0}}})
    res = compute_advantages(cfg, REWARDS, GROUPS, ~REWARDS.isnan(), MASK, ent, EXITS)
    assert torch.isfinite(res.token_advantages).all()
    assert res.diagnostics["aem/frac_groups_range_rule"] == 1.0


def test_token_weighted_alpha_and_span_alpha():
    # rows 0-3: one long low-entropy span (α > 1) and one short high-entropy span (α < 1) each
    mask = torch.tensor([[0, 1, 1, 1, 1, 1, 0, 1]] * 4 + [[0, 1, 0, 0, 0, 0, 0, 0]] * 4)
    ent = torch.tensor([[0, 0.1, 0.1, 0.1, 0.1, 0.1, 0, 2.0]] * 4 + [[0, 0.5, 0, 0, 0, 0, 0, 0]] * 4)
    r = torch.tensor([1.0, 0.0, 1.0, 0.0, 1.0, 1.0, 1.0, 1.0])
    cfg = AlgoConfig.model_validate({"modulator": {"kind": "aem"}})
    res = compute_advantages(cfg, r, GROUPS, torch.ones(8, dtype=torch.bool), mask, ent, ["submitted"] * 8)
    a = res.span_alpha
    assert a is not None and a.shape == (12,)
    assert a[0] > 1 > a[1] and a[8:].tolist() == [1.0] * 4
    d = res.diagnostics
    lengths = torch.tensor([5, 1] * 4 + [1] * 4, dtype=torch.float64)
    assert d["aem/alpha_token_mean"] == pytest.approx(float((a.double() * lengths).sum() / lengths.sum()))
    assert d["aem/alpha_token_mean"] > d["aem/alpha_mean"]  # long confident spans weigh more per token
    assert d["aem/frac_groups_range_rule"] == 0.5
