"""EMPG: Entropy-Modulated Policy Gradients (arXiv 2509.09265, Eq. 7–13 of v1) at the step (= span) level.

H̃ = (H − min_B H) / (max_B H − min_B H + 1e-8)           batch-wide over all valid steps (not per group)
g_t = exp(−k·H̃_t) / (mean_B exp(−k·H̃) + 1e-8)           self-calibrating scale, batch mean ≈ 1
f_t = exp(−k'·H̃_{t+1})  (next step of the same trajectory; 0 for its last step)
A_mod = A·g_t + ζ·f_t;   A_final = A_mod − mean_B(A_mod)  (mean over valid steps; no std division)
"""

from __future__ import annotations

import torch
from torch import Tensor

EPS = 1e-8


def next_step_index(span_traj: Tensor, span_turn: Tensor, span_valid: Tensor) -> Tensor:
    """(S,) index of the next valid step of the same trajectory in turn order, −1 when there is none
    (the trajectory's last valid step, or an invalid step). Gaps in turn numbers are skipped over."""
    s = span_traj.numel()
    valid_idx = span_valid.nonzero().view(-1)
    order = torch.argsort(span_turn[valid_idx], stable=True)
    order = order[torch.argsort(span_traj[valid_idx][order], stable=True)]
    srt = valid_idx[order]  # valid steps sorted by (trajectory, turn)
    nxt = torch.full((s,), -1, dtype=torch.long, device=span_traj.device)
    same = span_traj[srt[1:]] == span_traj[srt[:-1]]
    nxt[srt[:-1][same]] = srt[1:][same]
    return nxt


@torch.no_grad()
def empg_advantages(
    span_adv: Tensor,
    span_entropy: Tensor,
    span_traj: Tensor,
    span_turn: Tensor,
    span_valid: Tensor | None = None,
    *,
    k: float = 1.0,
    k_next: float = 1.0,
    zeta: float = 0.1,
) -> Tensor:
    """EMPG-modulated step advantages (S,). Invalid steps are returned unchanged and stay out of every batch
    statistic (min/max, the mean of exp(−kH̃), the final mean)."""
    for name, t in (("span_entropy", span_entropy), ("span_traj", span_traj), ("span_turn", span_turn)):
        if t.shape != span_adv.shape:
            raise ValueError(
                f"{name}: expected shape {tuple(span_adv.shape)} like span_adv, got {tuple(t.shape)}"
            )
    ok = torch.ones_like(span_adv, dtype=torch.bool) if span_valid is None else span_valid.to(torch.bool)
    if not bool(ok.any()):
        return span_adv.clone()
    h = span_entropy.detach().to(torch.float64)
    a = span_adv.detach().to(torch.float64)
    h_min, h_max = h[ok].min(), h[ok].max()
    ht = (h - h_min) / (h_max - h_min + EPS)
    e = torch.exp(-k * ht)
    g = e / (e[ok].mean() + EPS)
    nxt = next_step_index(span_traj, span_turn, ok)
    has_next = nxt >= 0
    f = torch.where(has_next, torch.exp(-k_next * ht[nxt.clamp(min=0)]), torch.zeros_like(h))
    a_mod = a * g + zeta * f
    a_final = a_mod - a_mod[ok].mean()
    return torch.where(ok, a_final, a).to(span_adv.dtype)
