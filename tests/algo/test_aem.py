import math

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from swe_rl.algo.aem import aem_coefficients, aem_diagnostics, aem_token_advantages, apply_aem, scope_labels
from swe_rl.algo.spans import span_index

WORKED = [1.4528, 1.1315, 0.8812, 0.5345]


def test_worked_vectors():
    h = torch.tensor([0.2, 0.5, 0.8, 1.4])
    g = torch.zeros(4, dtype=torch.long)
    assert aem_coefficients(h, g).tolist() == pytest.approx(WORKED, abs=1e-4)
    assert aem_coefficients(h, g, reverse=True).tolist() == pytest.approx(
        [0.6014, 0.7722, 0.9916, 1.6348], abs=1e-4
    )
    assert aem_coefficients(torch.tensor([0.50, 0.55, 0.58]), torch.zeros(3)).tolist() == [1.0, 1.0, 1.0]
    # both groups in one call, interleaved, with arbitrary labels
    h2 = torch.tensor([0.50, 0.2, 0.55, 0.5, 0.8, 0.58, 1.4])
    g2 = torch.tensor([7, -3, 7, -3, -3, 7, -3])
    a = aem_coefficients(h2, g2)
    assert a[[1, 3, 4, 6]].tolist() == pytest.approx(WORKED, abs=1e-4)
    assert a[[0, 2, 5]].tolist() == [1.0, 1.0, 1.0]


def test_singleton_and_invalid():
    h = torch.tensor([0.2, 0.5, 0.8, 1.4, 9.0, 3.0])
    g = torch.tensor([0, 0, 0, 0, 0, 1])
    valid = torch.tensor([True, True, True, True, False, True])
    a = aem_coefficients(h, g, valid)
    assert a[:4].tolist() == pytest.approx(WORKED, abs=1e-4)  # the invalid 9.0 is out of min/max/mean
    assert a[4].item() == 1.0 and a[5].item() == 1.0  # invalid → 1; singleton → range 0 → 1


def naive_alpha(h, g, v, lam, min_range):
    out = [1.0] * len(h)
    for grp in set(g):
        idx = [i for i in range(len(h)) if g[i] == grp and v[i]]
        if not idx:
            continue
        lo, hi = min(h[i] for i in idx), max(h[i] for i in idx)
        if hi - lo < min_range:
            continue
        w = {i: math.exp(-lam * (h[i] - lo) / (hi - lo)) for i in idx}
        mean = sum(w.values()) / len(idx)
        for i in idx:
            out[i] = w[i] / mean
    return out


spans_st = st.lists(st.tuples(st.integers(0, 40), st.integers(0, 3), st.booleans()), min_size=1, max_size=30)


@settings(max_examples=60, deadline=None)
@given(spans_st, st.floats(0.1, 3.0))
def test_properties(rows, lam):
    # entropies on a 0.07 grid: no range sits at the 0.1 threshold, so float rounding cannot flip the rule
    h = torch.tensor([r[0] * 0.07 for r in rows], dtype=torch.float64)
    g = torch.tensor([r[1] for r in rows])
    v = torch.tensor([r[2] for r in rows])
    a = aem_coefficients(h, g, v, lam=lam)
    assert a.tolist() == pytest.approx(naive_alpha(h.tolist(), g.tolist(), v.tolist(), lam, 0.1), abs=1e-9)
    assert (a[~v] == 1).all()  # invalid spans untouched
    assert (a > 0).all()  # sign of α·A = sign of A
    adv = torch.randn(len(rows), dtype=torch.float64)
    assert (torch.sign(a * adv) == torch.sign(adv)).all()
    for grp in g.unique():
        sel = (g == grp) & v
        if not sel.any():
            continue
        assert a[sel].mean().item() == pytest.approx(1.0, abs=1e-9)  # mean α = 1 per group
        hs, as_ = h[sel], a[sel]
        if hs.max() - hs.min() >= 0.1:  # strictly decreasing in H̄
            order = torch.argsort(hs)
            hs, as_ = hs[order], as_[order]
            strictly = hs[1:] > hs[:-1]
            assert (as_[1:][strictly] < as_[:-1][strictly]).all()
            assert (as_ >= math.exp(-lam) - 1e-9).all() and (as_ <= math.exp(lam) + 1e-9).all()
    # invariance to a per-group constant shift (also a multiple of the grid)
    shift = torch.tensor([3 * 0.07, 11 * 0.07, 0.0, 5 * 0.07], dtype=torch.float64)[g]
    assert aem_coefficients(h + shift, g, v, lam=lam).tolist() == pytest.approx(a.tolist(), abs=1e-9)
    # changing invalid spans' entropies changes nothing
    h_noise = torch.where(v, h, h + 17.0)
    assert aem_coefficients(h_noise, g, v, lam=lam).tolist() == a.tolist()


def test_scopes():
    g = torch.tensor([0, 0, 1, 1])
    traj = torch.tensor([0, 1, 2, 3])
    assert scope_labels("group", g, traj).tolist() == [0, 0, 1, 1]
    assert scope_labels("trajectory", g, traj).tolist() == [0, 1, 2, 3]
    assert scope_labels("batch", g, traj).tolist() == [0, 0, 0, 0]
    with pytest.raises(ValueError, match="scope"):
        scope_labels("task", g, traj)


def test_token_level_application_matches_a_span_loop():
    torch.manual_seed(0)
    mask = (torch.rand(6, 50) > 0.35).int()
    ent = torch.rand(6, 50) * 2
    idx = span_index(mask)
    row_group = torch.tensor([0, 0, 0, 1, 1, 1])
    row_adv = torch.tensor([1.0, -0.5, 0.3, -1.0, 2.0, 0.0])
    labels = idx.group(row_group)
    tok, alpha, h = aem_token_advantages(row_adv, ent, idx, labels)
    # reference: loop over spans with the naive per-span mean and alpha
    ids = idx.ids
    hs = [ent[ids == s].mean().item() for s in range(idx.num_spans)]
    ref_alpha = naive_alpha(hs, labels.tolist(), [True] * idx.num_spans, 1.0, 0.1)
    ref = torch.zeros(6, 50)
    for s in range(idx.num_spans):
        b = int(idx.traj[s])
        ref[ids == s] = row_adv[b] * ref_alpha[s]
    assert torch.allclose(tok, ref, atol=1e-5)
    assert torch.allclose(h, torch.tensor(hs), atol=1e-5)
    scaled, alpha2 = apply_aem(row_adv[:, None] * mask, ent, idx, labels)
    assert torch.allclose(scaled, ref, atol=1e-5) and torch.equal(alpha, alpha2)
    assert not alpha.requires_grad


def test_diagnostics_on_worked_vector():
    h = torch.tensor([0.2, 0.5, 0.8, 1.4, 0.50, 0.55, 0.58])
    g = torch.tensor([0, 0, 0, 0, 1, 1, 1])
    adv = torch.tensor([1.0, -1.0, 1.0, -1.0, 1.0, 1.0, 1.0])
    a = aem_coefficients(h, g)
    d = aem_diagnostics(a, h, g, adv)
    assert d["alpha_mean"] == pytest.approx(1.0, abs=1e-6)
    assert d["alpha_min"] == pytest.approx(0.5345, abs=1e-4) and d["alpha_max"] == pytest.approx(
        1.4528, abs=1e-4
    )
    assert d["frac_groups_range_rule"] == 0.5
    # A·(α−1) > 0 for spans 0 (+, α>1) and 3 (−, α<1); < 0 for spans 1 and 2
    assert d["entropy_amplified"] == pytest.approx((0.2 + 1.4) / 2, abs=1e-6)
    assert d["entropy_damped"] == pytest.approx((0.5 + 0.8) / 2, abs=1e-6)
    assert -1.0 <= d["corr_alpha_sign_adv"] <= 1.0
