"""Off-policy correction for the sampler/trainer mismatch: truncated importance sampling on ρ = π_old / π_sampler.

The rollout engine (vLLM, or HF generate in another precision) and the trainer's old-policy forward give slightly
different probabilities for the same sampled token, so the PPO ratio π/π_old is measured against a distribution
that did not sample the data. Per policy token, ρ = exp(old_logp − rollout_logp) (detached) reweights the token
loss (Yao et al., "Your efficient RL framework secretly brings you off-policy RL training", 2025):

    clip      w = clamp(ρ, low, high)                     TIS (verl: upper bound C only → low = 0)
    mask      w = ρ if low ≤ ρ ≤ high else 0              token-level masking (ICEPOP-style)
    seq_mask  w = ρ if low ≤ exp(mean_t log ρ) ≤ high     the sequence's geometric-mean ρ gates the whole row
              else 0

One signature: `is_weights(old_logp, rollout_logp, loss_mask, mode=, low=, high=) -> (w (B, T), metrics)`.
The weights multiply the per-token policy loss before aggregation; the loss divisor is unchanged.
"""

from __future__ import annotations

from typing import Any

import torch
from torch import Tensor

IS_MODES = ("off", "clip", "mask", "seq_mask")
_LOG_CLAMP = 20.0


@torch.no_grad()
def is_weights(
    old_logp: Tensor, rollout_logp: Tensor, loss_mask: Tensor, *, mode: str, low: float, high: float
) -> tuple[Tensor, dict[str, float]]:
    """(B, T) float32 weights (1 off the mask and when mode = off) and metrics (mean ρ, share of tokens whose
    weight was changed by the band: clipped or dropped)."""
    if mode not in IS_MODES:
        raise ValueError(f"off_policy mode: expected one of {IS_MODES}, got {mode!r}")
    if old_logp.shape != rollout_logp.shape or old_logp.shape != loss_mask.shape:
        raise ValueError(
            f"old_logp, rollout_logp, loss_mask: expected one (B, T) shape, got {tuple(old_logp.shape)}, "
            f"{tuple(rollout_logp.shape)}, {tuple(loss_mask.shape)}"
        )
    m = loss_mask != 0
    one = torch.ones_like(old_logp, dtype=torch.float32)
    if mode == "off":
        return one, {}
    log_rho = torch.where(m, (old_logp - rollout_logp).float(), 0.0).clamp(-_LOG_CLAMP, _LOG_CLAMP)
    rho = log_rho.exp()
    if mode == "clip":
        w = rho.clamp(low, high)
        changed = (rho < low) | (rho > high)
    else:
        if mode == "mask":
            gate = rho
        else:  # seq_mask: the geometric mean of ρ over the row's policy tokens decides for the whole row
            gate = (log_rho.sum(-1) / m.sum(-1).clamp(min=1)).exp()[:, None].expand_as(rho)
        inside = (gate >= low) & (gate <= high)
        w = torch.where(inside, rho, 0.0)
        changed = ~inside
    w = torch.where(m, w, one)
    n = m.sum().clamp(min=1)
    metrics: dict[str, Any] = {
        "is/rho_mean": float(torch.where(m, rho, 0.0).sum() / n),
        "is/changed_frac": float((changed & m).sum() / n),
        "is/weight_mean": float(torch.where(m, w, 0.0).sum() / n),
    }
    return w, metrics


def openrlhf_is_flags(mode: str, low: float, high: float) -> dict[str, Any]:
    """The same correction as OpenRLHF 0.11.2's `--algo.advantage.is_correction_*` flags (ratio gating; its
    mask mode, like ours, keeps the per-token ρ of the tokens that survive)."""
    if mode not in IS_MODES:
        raise ValueError(f"off_policy mode: expected one of {IS_MODES}, got {mode!r}")
    if mode == "off":
        return {"--algo.advantage.is_correction_level": "off"}
    level, how = {"clip": ("token", "clip"), "mask": ("token", "mask"), "seq_mask": ("seq", "mask")}[mode]
    return {
        "--algo.advantage.is_correction_level": level,
        "--algo.advantage.is_correction_mode": how,
        "--algo.advantage.is_correction_gating": "ratio",
        "--algo.advantage.is_correction_threshold": [low, high],
    }
