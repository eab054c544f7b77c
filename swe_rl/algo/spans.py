"""Response spans: a span = one agent turn = a maximal run of 1s in a row of the loss mask.

`span_index(loss_mask)` run-length encodes the flattened (B, T) mask once — runs alternate off-span / span and
never cross a row boundary — and numbers the spans row-major (so by trajectory, then by turn), with the span →
(row, turn index, length) maps. `span_sum` / `span_mean` reduce a token tensor per span with one segment-reduce
over the runs, `broadcast` writes one value per span back onto its tokens with one run-wise fill. No Python loop over
spans or rows, and no (B, T) integer id tensor unless `ids` is asked for.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import Tensor


@dataclass(frozen=True)
class SpanIndex:
    """Span numbering of a (B, T) loss mask. R = number of runs, S = number of spans in the whole batch."""

    run_start: Tensor  # (B·T,) bool: True where a run starts (flattened; every row starts one)
    run_lengths: Tensor  # (R,) int64: lengths of the runs covering the flattened mask in order (sum = B·T)
    run_span: Tensor  # (R,) int64: span id of each run, −1 for an off-span run
    traj: Tensor  # (S,) int64: row (trajectory) of each span
    turn: Tensor  # (S,) int64: 0-based turn index of the span inside its row
    length: Tensor  # (S,) int64: number of tokens of the span (>= 1)
    shape: tuple[int, int]  # (B, T)

    @property
    def num_spans(self) -> int:
        return int(self.traj.numel())

    @property
    def num_rows(self) -> int:
        return self.shape[0]

    @property
    def ids(self) -> Tensor:
        """(B, T) int64 span id, −1 off-span (materialized on demand)."""
        return broadcast(torch.arange(self.num_spans, device=self.traj.device), self, fill=-1)

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
    b, t = loss_mask.shape
    m = loss_mask.to(torch.bool).reshape(-1)  # nonzero = True; a cast is ~10x faster than `!= 0`
    n = m.numel()
    if n == 0:
        empty = torch.zeros(0, dtype=torch.long, device=m.device)
        return SpanIndex(m, empty, empty, empty, empty, empty, (b, t))
    change = torch.empty(n, dtype=torch.bool, device=m.device)
    torch.ne(m[1:], m[:-1], out=change[1:])
    change.view(b, t)[:, 0] = True  # every row starts a new run, so runs never cross rows
    starts = change.nonzero().view(-1)  # (R,) flat start of each run
    run_lengths = torch.diff(starts, append=starts.new_full((1,), n))
    on = m[starts]  # (R,) run is a span
    run_span = torch.where(on, on.cumsum(0) - 1, -1)
    span_start = starts[on]
    traj = span_start // t
    per_row = torch.bincount(traj, minlength=b)
    first_of_row = per_row.cumsum(0) - per_row  # (B,) global id of each row's first span
    turn = torch.arange(traj.numel(), device=m.device) - first_of_row[traj]
    return SpanIndex(change, run_lengths, run_span, traj, turn, run_lengths[on], (b, t))


def span_sum(values: Tensor, index: SpanIndex, dtype: torch.dtype = torch.float32) -> Tensor:
    """(S,) sum of a (B, T) token tensor over each span's tokens, accumulated in `dtype` (differentiable).
    Off-span values only enter off-span runs, so NaN on padding cannot leak into a span."""
    if tuple(values.shape) != index.shape:
        raise ValueError(f"values: expected shape {index.shape}, got {tuple(values.shape)}")
    if index.run_lengths.numel() == 0:
        return values.new_zeros(0, dtype=dtype)
    runs = torch.segment_reduce(values.reshape(-1).to(dtype), "sum", lengths=index.run_lengths)
    return runs[index.run_span >= 0]


def span_mean(values: Tensor, index: SpanIndex, dtype: torch.dtype = torch.float32) -> Tensor:
    """(S,) length-normalized mean of a (B, T) token tensor over each span (e.g. mean token entropy H̄)."""
    return span_sum(values, index, dtype) / index.length.to(dtype)


def subspan_mean(
    values: Tensor, index: SpanIndex, sub_mask: Tensor, dtype: torch.dtype = torch.float32
) -> Tensor:
    """(S,) mean of a (B, T) token tensor over the tokens of each span where `sub_mask` (B, T) is nonzero (e.g. a
    turn's action tokens); a span with no such token gets its whole-span mean (a turn without a marked part)."""
    if tuple(sub_mask.shape) != index.shape:
        raise ValueError(f"sub_mask: expected shape {index.shape}, got {tuple(sub_mask.shape)}")
    sub = sub_mask.to(torch.bool).to(dtype)
    n = span_sum(sub, index, dtype)
    part = span_sum(values.to(dtype) * sub, index, dtype) / n.clamp(min=1)
    return torch.where(n > 0, part, span_mean(values, index, dtype))


def broadcast(span_values: Tensor, index: SpanIndex, fill: float = 0.0) -> Tensor:
    """(B, T) tensor with each span's value on its tokens and `fill` off-span (differentiable)."""
    if span_values.shape != (index.num_spans,):
        raise ValueError(f"span_values: expected shape ({index.num_spans},), got {tuple(span_values.shape)}")
    fill_t = span_values.new_full((1,), fill)
    run_values = torch.cat([fill_t, span_values])[index.run_span + 1]  # (R,) value of every run
    n = index.run_start.numel()
    if not (torch.is_grad_enabled() and span_values.requires_grad) and n > 0:
        # Fast path (no autograd): the backward kernel of a segment sum *is* a run-wise fill: one write pass and
        # no (B·T) index tensor. For "sum" its `data` argument only gives the shape (an uninitialized buffer).
        # A private aten op (torch is pinned); the general path below is the fallback.
        try:
            out = torch.ops.aten._segment_reduce_backward(
                run_values, run_values, run_values.new_empty(n), "sum", lengths=index.run_lengths
            )
            return out.view(index.shape)
        except (AttributeError, RuntimeError, TypeError):
            pass
    # General path: slot of each token = running count of run starts (values behind a dummy slot 0), then gather.
    padded = torch.cat([fill_t, run_values])
    dtype = torch.int32 if n < 2**31 else torch.int64  # int32 halves the index traffic
    slot = torch.cumsum(index.run_start, 0, dtype=dtype)
    return padded.index_select(0, slot).view(index.shape)
