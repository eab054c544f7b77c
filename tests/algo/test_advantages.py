import math

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from swe_rl.algo.advantages import ESTIMATORS, compact_filter, dynamic_filter_keep, grpo, rloo

R = torch.tensor([1.0, 0.0, 0.0, 1.0])
G = torch.zeros(4, dtype=torch.long)


def test_grpo_std_conventions_hand_values():
    # μ = 0.5; unbiased σ = sqrt(1/3), population σ = 0.5
    s = 0.5 / math.sqrt(1 / 3)
    assert grpo(R, G, std="unbiased").tolist() == pytest.approx([s, -s, -s, s], abs=1e-5)
    assert grpo(R, G, std="population").tolist() == pytest.approx([1.0, -1.0, -1.0, 1.0], abs=1e-5)
    with pytest.raises(ValueError, match="std"):
        grpo(R, G, std="bessel")


def test_dr_grpo_and_rloo_hand_values():
    assert ESTIMATORS["dr_grpo"](R, G).tolist() == [0.5, -0.5, -0.5, 0.5]
    # leave-one-out: 1 − (0+0+1)/3 = 2/3
    assert rloo(R, G).tolist() == pytest.approx([2 / 3, -2 / 3, -2 / 3, 2 / 3])
    assert ESTIMATORS["loop"] is ESTIMATORS["rloo"]


@pytest.mark.parametrize("name", ["grpo", "dr_grpo", "rloo"])
def test_edge_cases(name):
    est = ESTIMATORS[name]
    # group 0: all equal 0.1 (float mean is not exactly 0.1); group 1: singleton; group 2: one invalid with NaN
    r = torch.tensor([0.1, 0.1, 0.1, 5.0, 1.0, 0.0, float("nan")])
    g = torch.tensor([0, 0, 0, 1, 2, 2, 2])
    v = torch.tensor([True] * 6 + [False])
    a = est(r, g, v)
    assert a[:3].tolist() == [0.0, 0.0, 0.0]  # exactly
    assert a[3].item() == 0.0 and a[6].item() == 0.0
    assert est(r, g, v, singleton="raw")[3].item() == pytest.approx(5.0, rel=1e-5)
    # the invalid member is left out: same as a group of two
    two = est(torch.tensor([1.0, 0.0]), torch.tensor([0, 0]))
    assert a[4:6].tolist() == pytest.approx(two.tolist())
    assert not torch.isnan(a).any()


groups_st = st.lists(
    st.tuples(st.integers(0, 4), st.sampled_from([0.0, 1.0, 0.5, -1.0, 2.5]), st.booleans()),
    min_size=1,
    max_size=24,
)


@settings(max_examples=40, deadline=None)
@given(groups_st, st.sampled_from(["grpo", "dr_grpo", "rloo"]), st.sampled_from(["unbiased", "population"]))
def test_matches_per_group_loop(algo_naive_advantages, rows, name, std):
    g = [r[0] for r in rows]
    r = [r[1] for r in rows]
    v = [r_[2] for r_ in rows]
    got = ESTIMATORS[name](torch.tensor(r), torch.tensor(g), torch.tensor(v), std=std)
    ref = algo_naive_advantages(name, r, g, v, std=std)
    assert got.tolist() == pytest.approx(ref, abs=1e-5)


def test_compact_filter_keeps_baseline_with_reward_zero():
    r = torch.tensor([1.0, 1.0, 0.0, 1.0])
    v = torch.tensor([True, True, True, False])  # the timed-out one had no reward at all
    mask = torch.ones(4, 3)
    reasons = ["submitted", "context_limit", "submitted", "timeout"]
    r2, v2, m2, hit = compact_filter(r, v, mask, reasons, {"context_limit", "timeout"})
    assert hit.tolist() == [False, True, False, True]
    assert r2.tolist() == [1.0, 0.0, 0.0, 0.0] and v2.all()
    assert m2.sum(1).tolist() == [3, 0, 3, 0]
    a = rloo(r2, torch.zeros(4, dtype=torch.long), v2)
    assert a[0].item() == pytest.approx(1.0 - 0.0)  # leave-one-out baseline sees three zeros
    with pytest.raises(ValueError, match="exit_reasons"):
        compact_filter(r, v, mask, ["submitted"], {"timeout"})


def test_dynamic_filter_keep():
    r = torch.tensor([1.0, 1.0, 1.0, 0.0, 1.0, 0.0, 7.0])
    g = torch.tensor([0, 0, 1, 1, 2, 2, 3])
    v = torch.tensor([True, True, True, True, True, False, True])
    # group 0 all solved, group 1 mixed, group 2 only one valid, group 3 singleton
    assert dynamic_filter_keep(r, g, v).tolist() == [False, False, True, True, False, False, False]
