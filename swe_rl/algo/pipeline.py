"""The two entry points trainers call (built-in trainer and OpenRLHF adapter alike), so neither re-implements glue.

Per batch, once, under no_grad, before any PPO epoch:
    res = compute_advantages(cfg, rewards, group_ids, valid, loss_mask, old_token_entropy, exit_reasons)
Per micro-batch, with gradient:
    loss, metrics = compute_policy_loss(cfg, logp, old_logp, res.token_advantages, res.loss_mask, ...)
After the optimizer step of RL step k (EPO only):
    history.append(batch_token_mean(old_token_entropy, res.loss_mask))
"""

from __future__ import annotations

from collections.abc import Hashable, Sequence
from typing import NamedTuple

import torch
from torch import Tensor

from swe_rl.algo.advantages import ESTIMATORS, compact_filter, dynamic_filter_keep
from swe_rl.algo.aem import aem_diagnostics, aem_token_advantages, scope_labels
from swe_rl.algo.config import AlgoConfig, RewardSpecConfig
from swe_rl.algo.empg import empg_advantages
from swe_rl.algo.epo import EntropyHistory, epo_regularizer
from swe_rl.algo.losses import agg_loss, kl_penalty, policy_loss
from swe_rl.algo.offpolicy import is_weights
from swe_rl.algo.spans import broadcast, span_index, span_mean


class AdvantageResult(NamedTuple):
    token_advantages: Tensor  # (B, T) float32, 0 off the loss mask; a constant for all PPO epochs
    loss_mask: Tensor  # (B, T) input dtype; zero rows for compact-filtered and invalid trajectories
    keep: Tensor  # (B,) bool DAPO keep-mask (all True when dynamic filtering is off); drop rows where False
    diagnostics: dict[str, float]  # flat, for metrics.jsonl ("adv/…", "aem/…")
    span_alpha: Tensor | None = (
        None  # (S,) AEM's α per span of span_index(loss_mask), row-major; None without AEM
    )


def group_ids_from(keys: Sequence[Hashable], device: torch.device | str | None = None) -> Tensor:
    """(B,) int64 group ids from per-row keys (e.g. Trajectory.task_id), numbered by first appearance, on
    `device` (the rewards' device; None = torch's default device)."""
    seen: dict[Hashable, int] = {}
    return torch.tensor([seen.setdefault(k, len(seen)) for k in keys], dtype=torch.long, device=device)


def _check_inputs(
    rewards: Tensor, group_ids: Tensor, valid: Tensor, loss_mask: Tensor, ent: Tensor | None
) -> None:
    b = rewards.shape[0]
    if rewards.dim() != 1 or group_ids.shape != (b,) or valid.shape != (b,):
        raise ValueError(
            f"rewards, group_ids, valid: expected (B,) tensors, got {tuple(rewards.shape)}, "
            f"{tuple(group_ids.shape)}, {tuple(valid.shape)}"
        )
    if loss_mask.dim() != 2 or loss_mask.shape[0] != b:
        raise ValueError(f"loss_mask: expected ({b}, T), got {tuple(loss_mask.shape)}")
    if ent is not None and ent.shape != loss_mask.shape:
        raise ValueError(f"token_entropy: expected shape {tuple(loss_mask.shape)}, got {tuple(ent.shape)}")


@torch.no_grad()
def compute_advantages(
    cfg: AlgoConfig,
    rewards: Tensor,
    group_ids: Tensor,
    valid: Tensor,
    loss_mask: Tensor,
    token_entropy: Tensor | None = None,
    exit_reasons: Sequence[str] | None = None,
    action_mask: Tensor | None = None,
) -> AdvantageResult:
    """rewards (B,) float (any value where invalid), group_ids (B,) int (one id per task), valid (B,) bool,
    loss_mask (B, T), token_entropy (B, T) old-policy entropy (required for AEM/EMPG), exit_reasons (B,)
    Trajectory.exit_status values (required when compact filtering is on), action_mask (B, T) 1 on each turn's
    action tokens (required for AEM with entropy_span=action; see train.batch.action_mask)."""
    _check_inputs(rewards, group_ids, valid, loss_mask, token_entropy)
    if action_mask is not None and action_mask.shape != loss_mask.shape:
        raise ValueError(
            f"action_mask: expected shape {tuple(loss_mask.shape)}, got {tuple(action_mask.shape)}"
        )
    valid = valid.to(torch.bool)
    mask = loss_mask * valid.to(loss_mask.dtype)[:, None]  # unscorable rows are masked, never scored 0
    rewards, mask, filtered, n_unsub = apply_reward_spec(cfg.reward, rewards, valid, mask, exit_reasons)
    if cfg.compact_filtering.enabled:
        if exit_reasons is None:
            raise ValueError("exit_reasons: required when compact_filtering.enabled is true (one per row)")
        rewards, valid, mask, compacted = compact_filter(
            rewards, valid, mask, exit_reasons, cfg.compact_filtering.reasons
        )
        filtered = filtered | compacted
    est = cfg.estimator
    adv = ESTIMATORS[est.name](rewards, group_ids, valid, std=est.std, eps=est.eps, singleton=est.singleton)
    adv = adv.to(torch.float32)
    keep = (
        dynamic_filter_keep(rewards, group_ids, valid)
        if cfg.dynamic_filtering.enabled
        else torch.ones_like(valid)
    )
    diag = {
        "adv/unsubmitted_frac": n_unsub,
        "adv/valid_frac": valid.float().mean().item(),
        "adv/compact_filtered_frac": filtered.float().mean().item(),
        "adv/keep_frac": keep.float().mean().item(),
    }
    token_adv, span_alpha = _modulate(
        cfg, adv, mask, token_entropy, group_ids, valid & ~filtered & keep, diag, action_mask
    )
    m = mask != 0
    if bool(m.any()):
        diag |= {
            "adv/token_mean": token_adv[m].mean().item(),
            "adv/token_abs_mean": token_adv[m].abs().mean().item(),
        }
    return AdvantageResult(token_adv, mask, keep, diag, span_alpha)


def apply_reward_spec(
    spec: RewardSpecConfig,
    rewards: Tensor,
    valid: Tensor,
    mask: Tensor,
    exit_reasons: Sequence[str] | None,
) -> tuple[Tensor, Tensor, Tensor, float]:
    """The reward of valid episodes that did not submit: 0 ("zero"), 0 with no gradient ("mask": they stay in
    the baseline, as compact filtering does) or the graded patch ("grade"). Infra failures stay invalid.
    Returns (rewards, loss mask, filtered (B,) bool, share of valid rows that did not submit)."""
    filtered = torch.zeros_like(valid)
    if spec.unsubmitted == "grade":
        return rewards, mask, filtered, 0.0
    if exit_reasons is None or len(exit_reasons) != rewards.shape[0]:
        raise ValueError(
            f"exit_reasons: one per row is required when reward.unsubmitted is {spec.unsubmitted!r} "
            f"(got {None if exit_reasons is None else len(exit_reasons)} for {rewards.shape[0]} rows)"
        )
    done = set(spec.submitted)
    # built on the caller's device: a host tensor next to CUDA rewards raises a device-mismatch error
    unsub = valid & torch.tensor([e not in done for e in exit_reasons], dtype=torch.bool, device=valid.device)
    rewards = torch.where(unsub, torch.zeros_like(rewards), rewards)
    if spec.unsubmitted == "mask":
        mask, filtered = mask * (~unsub).to(mask.dtype)[:, None], unsub
    share = float(unsub.sum()) / max(int(valid.sum()), 1)
    return rewards, mask, filtered, share


def _modulate(
    cfg: AlgoConfig,
    adv: Tensor,
    mask: Tensor,
    token_entropy: Tensor | None,
    group_ids: Tensor,
    stats_rows: Tensor,
    diag: dict[str, float],
    action_mask: Tensor | None = None,
) -> tuple[Tensor, Tensor | None]:
    """Row advantages (B,) → token advantages (B, T) through the configured modulator, and AEM's α (S,)."""
    kind = cfg.modulator.kind
    if kind == "none":
        return adv[:, None] * (mask != 0).to(adv.dtype), None
    if token_entropy is None:
        raise ValueError(
            f"token_entropy: required when modulator.kind is {kind!r} (old-policy entropy, (B, T))"
        )
    index = span_index(mask)
    span_valid = stats_rows[index.traj]  # spans of invalid / filtered / dropped rows stay out of the stats
    diag["adv/num_spans"] = float(index.num_spans)
    if kind == "aem":
        a = cfg.modulator.aem
        if a.entropy_span == "action" and action_mask is None:
            raise ValueError(
                "action_mask: required when modulator.aem.entropy_span is 'action' ((B, T), 1 on action tokens)"
            )
        labels = scope_labels(a.scope, index.group(group_ids), index.traj)
        token_adv, alpha, h = aem_token_advantages(
            adv, token_entropy, index, labels, span_valid, lam=a.lam, min_range=a.min_range, reverse=a.reverse,
            action_mask=action_mask if a.entropy_span == "action" else None,
        )  # fmt: skip
        span_adv = index.row_values(adv)
        d = aem_diagnostics(
            alpha, h, labels, span_adv, span_valid, min_range=a.min_range, span_length=index.length
        )
        diag |= {f"aem/{k}": v for k, v in d.items()}
        return token_adv, alpha
    e = cfg.modulator.empg
    h = span_mean(token_entropy, index)
    span_adv = empg_advantages(
        index.row_values(adv), h, index.traj, index.turn, span_valid, k=e.k, k_next=e.k_next, zeta=e.zeta
    )
    return broadcast(span_adv, index), None


def compute_policy_loss(
    cfg: AlgoConfig,
    logp: Tensor,
    old_logp: Tensor,
    token_advantages: Tensor,
    loss_mask: Tensor,
    *,
    ref_logp: Tensor | None = None,
    token_entropy: Tensor | None = None,
    epo_history: EntropyHistory | None = None,
    step: int = 0,
    global_count: float | None = None,
    rollout_logp: Tensor | None = None,
) -> tuple[Tensor, dict[str, float]]:
    """Scalar loss for one (micro-)batch = policy loss + kl_coef·KL − entropy_coef·H (+ EPO's −λ(L_H − β·L_smooth)).

    All tensors (B, T). token_entropy is the *current* policy's entropy with gradient (needed when
    entropy_coef > 0 or EPO is on); ref_logp is needed when kl_coef > 0; epo_history when EPO is on;
    rollout_logp (the sampler's log-probs) when off_policy.mode is not off."""
    lc, op = cfg.loss, cfg.off_policy
    weight: Tensor | None = None
    is_metrics: dict[str, float] = {}
    if op.mode != "off":
        if rollout_logp is None:
            raise ValueError(f"rollout_logp: required when off_policy.mode is {op.mode!r}")
        weight, is_metrics = is_weights(
            old_logp, rollout_logp, loss_mask, mode=op.mode, low=op.low, high=op.high
        )
    loss, metrics = policy_loss(
        lc.type, logp, old_logp, token_advantages, loss_mask, clip_low=lc.clip_low, clip_high=lc.clip_high,
        dual_clip=lc.dual_clip, agg=lc.agg, norm_const=lc.norm_const, global_count=global_count,
        token_weight=weight,
    )  # fmt: skip
    metrics |= is_metrics

    def agg(x: Tensor) -> Tensor:
        return agg_loss(x, loss_mask, lc.agg, norm_const=lc.norm_const, global_count=global_count)

    if lc.kl_coef > 0:
        if ref_logp is None:
            raise ValueError("ref_logp: required when loss.kl_coef > 0")
        kl = agg(kl_penalty(logp, ref_logp, lc.kl_estimator))
        loss = loss + lc.kl_coef * kl
        metrics["kl_ref"] = kl.item()
    if lc.entropy_coef > 0 or cfg.epo.enabled:
        if token_entropy is None:
            raise ValueError(
                "token_entropy: required when loss.entropy_coef > 0 or epo.enabled (with gradient)"
            )
        ent = agg(token_entropy)
        metrics["entropy"] = ent.item()
        loss = loss - lc.entropy_coef * ent
    if cfg.epo.enabled and token_entropy is not None:
        if epo_history is None:
            raise ValueError(
                "epo_history: required when epo.enabled (an EntropyHistory from the trainer state)"
            )
        p = cfg.epo
        reg, epo_metrics = epo_regularizer(
            token_entropy, span_index(loss_mask), epo_history.reference(), step=step, total_steps=p.total_steps,
            lam=p.lam, kappa_low=p.kappa_low, kappa_high=p.kappa_high, gamma=p.gamma, alpha=p.alpha,
        )  # fmt: skip
        loss = loss + reg
        metrics |= {f"epo/{k}": v for k, v in epo_metrics.items()}
    metrics["loss"] = loss.item()
    return loss, metrics
