"""Interval estimates for `swe-rl compare`: the paired two-level bootstrap of a per-seed, per-task difference, the
t-interval of a mean over seeds (no scipy: the t quantiles are tabulated) and the exact sign-flip permutation
test of paired per-seed differences. With ~10 seeds a percentile bootstrap is rough, above all for a skewed
difference (two seeds carrying it): `small_seed_summary` puts the t-interval and the permutation p beside it.

The outcome study (docs/results/outcome_study_design.md) pairs runs by seed: seed s of every arm starts from the
same checkpoint, trains on the same task sequence and is evaluated on the same held-out tasks. With
diff[s, t] = metric(method, s, t) - metric(baseline, s, t), the estimate is the mean over seeds of the per-seed
mean over tasks, and the interval resamples both sources of noise: seeds with replacement and, inside each
resampled seed, tasks with replacement (the held-out tasks are a sample too).
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

# 0.975 quantiles of Student's t with df = 1..30 (two-sided 95%); larger df use the normal quantile
_T975 = (12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306, 2.262, 2.228, 2.201, 2.179, 2.160, 2.145,
         2.131, 2.120, 2.110, 2.101, 2.093, 2.086, 2.080, 2.074, 2.069, 2.064, 2.060, 2.056, 2.052, 2.048,
         2.045, 2.042)  # fmt: skip


def t975(df: int) -> float:
    if df < 1:
        raise ValueError(f"t quantile: df must be >= 1, got {df}")
    return _T975[df - 1] if df <= len(_T975) else 1.960


def mean_t_interval(values: Any) -> tuple[float, float, float]:
    """(mean, lo, hi): the mean of `values` with its 95% t-interval (lo = hi = mean for a single value)."""
    x = np.asarray(values, dtype=float)
    if x.ndim != 1 or x.size == 0:
        raise ValueError(f"mean_t_interval: expected a non-empty 1-D array, got shape {x.shape}")
    m = float(x.mean())
    if x.size == 1:
        return m, m, m
    half = t975(x.size - 1) * float(x.std(ddof=1)) / math.sqrt(x.size)
    return m, m - half, m + half


def paired_two_level_bootstrap(
    diff: Any, draws: int = 10_000, seed: int = 0, level: float = 0.95
) -> dict[str, Any]:
    """Bootstrap of the mean paired difference `diff` (S seeds x T tasks).

    Each draw resamples S seeds with replacement and, independently inside each resampled seed, T tasks with
    replacement, and takes the mean of the resampled cells. Returns the point estimate (`mean`: mean over seeds of
    the per-seed task means), the percentile interval (`lo`, `hi`) at `level`, a seeds-only interval
    (`seeds_only`: tasks fixed, only seeds resampled), the per-seed means and how many of them are > 0.
    Deterministic given `seed`. NaN-free input only.
    """
    d = np.asarray(diff, dtype=float)
    if d.ndim != 2 or d.shape[0] < 1 or d.shape[1] < 1:
        raise ValueError(f"paired_two_level_bootstrap: expected diff of shape (seeds, tasks), got {d.shape}")
    if not np.isfinite(d).all():
        raise ValueError(f"paired_two_level_bootstrap: diff of shape {d.shape} has NaN or infinite values")
    if draws < 1:
        raise ValueError(f"paired_two_level_bootstrap: draws must be >= 1, got {draws}")
    if not 0.0 < level < 1.0:
        raise ValueError(f"paired_two_level_bootstrap: level must be in (0, 1), got {level}")
    n_seeds, n_tasks = d.shape
    per_seed = d.mean(axis=1)
    rng = np.random.default_rng(seed)

    # two-level: chunks of draws so that memory stays ~ a few million indices whatever the sizes
    chunk = max(1, min(draws, 4_000_000 // (n_seeds * n_tasks)))
    two_level = np.empty(draws)
    for start in range(0, draws, chunk):
        b = min(chunk, draws - start)
        rows = rng.integers(0, n_seeds, size=(b, n_seeds))  # resampled seeds
        cols = rng.integers(0, n_tasks, size=(b, n_seeds, n_tasks))  # resampled tasks inside each
        two_level[start : start + b] = d[rows[:, :, None], cols].mean(axis=(1, 2))
    seeds_only = per_seed[rng.integers(0, n_seeds, size=(draws, n_seeds))].mean(axis=1)

    q = ((1.0 - level) / 2.0, 1.0 - (1.0 - level) / 2.0)
    lo, hi = (float(v) for v in np.quantile(two_level, q))
    s_lo, s_hi = (float(v) for v in np.quantile(seeds_only, q))
    return {
        "mean": float(per_seed.mean()),
        "lo": lo,
        "hi": hi,
        "level": level,
        "draws": draws,
        "seed": seed,
        "n_seeds": n_seeds,
        "n_tasks": n_tasks,
        "seeds_only": {"lo": s_lo, "hi": s_hi},
        "per_seed": [float(v) for v in per_seed],
        "n_positive": int((per_seed > 0).sum()),
    }


MAX_EXACT_SEEDS = 20  # 2^20 sign patterns: exact enumeration stays ~1 s


def sign_flip_p(values: Any) -> float:
    """Exact two-sided p-value of the paired sign-flip (randomization) test of mean = 0: under the null each
    per-seed difference is as likely to have the other sign, so the p-value is the share of all 2^n sign
    patterns whose |mean| is at least the observed |mean| (the observed pattern included, so p >= 2^-n)."""
    x = np.asarray(values, dtype=float)
    if x.ndim != 1 or x.size == 0:
        raise ValueError(f"sign_flip_p: expected a non-empty 1-D array, got shape {x.shape}")
    if x.size > MAX_EXACT_SEEDS:
        raise ValueError(f"sign_flip_p: exact enumeration up to {MAX_EXACT_SEEDS} values, got {x.size}")
    n = x.size
    patterns = ((np.arange(2**n)[:, None] >> np.arange(n)) & 1) * 2 - 1  # (2^n, n) of ±1
    sums = np.abs(patterns @ x)
    observed = abs(float(x.sum()))
    # a relative tolerance so that ties (e.g. a pattern giving exactly the observed sum) count despite rounding
    return float((sums >= observed - 1e-12 * max(1.0, observed)).mean())


def small_seed_summary(per_seed: Any) -> dict[str, Any]:
    """Per-seed paired differences → mean, 95% t-interval, exact sign-flip p, median and sign counts."""
    x = np.asarray(per_seed, dtype=float)
    mean, lo, hi = mean_t_interval(x)
    return {
        "mean": mean,
        "t95": [lo, hi],
        "sign_flip_p": sign_flip_p(x),
        "median": float(np.median(x)),
        "n_positive": int((x > 0).sum()),
        "n_negative": int((x < 0).sum()),
        "n": int(x.size),
    }
