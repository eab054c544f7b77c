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


def naive_advantages(name, rewards, groups, valid, std="unbiased", eps=1e-6):
    """Per-group loop reference for grpo / dr_grpo / rloo with singleton groups → 0 and invalid → 0."""
    out = [0.0] * len(rewards)
    for g in set(groups):
        members = [i for i in range(len(rewards)) if groups[i] == g and valid[i]]
        n = len(members)
        rs = [rewards[i] for i in members]
        if n <= 1 or max(rs) == min(rs):
            continue
        mu = sum(rs) / n
        for i in members:
            if name == "grpo":
                var = sum((x - mu) ** 2 for x in rs) / (n - 1 if std == "unbiased" else n)
                out[i] = (rewards[i] - mu) / (var**0.5 + eps)
            elif name == "dr_grpo":
                out[i] = rewards[i] - mu
            else:
                out[i] = rewards[i] - (sum(rs) - rewards[i]) / (n - 1)
    return out


@pytest.fixture(scope="session")
def algo_naive_advantages():
    return naive_advantages
