"""The trainer's thin view of swe_rl.algo: token advantages from its glue, and the micro-batch loss.

`advantages(...)` calls `swe_rl.algo.compute_advantages` once per step (estimator, compact / dynamic filtering,
AEM or EMPG) and folds the DAPO keep-mask into the loss mask. `microbatch_loss(...)` calls
`swe_rl.algo.compute_policy_loss` with the minibatch-wide divisor, so gradient accumulation over micro-batches
gives exactly the minibatch loss. Nothing here re-implements an estimator, a modulator or a loss.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import torch
from torch import Tensor

from swe_rl.agent.trajectory import Trajectory
from swe_rl.algo.config import AlgoConfig
from swe_rl.algo.epo import EntropyHistory
from swe_rl.algo.pipeline import compute_advantages, compute_policy_loss
from swe_rl.algo.spans import span_index, span_mean
from swe_rl.train.batch import span_turn_types


def masked_mean(x: Tensor, mask: Tensor) -> float:
    n = int(mask.sum())
    return float((x * mask).sum() / n) if n else 0.0


def advantages(
    cfg: AlgoConfig,
    rewards: Tensor,
    group_ids: Tensor,
    valid: Tensor,
    loss_mask: Tensor,
    token_entropy: Tensor,
    exit_reasons: Sequence[str],
    trajectories: Sequence[Trajectory] | None = None,
    action_mask: Tensor | None = None,
) -> tuple[Tensor, Tensor, dict[str, float]]:
    """(token advantages (B, T), loss mask (B, T) after filtering and keep-mask, finite scalar diagnostics):
    `step_advantages` without the per-turn records."""
    adv, mask, diag, _ = step_advantages(
        cfg, rewards, group_ids, valid, loss_mask, token_entropy, exit_reasons, trajectories, action_mask
    )
    return adv, mask, diag


def step_advantages(
    cfg: AlgoConfig,
    rewards: Tensor,
    group_ids: Tensor,
    valid: Tensor,
    loss_mask: Tensor,
    token_entropy: Tensor,
    exit_reasons: Sequence[str],
    trajectories: Sequence[Trajectory] | None = None,
    action_mask: Tensor | None = None,
) -> tuple[Tensor, Tensor, dict[str, float], list[list[dict[str, Any]]]]:
    """(token advantages (B, T), loss mask (B, T) after filtering and keep-mask, finite scalar diagnostics,
    per-row turn records (`turn_records`)). With the batch's `trajectories`, AEM's mean α by turn type goes into
    the diagnostics (`aem/alpha_turn/<type>`, types from batch.span_turn_types). `action_mask` (B, T):
    Batch.action_mask, for AEM's entropy_span=action."""
    res = compute_advantages(
        cfg, rewards, group_ids, valid, loss_mask, token_entropy, exit_reasons, action_mask=action_mask
    )
    mask = res.loss_mask.to(torch.float32) * res.keep.to(torch.float32)[:, None]
    diag = {k: float(v) for k, v in res.diagnostics.items() if math.isfinite(float(v))}
    if res.span_alpha is not None and trajectories is not None:
        labels = span_turn_types(list(trajectories), res.loss_mask)
        diag |= alpha_by_turn_type(res.span_alpha, labels)
    adv = res.token_advantages.to(torch.float32)
    return adv, mask, diag, turn_records(loss_mask, token_entropy, adv, mask, res.loss_mask, res.span_alpha)


def turn_records(
    loss_mask: Tensor,
    token_entropy: Tensor,
    token_adv: Tensor,
    final_mask: Tensor,
    alpha_mask: Tensor,
    span_alpha: Tensor | None,
) -> list[list[dict[str, Any]]]:
    """Per row, one record per turn (span of `loss_mask`, in order): its tokens, mean old-policy entropy, AEM's α
    (None without AEM, or where the row was filtered out before modulation) and the advantage its tokens received
    (their mean; 0 for a row the step left out, `masked` then true). The trainer writes them beside each logged
    episode (`turns`), so a reader sees which turns AEM scaled. Filtering zeroes whole rows, so a row keeps either
    all its spans in `alpha_mask` (the mask α was computed on) or none."""
    index = span_index(loss_mask)
    ent = span_mean(token_entropy.float(), index).tolist()
    adv = span_mean(token_adv, index).tolist()
    rows, lengths = index.traj.tolist(), index.length.tolist()
    alpha_rows = span_index(alpha_mask).traj if span_alpha is not None else None
    alpha_of: dict[int, list[float]] = {}
    if span_alpha is not None and alpha_rows is not None:
        for r, a in zip(alpha_rows.tolist(), span_alpha.tolist(), strict=True):
            alpha_of.setdefault(r, []).append(a)
    live = (final_mask != 0).any(dim=1).tolist()
    out: list[list[dict[str, Any]]] = [[] for _ in range(loss_mask.shape[0])]
    for s, r in enumerate(rows):
        alphas = alpha_of.get(r, [])
        k = len(out[r])
        out[r].append({
            "tokens": int(lengths[s]), "entropy": ent[s],
            "alpha": alphas[k] if k < len(alphas) else None,
            "advantage": adv[s] if live[r] else 0.0, "masked": not live[r],
        })  # fmt: skip
    return out


def alpha_by_turn_type(span_alpha: Tensor, labels: list[str]) -> dict[str, float]:
    """Mean AEM α over the spans of each turn type (`aem/alpha_turn/<type>`); {} when labels do not fit."""
    if len(labels) != span_alpha.numel():
        return {}
    by: dict[str, list[float]] = {}
    for a, lab in zip(span_alpha.tolist(), labels, strict=True):
        by.setdefault(lab, []).append(a)
    return {f"aem/alpha_turn/{k}": sum(v) / len(v) for k, v in sorted(by.items())}


def needs_current_entropy(cfg: AlgoConfig) -> bool:
    return cfg.loss.entropy_coef > 0 or cfg.epo.enabled


def global_count(cfg: AlgoConfig, mask: Tensor) -> float | None:
    """The minibatch divisor every micro-batch uses (tokens for token-mean, sequences for seq-mean modes)."""
    if cfg.loss.agg == "token-mean":
        return float(max(int((mask != 0).sum()), 1))
    if cfg.loss.agg in ("seq-mean-token-mean", "seq-mean-token-sum"):
        return float(max(int(((mask != 0).sum(1) > 0).sum()), 1))
    return None


def microbatch_loss(
    cfg: AlgoConfig,
    new_lp: Tensor,
    old_lp: Tensor,
    adv: Tensor,
    mask: Tensor,
    new_ent: Tensor | None,
    *,
    ref_lp: Tensor | None,
    history: EntropyHistory,
    step: int,
    count: float | None,
    fraction: float,
    rollout_lp: Tensor | None = None,
) -> tuple[Tensor, dict[str, float]]:
    """Loss of one micro-batch, scaled so that summing over the minibatch gives the minibatch loss.

    With EPO on, the caller passes count=None (EPO's terms are per-micro-batch means) and the whole loss is
    weighted by `fraction` = micro rows / minibatch rows."""
    loss, metrics = compute_policy_loss(
        cfg, new_lp, old_lp, adv, mask, ref_logp=ref_lp, token_entropy=new_ent,
        epo_history=history, step=step, global_count=count, rollout_logp=rollout_lp,
    )  # fmt: skip
    if cfg.epo.enabled:
        loss = loss * fraction
    return loss, metrics


def reference_logprobs(ref_model: Any, batch: Any, chunk: int, temperature: float = 1.0) -> Tensor | None:
    """Log-probs under the frozen reference model at the rollout temperature (only when loss.kl_coef > 0)."""
    if ref_model is None:
        return None
    from swe_rl.train.batch import token_logprobs_entropy

    with torch.no_grad():
        lp, _ = token_logprobs_entropy(
            ref_model, batch, chunk=chunk, with_entropy=False, temperature=temperature
        )
    return lp


def update_rows(loss_mask: Tensor) -> Tensor:
    """The rows every PPO epoch partitions into minibatches: all of them, whatever the advantages, so every
    method gets the same number of optimizer updates per step and the same loss divisor (the minibatch's policy
    tokens or sequences). Rows with zero advantage add zero to the sum but count in the divisor, as in verl."""
    return torch.arange(loss_mask.shape[0], device=loss_mask.device)


def check_rollout_logprobs(cfg: AlgoConfig, trajectories: Sequence[Trajectory]) -> None:
    """Off-policy correction needs the sampler's log-probs on every policy token (ρ = π_old / π_sampler)."""
    if cfg.off_policy.mode == "off":
        return
    missing = [t for t in trajectories if any(t.loss_mask) and len(t.logprobs) != len(t.token_ids)]
    if missing:
        raise ValueError(
            f"off_policy.mode={cfg.off_policy.mode!r} needs the sampler's log-probs, but {len(missing)} "
            f"trajectories have none (e.g. {missing[0].task_id}); use a policy backend that returns them"
        )
