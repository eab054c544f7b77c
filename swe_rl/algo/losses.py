"""Policy losses on (B, T) token tensors: PPO-clip (asymmetric, dual clip), GSPO and GSPO-token, aggregation,
KL estimators and the entropy bonus.

Masked positions go through `torch.where`, never `* mask` alone, so garbage log-probs on non-policy tokens
(padding, observations) cannot produce NaN and get exactly zero gradient. Log-ratios are clamped to [−20, 20]
before exp (verl); the GSPO sequence log-ratio is additionally capped at 10 (verl).
"""

from __future__ import annotations

import torch
from torch import Tensor

AGG_MODES = ("token-mean", "seq-mean-token-mean", "seq-mean-token-sum", "seq-mean-token-sum-norm")
LOSS_TYPES = ("ppo", "gspo", "gspo_token")
KL_ESTIMATORS = ("k1", "k3")
LOG_RATIO_CLAMP = 20.0
GSPO_LOG_RATIO_MAX = 10.0


def _masked(x: Tensor, m: Tensor) -> Tensor:
    return torch.where(m, x, torch.zeros_like(x))


def agg_loss(
    loss_tok: Tensor,
    loss_mask: Tensor,
    mode: str = "token-mean",
    *,
    norm_const: float | None = None,
    global_count: float | None = None,
) -> Tensor:
    """Reduce a (B, T) token loss to a scalar.

    token-mean: Σ / #tokens.  seq-mean-token-mean: mean over sequences of the per-sequence token mean.
    seq-mean-token-sum: mean over sequences of the per-sequence token sum (DeepSWE).  seq-mean-token-sum-norm:
    Σ / norm_const (Dr.GRPO; a constant, default T = the mask width; like verl, no division by #sequences).
    Fully masked sequences leave the sequence count. `global_count` replaces the #tokens / #sequences divisor
    when a mini-batch is split into micro-batches (pass the mini-batch's count to every micro-batch)."""
    m = loss_mask != 0
    x = _masked(loss_tok, m)
    if mode == "token-mean":
        denom = m.sum().clamp(min=1) if global_count is None else global_count
        return x.sum() / denom
    if mode == "seq-mean-token-sum-norm":
        return x.sum() / (float(loss_tok.shape[-1]) if norm_const is None else norm_const)
    if mode not in AGG_MODES:
        raise ValueError(f"loss agg mode: expected one of {AGG_MODES}, got {mode!r}")
    lengths = m.sum(-1)  # (B,)
    per_seq = x.sum(-1)
    if mode == "seq-mean-token-mean":
        per_seq = per_seq / lengths.clamp(min=1)
    n_seq = (lengths > 0).sum().clamp(min=1) if global_count is None else global_count
    return per_seq.sum() / n_seq


def _clipped_surrogate(
    ratio: Tensor, adv: Tensor, clip_low: float, clip_high: float
) -> tuple[Tensor, Tensor]:
    """max(−A·ρ, −A·clip(ρ, 1−ε_low, 1+ε_high)) and a bool 'the clipped branch was taken'."""
    l_unclipped = -adv * ratio
    l_clipped = -adv * ratio.clamp(1.0 - clip_low, 1.0 + clip_high)
    return torch.maximum(l_unclipped, l_clipped), l_clipped > l_unclipped


def ppo_token_loss(
    logp: Tensor, old_logp: Tensor, adv: Tensor, *, clip_low: float, clip_high: float, dual_clip: float | None
) -> tuple[Tensor, Tensor, Tensor]:
    """PPO-clip per token (B, T) with optional dual clip (for A < 0 the loss is capped at −c·A, c > 1).
    Returns (loss, ratio, clipped bool)."""
    ratio = torch.exp((logp - old_logp).clamp(-LOG_RATIO_CLAMP, LOG_RATIO_CLAMP))
    loss, clipped = _clipped_surrogate(ratio, adv, clip_low, clip_high)
    if dual_clip is not None:
        if dual_clip <= 1.0:
            raise ValueError(f"loss dual_clip: expected c > 1, got {dual_clip}")
        cap = -adv * dual_clip
        loss = torch.where((adv < 0) & (loss > cap), cap, loss)
    return loss, ratio, clipped


def _seq_log_ratio(logp: Tensor, old_logp: Tensor, m: Tensor) -> Tensor:
    """(B,) mean token log-ratio of each sequence (log of GSPO's geometric-mean ratio s_i)."""
    lr = _masked((logp - old_logp).clamp(-LOG_RATIO_CLAMP, LOG_RATIO_CLAMP), m)
    return lr.sum(-1) / m.sum(-1).clamp(min=1)


def gspo_token_loss(
    logp: Tensor, old_logp: Tensor, adv: Tensor, loss_mask: Tensor, *, clip_low: float, clip_high: float
) -> tuple[Tensor, Tensor, Tensor]:
    """GSPO (arXiv 2507.18071): s_i = exp(mean_t log-ratio), loss_i = max(−A_i·s_i, −A_i·clip(s_i)) with A_i
    the sequence's mean token advantage; the sequence loss is written on every policy token of the row.
    Returns (loss (B, T), ratio (B, T), clipped (B, T))."""
    m = loss_mask != 0
    log_s = _seq_log_ratio(logp, old_logp, m).clamp(max=GSPO_LOG_RATIO_MAX)
    a_seq = _masked(adv, m).sum(-1) / m.sum(-1).clamp(min=1)
    loss, clipped = _clipped_surrogate(torch.exp(log_s), a_seq, clip_low, clip_high)
    shape = logp.shape
    return (
        loss[:, None].expand(shape),
        torch.exp(log_s)[:, None].expand(shape),
        clipped[:, None].expand(shape),
    )


def gspo_per_token_loss(
    logp: Tensor, old_logp: Tensor, adv: Tensor, loss_mask: Tensor, *, clip_low: float, clip_high: float
) -> tuple[Tensor, Tensor, Tensor]:
    """GSPO-token: log s_{i,t} = sg[log s_i] + logπ_t − sg[logπ_t]; its value is s_i but the gradient flows per
    token, so span-varying advantages (AEM/EMPG in cumulative rows) are valid."""
    m = loss_mask != 0
    log_s = _seq_log_ratio(logp, old_logp, m).detach()
    log_r = (log_s[:, None] + logp - logp.detach()).clamp(max=GSPO_LOG_RATIO_MAX)
    ratio = torch.exp(log_r)
    loss, clipped = _clipped_surrogate(ratio, adv, clip_low, clip_high)
    return loss, ratio, clipped


def kl_penalty(logp: Tensor, ref_logp: Tensor, estimator: str = "k3") -> Tensor:
    """(B, T) per-token KL(π‖π_ref) estimate: k1 = logπ − logπ_ref; k3 = e^{δ} − δ − 1 with δ = logπ_ref − logπ,
    clamped to [−10, 10] (verl's low_var_kl)."""
    if estimator == "k1":
        return logp - ref_logp
    if estimator == "k3":
        delta = (ref_logp - logp).clamp(-LOG_RATIO_CLAMP, LOG_RATIO_CLAMP)
        return (torch.exp(delta) - delta - 1.0).clamp(-10.0, 10.0)
    raise ValueError(f"kl estimator: expected one of {KL_ESTIMATORS}, got {estimator!r}")


def policy_loss(
    loss_type: str,
    logp: Tensor,
    old_logp: Tensor,
    adv: Tensor,
    loss_mask: Tensor,
    *,
    clip_low: float = 0.2,
    clip_high: float = 0.28,
    dual_clip: float | None = None,
    agg: str = "token-mean",
    norm_const: float | None = None,
    global_count: float | None = None,
    token_weight: Tensor | None = None,
) -> tuple[Tensor, dict[str, float]]:
    """Aggregated policy-gradient loss and metrics (clip fraction, mean ratio, approx KL to the old policy).
    `token_weight` (B, T), a constant (e.g. truncated-IS weights), multiplies the token loss before aggregation."""
    if loss_type == "ppo":
        tok, ratio, clipped = ppo_token_loss(
            logp, old_logp, adv, clip_low=clip_low, clip_high=clip_high, dual_clip=dual_clip
        )
    elif loss_type == "gspo":
        tok, ratio, clipped = gspo_token_loss(
            logp, old_logp, adv, loss_mask, clip_low=clip_low, clip_high=clip_high
        )
    elif loss_type == "gspo_token":
        tok, ratio, clipped = gspo_per_token_loss(
            logp, old_logp, adv, loss_mask, clip_low=clip_low, clip_high=clip_high
        )
    else:
        raise ValueError(f"loss type: expected one of {LOSS_TYPES}, got {loss_type!r}")
    if token_weight is not None:
        tok = tok * token_weight.detach()
    loss = agg_loss(tok, loss_mask, agg, norm_const=norm_const, global_count=global_count)
    with torch.no_grad():
        m = loss_mask != 0
        n = m.sum().clamp(min=1)
        metrics = {
            "pg_loss": loss.item(),
            "clipfrac": (_masked(clipped.float(), m).sum() / n).item(),
            "ratio_mean": (_masked(ratio.float(), m).sum() / n).item(),
            "approx_kl_old": (_masked(kl_penalty(logp, old_logp, "k3").float(), m).sum() / n).item(),
        }
    return loss, metrics
