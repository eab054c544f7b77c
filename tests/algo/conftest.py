"""Shared helpers for the algo tests: naive per-span / per-group reference computations written as plain Python
loops (an independent second implementation to compare the vectorized code against)."""

from __future__ import annotations

import pytest
import torch


def naive_spans(mask: torch.Tensor) -> list[tuple[int, int, int, int]]:
    """[(row, turn, start, end_exclusive)] for every maximal run of 1s, row-major."""
    out = []
    for b, row in enumerate(mask.tolist()):
        turn, t = 0, 0
        while t < len(row):
            if row[t]:
                s = t
                while t < len(row) and row[t]:
                    t += 1
                out.append((b, turn, s, t))
                turn += 1
            else:
                t += 1
    return out


@pytest.fixture(scope="session")
def algo_naive_spans():
    return naive_spans
