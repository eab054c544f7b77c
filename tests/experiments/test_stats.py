"""The paired two-level bootstrap (seeds, then tasks inside each seed) and the t-interval over seeds."""

from __future__ import annotations

import numpy as np
import pytest

from swe_rl.experiments.stats import (
    mean_t_interval,
    paired_two_level_bootstrap,
    sign_flip_p,
    small_seed_summary,
    t975,
)


def test_constant_difference_gives_a_zero_width_interval_at_that_value():
    r = paired_two_level_bootstrap(np.full((5, 40), 0.125), draws=2000)
    assert r["mean"] == pytest.approx(0.125)
    assert r["lo"] == pytest.approx(0.125) and r["hi"] == pytest.approx(0.125)
    assert r["seeds_only"] == pytest.approx({"lo": 0.125, "hi": 0.125})
    assert r["per_seed"] == pytest.approx([0.125] * 5)
    assert r["n_positive"] == 5 and (r["n_seeds"], r["n_tasks"], r["draws"]) == (5, 40, 2000)


def test_seed_means_symmetric_around_zero_give_an_interval_containing_zero():
    rng = np.random.default_rng(1)
    offsets = np.array([-0.3, -0.1, 0.1, 0.3])  # seed means symmetric around 0
    diff = offsets[:, None] + rng.choice([-0.5, 0.5], size=(4, 50))
    diff -= diff.mean(axis=1, keepdims=True) - offsets[:, None]  # exact seed means
    r = paired_two_level_bootstrap(diff, draws=4000)
    assert r["mean"] == pytest.approx(0.0, abs=1e-12)
    assert r["lo"] < 0.0 < r["hi"]
    assert r["seeds_only"]["lo"] < 0.0 < r["seeds_only"]["hi"]
    assert r["n_positive"] == 2


def test_interval_shrinks_with_more_seeds():
    rng = np.random.default_rng(2)
    big = 0.05 + rng.normal(0.0, 0.1, size=(40, 1)) + rng.normal(0.0, 0.3, size=(40, 30))
    widths = []
    for s in (4, 10, 40):
        r = paired_two_level_bootstrap(big[:s], draws=3000, seed=3)
        widths.append(r["hi"] - r["lo"])
    assert widths[0] > widths[1] > widths[2] > 0


def test_task_level_is_resampled():
    """Every seed has the same mean (0.2) but its tasks vary: the seeds-only interval has zero width; the
    two-level one does not (a bootstrap that ignored the task level would give zero width too)."""
    row = np.array([1.0, -0.6] * 10)  # mean 0.2
    diff = np.stack([np.random.default_rng(i).permutation(row) for i in range(6)])
    r = paired_two_level_bootstrap(diff, draws=3000)
    assert r["seeds_only"]["lo"] == pytest.approx(0.2) and r["seeds_only"]["hi"] == pytest.approx(0.2)
    assert r["hi"] - r["lo"] > 0.1
    assert r["lo"] < 0.2 < r["hi"]
    # and the two-level width matches its analytic size: sd of a mean of S*T task draws, ~ 0.8 / sqrt(120)
    sd = 0.8 / np.sqrt(120)
    assert (r["hi"] - r["lo"]) == pytest.approx(2 * 1.96 * sd, rel=0.15)


def test_deterministic_given_seed_and_sensitive_to_it():
    diff = np.random.default_rng(4).normal(0.1, 0.5, size=(6, 25))
    a = paired_two_level_bootstrap(diff, draws=1500, seed=7)
    assert paired_two_level_bootstrap(diff, draws=1500, seed=7) == a
    b = paired_two_level_bootstrap(diff, draws=1500, seed=8)
    assert (b["lo"], b["hi"]) != (a["lo"], a["hi"]) and b["mean"] == a["mean"]


def test_chunked_draws_cover_every_draw():
    """Large shapes are drawn in chunks; every draw must be filled (an unfilled np.empty would be garbage)."""
    diff = np.random.default_rng(5).normal(0.0, 1.0, size=(20, 300))  # chunk of 666 draws
    r = paired_two_level_bootstrap(diff, draws=2001)
    assert abs(r["lo"]) < 1.0 and abs(r["hi"]) < 1.0 and r["lo"] < r["mean"] < r["hi"]


@pytest.mark.parametrize(
    "bad", [np.zeros(5), np.zeros((0, 3)), np.zeros((3, 0)), np.zeros((2, 2, 2)), np.array([[0.0, np.nan]])]
)
def test_bad_input_names_the_shape(bad):
    with pytest.raises(ValueError, match=r"shape \("):
        paired_two_level_bootstrap(bad)


def test_bad_draws_or_level():
    with pytest.raises(ValueError, match="draws"):
        paired_two_level_bootstrap(np.zeros((2, 2)), draws=0)
    with pytest.raises(ValueError, match="level"):
        paired_two_level_bootstrap(np.zeros((2, 2)), level=1.0)


def test_t_interval():
    m, lo, hi = mean_t_interval([1.0, 2.0, 3.0])
    assert m == 2.0 and hi - m == pytest.approx(4.303 * 1.0 / np.sqrt(3), rel=1e-6) and m - lo == hi - m
    assert mean_t_interval([0.4]) == (0.4, 0.4, 0.4)
    assert t975(100) == 1.96
    with pytest.raises(ValueError, match="shape"):
        mean_t_interval([])


def test_sign_flip_known_answers():
    # all n values positive: only the observed pattern and its mirror reach |mean| -> p = 2 / 2^n
    assert sign_flip_p([0.3, 0.1, 0.2, 0.5, 0.4]) == pytest.approx(2 / 32)
    # [1, 2, 3]: sums of ±1, ±2, ±3 are ±6, ±4, ±2, ±0 (twice each for 0): |sum| >= 6 in 2 of 8 patterns
    assert sign_flip_p([1.0, 2.0, 3.0]) == pytest.approx(2 / 8)
    # [1, -1]: sums 0, 0, ±2 -> observed 0, every pattern reaches it
    assert sign_flip_p([1.0, -1.0]) == 1.0
    # ties are counted despite float rounding: [0.1, 0.2, -0.3] sums to ~5.5e-17, all patterns reach it
    assert sign_flip_p([0.1, 0.2, -0.3]) == 1.0


def test_sign_flip_matches_brute_force():
    import itertools

    x = np.random.default_rng(6).normal(0.05, 0.2, size=9)
    sums = [
        abs(sum(s * v for s, v in zip(signs, x, strict=True)))
        for signs in itertools.product((-1, 1), repeat=9)
    ]
    want = sum(t >= abs(x.sum()) - 1e-12 for t in sums) / 2**9
    assert sign_flip_p(x) == pytest.approx(want)


def test_small_seed_summary_of_the_follow_up_aem_difference():
    """The follow-up study's per-seed AEM − GRPO differences (docs/results/aem_outcome_reasoned_2026-12-01,
    points): the independent re-read's t-interval [−26.1, +3.8] and sign-flip p = 0.12, median ~0, 5 of 10 > 0."""
    d = [-0.50, -0.051, 0.005, -0.086, 0.003, 0.006, 0.017, -0.505, -0.003, 0.002]
    r = small_seed_summary(d)
    assert 100 * r["t95"][0] == pytest.approx(-26.1, abs=0.2) and 100 * r["t95"][1] == pytest.approx(
        3.8, abs=0.2
    )
    assert r["sign_flip_p"] == pytest.approx(0.12, abs=0.01)
    assert (r["n_positive"], r["n_negative"], r["n"]) == (5, 5, 10) and abs(r["median"]) < 0.001


def test_sign_flip_bad_input():
    with pytest.raises(ValueError, match="shape"):
        sign_flip_p([])
    with pytest.raises(ValueError, match="up to 20"):
        sign_flip_p(np.ones(21))
