"""Vectorized per-group statistics over a 1-D tensor with arbitrary integer group labels.

Only members with `valid=True` enter the statistics; every reduction is one scatter op over (N,), so there is no
Python loop over groups. Used by the advantage estimators (groups = tasks), AEM (groups = tasks, trajectories or
the whole batch) and the DAPO filter.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import Tensor


@dataclass(frozen=True)
class GroupStats:
    """Statistics of the valid members of each group. G = number of distinct labels."""

    inverse: Tensor  # (N,) int64: dense group index 0..G-1 of each member
    count: Tensor  # (G,) number of valid members (float)
    mean: Tensor  # (G,) mean over valid members (0 for a group with none)
    sq_dev: Tensor  # (G,) sum of squared deviations from the mean over valid members
    vmax: Tensor  # (G,) max over valid members (-inf for a group with none)
    vmin: Tensor  # (G,) min over valid members (+inf for a group with none)

    @property
    def all_equal(self) -> Tensor:
        """(G,) True where the valid members are all equal (also for groups of 0 or 1 valid member)."""
        return ~(self.vmax > self.vmin)


def dense_labels(labels: Tensor) -> tuple[Tensor, int]:
    """Arbitrary integer labels (N,) -> dense indices 0..G-1 (N,) and G."""
    uniq, inverse = torch.unique(labels, return_inverse=True)
    return inverse, int(uniq.numel())


def group_stats(values: Tensor, labels: Tensor, valid: Tensor | None = None) -> GroupStats:
    """Per-group count/mean/squared deviation/max/min of `values` (N,) over the members with valid=True."""
    if values.dim() != 1 or labels.shape != values.shape:
        raise ValueError(
            f"values and labels: expected two (N,) tensors, got {tuple(values.shape)} and {tuple(labels.shape)}"
        )
    inverse, g = dense_labels(labels)
    ok = torch.ones_like(values, dtype=torch.bool) if valid is None else valid.to(torch.bool)
    if ok.shape != values.shape:
        raise ValueError(f"valid: expected shape {tuple(values.shape)}, got {tuple(ok.shape)}")
    okf = ok.to(values.dtype)
    vals = torch.where(ok, values, torch.zeros_like(values))  # NaN rewards of invalid members never leak
    count = torch.zeros(g, dtype=values.dtype, device=values.device).index_add_(0, inverse, okf)
    total = torch.zeros_like(count).index_add_(0, inverse, vals)
    mean = total / count.clamp(min=1)
    dev = (vals - mean[inverse]) * okf
    sq_dev = torch.zeros_like(count).index_add_(0, inverse, dev * dev)
    inf = torch.full_like(count, float("inf"))
    vmax = (-inf).scatter_reduce(0, inverse, torch.where(ok, vals, -torch.inf), "amax")
    vmin = inf.scatter_reduce(0, inverse, torch.where(ok, vals, torch.inf), "amin")
    return GroupStats(inverse=inverse, count=count, mean=mean, sq_dev=sq_dev, vmax=vmax, vmin=vmin)
