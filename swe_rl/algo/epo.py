"""EPO: Entropy-regularized Policy Optimization (arXiv 2509.22576 v2, §4 Eq. 2–6, Algorithm 1).

    L_H      = mean over trajectories of mean over turns of mean over the turn's tokens of H       (Eq. 2)
    H̄_W      = cumulative mean of the past batches' token-mean entropies (none at step 0)
    P        = relu(κ_l·H̄_W − H) + relu(H − κ_r·H̄_W)       per token, a hinge, so it carries gradient (Eq. 3)
    L_smooth = α_p · (same turn → trajectory → batch averaging of P)                              (Eq. 4)
    β_k      = 1 + exp(−γ·k / ⌊K/2⌋)                                                               (Eq. 5)
    L        = L_policy − λ·(L_H − β_k·L_smooth)                                                   (Eq. 6)
Token entropy here is the *current* policy's, with gradient (see entropy.token_entropy).
The released code's penalty is an indicator with no gradient; this is the paper's v2 hinge.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

import torch
from torch import Tensor

from swe_rl.algo.spans import SpanIndex, span_mean


def beta_k(step: int, total_steps: int, gamma: float = 3.0) -> float:
    """Phase weight β_k = 1 + exp(−γ·k/⌊K/2⌋): 2 at k = 0, decaying towards 1 + e^{−2γ} at k = K."""
    k_mid = total_steps // 2
    if k_mid < 1:
        raise ValueError(f"epo total_steps: expected >= 2 (K/2 is the decay scale), got {total_steps}")
    return 1.0 + math.exp(-gamma * step / k_mid)


def turn_traj_mean(token_values: Tensor, index: SpanIndex) -> Tensor:
    """Scalar: mean within each turn (span), then over a trajectory's turns, then over trajectories that have at
    least one turn. Differentiable in token_values (B, T); 0 when the batch has no span."""
    per_span = span_mean(token_values, index)  # (S,)
    if per_span.numel() == 0:
        return token_values.sum() * 0.0  # keeps the graph (and dtype/device) for an all-masked micro-batch
    b = index.num_rows
    per_traj = torch.zeros(b, dtype=per_span.dtype, device=per_span.device).index_add(0, index.traj, per_span)
    turns = torch.bincount(index.traj, minlength=b)  # (B,)
    has = turns > 0
    return (per_traj[has] / turns[has].to(per_span.dtype)).mean()


def epo_penalty(token_entropy: Tensor, reference: float, kappa_low: float, kappa_high: float) -> Tensor:
    """(B, T) hinge corridor penalty P around the historical reference entropy H̄_W."""
    low, high = kappa_low * reference, kappa_high * reference
    return torch.relu(low - token_entropy) + torch.relu(token_entropy - high)


def epo_regularizer(
    token_entropy: Tensor,
    index: SpanIndex,
    reference: float | None,
    *,
    step: int,
    total_steps: int,
    lam: float = 1e-3,
    kappa_low: float = 0.0,
    kappa_high: float = 2.0,
    gamma: float = 3.0,
    alpha: float = 0.1,
) -> tuple[Tensor, dict[str, float]]:
    """−λ·(L_H − β_k·L_smooth) as a scalar to add to the policy loss, and its pieces for logging.

    token_entropy (B, T) must carry gradient; `index` gives the turns (spans of the loss mask); `reference` is
    `EntropyHistory.reference()` (None at step 0 → no smoothing term)."""
    l_h = turn_traj_mean(token_entropy, index)
    beta = beta_k(step, total_steps, gamma)
    if reference is None:
        l_smooth = torch.zeros_like(l_h)
    else:
        penalty = epo_penalty(token_entropy, reference, kappa_low, kappa_high)
        l_smooth = alpha * turn_traj_mean(penalty, index)
    reg = -lam * (l_h - beta * l_smooth)
    metrics = {"entropy_traj_mean": l_h.item(), "smooth": l_smooth.item(), "beta": beta, "reg": reg.item()}
    if reference is not None:
        metrics["reference"] = reference
    return reg, metrics


@torch.no_grad()
def batch_token_mean(token_entropy: Tensor, loss_mask: Tensor) -> float:
    """Token-level mean entropy of a batch over its policy tokens (the value EPO appends to the history)."""
    m = (loss_mask != 0).to(torch.float64)
    return float((token_entropy.detach().to(torch.float64) * m).sum() / m.sum().clamp(min=1))


@dataclass
class EntropyHistory:
    """Window W_k of past batch token-mean entropies. Part of the trainer state: checkpoint it with
    state_dict() and restore it with load_state_dict() so H̄_W survives a resume."""

    values: list[float] = field(default_factory=list)  # H̄_0 … H̄_{k−1}, one per finished RL step

    def reference(self) -> float | None:
        """H̄_W = cumulative mean of the history (a deliberate choice in the paper, §5.4); None when empty."""
        return sum(self.values) / len(self.values) if self.values else None

    def append(self, batch_mean_entropy: float) -> None:
        """Record the current step's batch token-mean entropy, after the update (Algorithm 1, line 14)."""
        if not math.isfinite(batch_mean_entropy):
            raise ValueError(f"epo history: batch mean entropy must be finite, got {batch_mean_entropy}")
        self.values.append(float(batch_mean_entropy))

    def state_dict(self) -> dict[str, Any]:
        return {"values": list(self.values)}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        values = state.get("values")
        if not isinstance(values, list) or not all(isinstance(v, (int, float)) for v in values):
            raise ValueError(f"epo history state: expected {{'values': [float, ...]}}, got {state!r}")
        self.values = [float(v) for v in values]
