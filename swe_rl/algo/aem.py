"""AEM: Adaptive Entropy Modulation (arXiv 2605.00425) — a per-span multiplier α on the base advantage.

For each group of spans (default: all valid spans of the n trajectories of one task), with H̄ the span's mean
token entropy (nats, old policy, rollout temperature):
    range = max H̄ − min H̄;  if range < min_range (0.1) or range = 0:  α = 1 for the whole group
    else  H̃ = (H̄ − min) / range,  w = exp(−λ·H̃),  α = w / mean_group(w)   (unweighted mean over spans → mean α = 1)
A_AEM = α · A_base on every token of the span. α is computed once per batch under no_grad (a constant frozen for
all PPO epochs / mini-batches). Invalid spans (empty, invalid or compact-filtered trajectories) are left out of
the statistics and get α = 1. `reverse=True` is the paper's ablation w = exp(+λ·H̃).

Span choice: H̄ over the whole turn (`response`, the paper's) or, given an `action_mask` (B, T) that
marks each turn's action tokens (the tool call after any reasoning), over those tokens only (`action`); a turn
with no marked token falls back to its whole-turn mean.
"""

from __future__ import annotations

import torch
from torch import Tensor

from swe_rl.algo.groups import GroupStats, group_stats
from swe_rl.algo.spans import SpanIndex, broadcast, span_mean, subspan_mean

SCOPES = ("group", "trajectory", "batch")
ENTROPY_SPANS = ("response", "action")


def span_entropy(token_entropy: Tensor, index: SpanIndex, action_mask: Tensor | None = None) -> Tensor:
    """(S,) H̄ per span: the mean over the whole turn, or over its action tokens when `action_mask` is given."""
    if action_mask is None:
        return span_mean(token_entropy, index)
    return subspan_mean(token_entropy, index, action_mask)


def _valid_mask(span_entropy: Tensor, span_valid: Tensor | None) -> Tensor:
    if span_entropy.dim() != 1:
        raise ValueError(f"span_entropy: expected a (S,) tensor, got shape {tuple(span_entropy.shape)}")
    if span_valid is None:
        return torch.ones_like(span_entropy, dtype=torch.bool)
    if span_valid.shape != span_entropy.shape:
        raise ValueError(
            f"span_valid: expected shape {tuple(span_entropy.shape)}, got {tuple(span_valid.shape)}"
        )
    return span_valid.to(torch.bool)


def _alpha(
    h: Tensor, ok: Tensor, st: GroupStats, lam: float, min_range: float, reverse: bool
) -> tuple[Tensor, Tensor]:
    """α (S,) float64 and the (G,) bool 'group is modulated' (range ≥ min_range) from group stats of H̄."""
    rng = st.vmax - st.vmin  # (G,) -inf for a group without valid spans
    active = (rng >= min_range) & (
        rng > 0
    )  # a zero-range group has nothing to normalize: α = 1 even at δ = 0
    on = ok & active[st.inverse]  # (S,) spans that get a modulated α
    ht = torch.where(on, (h - st.vmin[st.inverse]) / torch.where(on, rng[st.inverse], 1.0), 0.0)
    w = torch.exp(lam * ht if reverse else -lam * ht)
    w_sum = torch.zeros_like(st.count).index_add_(0, st.inverse, torch.where(on, w, 0.0))
    mean_w = w_sum / st.count.clamp(min=1)
    alpha = torch.where(on, w / mean_w[st.inverse], torch.ones_like(w))
    return alpha, active


@torch.no_grad()
def aem_coefficients(
    span_entropy: Tensor,
    span_group: Tensor,
    span_valid: Tensor | None = None,
    *,
    lam: float = 1.0,
    min_range: float = 0.1,
    reverse: bool = False,
) -> Tensor:
    """α (S,) for spans with mean entropy `span_entropy` (S,), group labels `span_group` (S,) and an optional
    validity mask (S,). Returned in span_entropy's dtype, detached."""
    ok = _valid_mask(span_entropy, span_valid)
    h = span_entropy.detach().to(torch.float64)
    st = group_stats(h, span_group.to(h.device), ok)
    alpha, _ = _alpha(h, ok, st, lam, min_range, reverse)
    return alpha.to(span_entropy.dtype)


def scope_labels(scope: str, span_group: Tensor, span_traj: Tensor) -> Tensor:
    """(S,) normalization labels for AEM's scopes: task group (default), one trajectory, or the whole batch."""
    if scope == "group":
        return span_group
    if scope == "trajectory":
        return span_traj
    if scope == "batch":
        return torch.zeros_like(span_group)
    raise ValueError(f"aem scope: expected one of {SCOPES}, got {scope!r}")


@torch.no_grad()
def aem_diagnostics(
    alpha: Tensor,
    span_entropy: Tensor,
    span_group: Tensor,
    span_adv: Tensor,
    span_valid: Tensor | None = None,
    *,
    min_range: float = 0.1,
    span_length: Tensor | None = None,
) -> dict[str, float]:
    """Logging: α mean/min/max/std over valid spans, the token-weighted mean α (with `span_length` (S,)),
    fraction of groups under the range rule (α = 1), Pearson correlation of α with sign(A), mean H̄ of spans with
    A·(α−1) > 0 vs < 0 (a key is absent when its set is empty)."""
    ok = _valid_mask(span_entropy, span_valid)
    out: dict[str, float] = {"num_spans": float(ok.sum())}
    if not bool(ok.any()):
        return out
    a, h, adv = alpha[ok].double(), span_entropy[ok].double(), span_adv[ok].double()
    out |= {"alpha_mean": a.mean().item(), "alpha_min": a.min().item(), "alpha_max": a.max().item()}
    out["alpha_std"] = a.std(unbiased=False).item()
    if span_length is not None:  # α seen by the loss: token-mean aggregation weights a span by its length
        n = span_length[ok].double()
        out["alpha_token_mean"] = (a * n).sum().div(n.sum().clamp(min=1)).item()
    st = group_stats(h, span_group[ok].to(h.device))
    rng = st.vmax - st.vmin
    out["frac_groups_range_rule"] = ((rng < min_range) | (rng <= 0)).double().mean().item()
    sgn = torch.sign(adv)
    a_c, s_c = a - a.mean(), sgn - sgn.mean()
    denom = (a_c.square().sum() * s_c.square().sum()).sqrt()
    out["corr_alpha_sign_adv"] = (a_c * s_c).sum().div(denom).item() if denom > 0 else 0.0
    push = adv * (a - 1)
    for name, sel in (("entropy_amplified", push > 0), ("entropy_damped", push < 0)):
        if bool(sel.any()):
            out[name] = h[sel].mean().item()
    return out


@torch.no_grad()
def aem_token_advantages(
    row_adv: Tensor,
    token_entropy: Tensor,
    index: SpanIndex,
    span_labels: Tensor,
    span_valid: Tensor | None = None,
    *,
    lam: float = 1.0,
    min_range: float = 0.1,
    reverse: bool = False,
    action_mask: Tensor | None = None,
) -> tuple[Tensor, Tensor, Tensor]:
    """Per-row base advantages (B,) → AEM token advantages (B, T), 0 off-span, in one gather.

    Returns (token_adv (B, T), alpha (S,), span_entropy (S,)). `span_labels` (S,) picks the scope (see
    `scope_labels`); invalid spans keep α = 1. With `action_mask` (B, T), H̄ is the action span's (`span_entropy`)."""
    h = span_entropy(token_entropy, index, action_mask)
    alpha = aem_coefficients(h, span_labels, span_valid, lam=lam, min_range=min_range, reverse=reverse)
    span_adv = index.row_values(row_adv.to(alpha.dtype)) * alpha
    return broadcast(span_adv, index), alpha, h


@torch.no_grad()
def apply_aem(
    token_adv: Tensor,
    token_entropy: Tensor,
    index: SpanIndex,
    span_labels: Tensor,
    span_valid: Tensor | None = None,
    *,
    lam: float = 1.0,
    min_range: float = 0.1,
    reverse: bool = False,
    action_mask: Tensor | None = None,
) -> tuple[Tensor, Tensor]:
    """Scale an existing (B, T) token-advantage tensor by each span's α (tokens off-span are unchanged).
    Returns (token_adv · α (B, T), alpha (S,)). With `action_mask` (B, T), H̄ is the action span's."""
    h = span_entropy(token_entropy, index, action_mask)
    alpha = aem_coefficients(h, span_labels, span_valid, lam=lam, min_range=min_range, reverse=reverse)
    return token_adv * broadcast(alpha.to(token_adv.dtype), index, fill=1.0), alpha
