"""Resolve-rate statistics against closed forms and brute-force combinatorics."""

from __future__ import annotations

import itertools
import math

import pytest
from hypothesis import given
from hypothesis import strategies as st

from swe_rl.evaluation.metrics import default_ks, mean_pass_at_k, pass_at_k, wilson_interval


def test_wilson_zero_successes_upper_bound_is_z2_over_n_plus_z2():
    lo, hi = wilson_interval(0, 10)
    z2 = 1.959963984540054**2
    assert lo == 0.0
    assert hi == pytest.approx(z2 / (10 + z2), rel=1e-12)


def test_wilson_symmetry_and_coverage_of_point_estimate():
    lo, hi = wilson_interval(7, 20)
    lo2, hi2 = wilson_interval(13, 20)
    assert lo == pytest.approx(1 - hi2) and hi == pytest.approx(1 - lo2)
    assert lo < 7 / 20 < hi
    assert wilson_interval(0, 0) == (0.0, 1.0)
    with pytest.raises(ValueError, match="successes"):
        wilson_interval(5, 3)


@given(n=st.integers(1, 9), data=st.data())
def test_pass_at_k_equals_fraction_of_k_subsets_with_a_success(n, data):
    c = data.draw(st.integers(0, n))
    k = data.draw(st.integers(1, n))
    samples = [True] * c + [False] * (n - c)
    subsets = list(itertools.combinations(range(n), k))
    brute = sum(any(samples[i] for i in s) for s in subsets) / len(subsets)
    assert pass_at_k(n, c, k) == pytest.approx(brute, abs=1e-12)
    assert pass_at_k(n, c, k) == pytest.approx(1 - math.comb(n - c, k) / math.comb(n, k), abs=1e-12)


def test_pass_at_1_is_the_success_fraction_and_bad_input_is_named():
    assert mean_pass_at_k([(16, 4), (16, 0), (16, 16)], 1) == pytest.approx((0.25 + 0 + 1) / 3)
    with pytest.raises(ValueError, match="k=5"):
        pass_at_k(4, 1, 5)
    assert default_ks(16) == [1, 2, 4, 8, 16]
    assert default_ks(3) == [1, 2, 3]
