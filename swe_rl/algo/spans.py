"""Response spans: a span = one agent turn = a maximal run of 1s in a row of the loss mask.

`span_index(loss_mask)` numbers every span of a (B, T) batch once (row-major, so spans are ordered by trajectory
then by turn) and gives the span → (row, turn index, length) maps. `span_sum` / `span_mean` reduce a token tensor
per span with one scatter-add, `broadcast` writes one value per span back onto the span's tokens with one gather.
No Python loop over spans or rows anywhere.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import Tensor


@dataclass(frozen=True)
class SpanIndex:
    """Span numbering of a (B, T) loss mask. S = number of spans in the whole batch."""

    bins: Tensor  # (B, T) int64: span id + 1 on span tokens, 0 off-span (a scatter/gather bin, 0 = the dump bin)
    traj: Tensor  # (S,) int64: row (trajectory) of each span
    turn: Tensor  # (S,) int64: 0-based turn index of the span inside its row
    length: Tensor  # (S,) int64: number of tokens of the span (>= 1 for mask-derived spans)
    num_rows: int  # B

    @property
    def num_spans(self) -> int:
        return int(self.traj.numel())

    @property
    def ids(self) -> Tensor:
        """(B, T) int64 span id, -1 off-span."""
        return self.bins - 1

    def group(self, row_group: Tensor) -> Tensor:
        """(S,) group id of each span, from a (B,) per-row group id."""
        return row_group.to(self.traj.device)[self.traj]

    def row_values(self, row_values: Tensor) -> Tensor:
        """(S,) per-span copy of a (B,) per-row value (e.g. the base advantage of the trajectory)."""
        return row_values[self.traj]


def span_index(loss_mask: Tensor) -> SpanIndex:
    """Number the spans of a (B, T) mask (bool, int or float; nonzero = policy token)."""
    if loss_mask.dim() != 2:
        raise ValueError(f"loss_mask: expected a (B, T) tensor, got shape {tuple(loss_mask.shape)}")
    m = loss_mask != 0  # (B, T) bool
    b, t = m.shape
    starts = m.clone()
    starts[:, 1:] &= ~m[:, :-1]  # a span starts where the mask turns on (or at column 0)
    # Global running count of starts = span id + 1 on every token after a start; zeroed off-span.
    bins = starts.view(-1).cumsum(0).view(b, t)
    bins.masked_fill_(~m, 0)
    traj = starts.nonzero()[:, 0]  # (S,) rows, row-major order matches the numbering above
    per_row = starts.sum(1)  # (B,)
    first_of_row = per_row.cumsum(0) - per_row  # (B,) global id of each row's first span
    num = int(traj.numel())
    turn = torch.arange(num, device=m.device) - first_of_row[traj]
    length = torch.bincount(bins.view(-1), minlength=num + 1)[1:]
    return SpanIndex(bins=bins, traj=traj, turn=turn, length=length, num_rows=b)


def span_sum(values: Tensor, index: SpanIndex, dtype: torch.dtype = torch.float32) -> Tensor:
    """(S,) sum of a (B, T) token tensor over each span's tokens, accumulated in `dtype`."""
    if values.shape != index.bins.shape:
        raise ValueError(f"values: expected shape {tuple(index.bins.shape)}, got {tuple(values.shape)}")
    out = torch.zeros(index.num_spans + 1, dtype=dtype, device=values.device)
    out.index_add_(0, index.bins.view(-1), values.reshape(-1).to(dtype))
    return out[1:]


def span_mean(values: Tensor, index: SpanIndex, dtype: torch.dtype = torch.float32) -> Tensor:
    """(S,) length-normalized mean of a (B, T) token tensor over each span (e.g. mean token entropy H̄)."""
    return span_sum(values, index, dtype) / index.length.clamp(min=1).to(dtype)


def broadcast(span_values: Tensor, index: SpanIndex, fill: float = 0.0) -> Tensor:
    """(B, T) tensor with each span's value on its tokens and `fill` off-span."""
    if span_values.shape != (index.num_spans,):
        raise ValueError(f"span_values: expected shape ({index.num_spans},), got {tuple(span_values.shape)}")
    padded = torch.cat([span_values.new_full((1,), fill), span_values])  # bin 0 = off-span
    return padded[index.bins]
