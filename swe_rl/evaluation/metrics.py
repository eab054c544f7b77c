"""Resolve-rate statistics: Wilson score interval, Pass@1 as a mean over runs, unbiased Pass@k."""

from __future__ import annotations

import math
from collections.abc import Sequence

Z95 = 1.959963984540054  # two-sided 95% normal quantile


def wilson_interval(successes: int, n: int, z: float = Z95) -> tuple[float, float]:
    """Wilson score interval for a binomial proportion; (0, 1) when n = 0 (nothing known).

    Chosen over the normal (Wald) interval because resolve rates sit near 0 or 1 on small suites, where Wald
    collapses to a zero-width or out-of-range interval.
    """
    if n <= 0:
        return (0.0, 1.0)
    if not 0 <= successes <= n:
        raise ValueError(f"successes={successes} must be within [0, n={n}]")
    p = successes / n
    denom = 1.0 + z * z / n
    center = (p + z * z / (2 * n)) / denom
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / denom
    return (max(0.0, center - half), min(1.0, center + half))


def pass_at_k(n: int, c: int, k: int) -> float:
    """Unbiased estimator of Pass@k from n samples with c correct (Chen et al. 2021): 1 − C(n−c, k)/C(n, k)."""
    if not 0 <= c <= n:
        raise ValueError(f"c={c} must be within [0, n={n}]")
    if not 1 <= k <= n:
        raise ValueError(f"k={k} must be within [1, n={n}]")
    if n - c < k:
        return 1.0
    # Product form avoids huge binomials: C(n−c, k)/C(n, k) = Π_{i=n−c+1..n} (1 − k/i).
    return 1.0 - math.prod(1.0 - k / i for i in range(n - c + 1, n + 1))


def mean_pass_at_k(samples: Sequence[tuple[int, int]], k: int) -> float:
    """Mean over instances of pass_at_k, each instance given as (n samples, c correct)."""
    if not samples:
        return 0.0
    return sum(pass_at_k(n, c, k) for n, c in samples) / len(samples)


def default_ks(n: int) -> list[int]:
    """Powers of two up to n, plus n itself: the usual Pass@k curve points."""
    ks = [k for k in (1, 2, 4, 8, 16, 32, 64) if k <= n]
    if n >= 1 and n not in ks:
        ks.append(n)
    return ks
