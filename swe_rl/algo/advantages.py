"""Group-relative base advantage estimators, compact filtering (DeepSWE) and DAPO dynamic filtering.

Every estimator has one signature:
    estimator(rewards (B,), group_ids (B,), valid (B,) | None, *, std, eps, singleton) -> advantages (B,)
and lives in `ESTIMATORS` under its config name. Rules shared by all of them:
- invalid members (valid=False: unscorable, infra failure) are left out of their group's statistics and get 0;
- all-equal groups get exactly 0 (forced, so float rounding in the mean cannot leak a 1e-17);
- groups with at most one valid member get 0 (singleton="zero") or the raw reward (singleton="raw", as in
  verl and rLLM, where μ=0 and σ=1 for a group of one).
Arithmetic runs in float64 and the result is cast back to the rewards' dtype.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from typing import Protocol

import torch
from torch import Tensor

from swe_rl.algo.groups import GroupStats, group_stats

STD_CONVENTIONS = ("unbiased", "population")
SINGLETON_RULES = ("zero", "raw")


class Estimator(Protocol):
    def __call__(
        self,
        rewards: Tensor,
        group_ids: Tensor,
        valid: Tensor | None = None,
        *,
        std: str = "unbiased",
        eps: float = 1e-6,
        singleton: str = "zero",
    ) -> Tensor: ...


def _prepare(rewards: Tensor, group_ids: Tensor, valid: Tensor | None) -> tuple[Tensor, Tensor, GroupStats]:
    if rewards.dim() != 1:
        raise ValueError(f"rewards: expected a (B,) tensor, got shape {tuple(rewards.shape)}")
    ok = torch.ones_like(rewards, dtype=torch.bool) if valid is None else valid.to(torch.bool)
    r = torch.where(ok, rewards.to(torch.float64), 0.0)
    return r, ok, group_stats(r, group_ids.to(rewards.device), ok)


def _finish(adv: Tensor, r: Tensor, ok: Tensor, st: GroupStats, singleton: str, like: Tensor) -> Tensor:
    if singleton not in SINGLETON_RULES:
        raise ValueError(f"singleton: expected one of {SINGLETON_RULES}, got {singleton!r}")
    single = (st.count <= 1)[st.inverse]  # (B,) member of a group with <= 1 valid member
    equal = st.all_equal[st.inverse]
    adv = torch.where(equal, torch.zeros_like(adv), adv)
    adv = torch.where(single, r if singleton == "raw" else torch.zeros_like(adv), adv)
    adv = torch.where(ok, adv, torch.zeros_like(adv))
    return adv.to(like.dtype)


def grpo(
    rewards: Tensor,
    group_ids: Tensor,
    valid: Tensor | None = None,
    *,
    std: str = "unbiased",
    eps: float = 1e-6,
    singleton: str = "zero",
) -> Tensor:
    """GRPO (DeepSeekMath, arXiv 2402.03300): A = (r − μ_g) / (σ_g + eps); σ with N−1 (verl) or N (rLLM)."""
    if std not in STD_CONVENTIONS:
        raise ValueError(f"std: expected one of {STD_CONVENTIONS}, got {std!r}")
    r, ok, st = _prepare(rewards, group_ids, valid)
    denom = (st.count - 1).clamp(min=1) if std == "unbiased" else st.count.clamp(min=1)
    sigma = (st.sq_dev / denom).sqrt()
    adv = (r - st.mean[st.inverse]) / (sigma[st.inverse] + eps)
    return _finish(adv, r, ok, st, singleton, rewards)


def dr_grpo(
    rewards: Tensor,
    group_ids: Tensor,
    valid: Tensor | None = None,
    *,
    std: str = "unbiased",
    eps: float = 1e-6,
    singleton: str = "zero",
) -> Tensor:
    """Dr.GRPO (arXiv 2503.20783): A = r − μ_g, no std division (std and eps are ignored)."""
    r, ok, st = _prepare(rewards, group_ids, valid)
    return _finish(r - st.mean[st.inverse], r, ok, st, singleton, rewards)


def rloo(
    rewards: Tensor,
    group_ids: Tensor,
    valid: Tensor | None = None,
    *,
    std: str = "unbiased",
    eps: float = 1e-6,
    singleton: str = "zero",
) -> Tensor:
    """RLOO (arXiv 2402.14740) = DeepSWE's LOOP: A_i = r_i − mean_{j≠i} r_j (std and eps are ignored)."""
    r, ok, st = _prepare(rewards, group_ids, valid)
    n = st.count[st.inverse]
    total = (st.mean * st.count)[st.inverse]
    adv = r - (total - r) / (n - 1).clamp(min=1)
    return _finish(adv, r, ok, st, singleton, rewards)


ESTIMATORS: dict[str, Estimator] = {"grpo": grpo, "dr_grpo": dr_grpo, "rloo": rloo, "loop": rloo}


def compact_filter(
    rewards: Tensor,
    valid: Tensor,
    loss_mask: Tensor,
    exit_reasons: Sequence[str],
    reasons: Collection[str],
) -> tuple[Tensor, Tensor, Tensor, Tensor]:
    """DeepSWE compact filtering: a trajectory whose exit reason is in `reasons` keeps its place in the group
    baseline with reward 0 (and counts as valid) but gets an all-zero loss mask, so it adds no gradient.

    Returns (rewards (B,), valid (B,), loss_mask (B, T), filtered (B,) bool), all new tensors.
    """
    if len(exit_reasons) != rewards.shape[0]:
        raise ValueError(
            f"exit_reasons: expected {rewards.shape[0]} entries (one per row), got {len(exit_reasons)}"
        )
    wanted = set(reasons)
    hit = torch.tensor([e in wanted for e in exit_reasons], dtype=torch.bool, device=rewards.device)
    new_rewards = torch.where(hit, torch.zeros_like(rewards), rewards)
    new_valid = valid.to(torch.bool) | hit
    new_mask = loss_mask * (~hit).to(loss_mask.dtype)[:, None]
    return new_rewards, new_valid, new_mask, hit


def dynamic_filter_keep(rewards: Tensor, group_ids: Tensor, valid: Tensor | None = None) -> Tensor:
    """DAPO dynamic sampling (arXiv 2503.14476) as a (B,) keep-mask: drop every member of a group whose valid
    rewards are all equal (all solved, all failed, or fewer than two valid members)."""
    _, _, st = _prepare(rewards, group_ids, valid)
    return ~st.all_equal[st.inverse]
