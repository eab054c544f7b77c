"""The AEM seam: our swe_rl.algo modulation applied to OpenRLHF's experiences after its base advantage.

OpenRLHF has no hook for custom advantages; our experience maker (actors.py) overrides
`compute_advantages_and_returns(self, experiences)` with `advantages_with_seam(super's method, ...)`:
  before: compact-filtered episodes get reward 0 (they keep their place in the group baseline, as in DeepSWE);
  upstream: length penalties, group baseline (group_norm / rloo / dr_grpo ...), token advantages (B, A), with
          group statistics over valid members only (valid_groups.py);
  after:  per-span α from swe_rl.algo.aem over the whole rollout batch (groups span micro-batches), invalid and
          compact-filtered samples get advantage 0 and an all-zero action mask (out of the loss and its token
          divisor, as in the built-in trainer), α diagnostics land in `experience.info` (→ wandb).
Spans are the runs of 1 in `action_mask` (one agent turn each). Entropy: the exact (B, A) per-token entropy our
policy forward returns beside the log-probs (passed in explicitly, one tensor per experience), or the
sampled-token surprisal −log π(a) as a cheaper fallback. With `entropy_span=action`, H̄ is the mean over each
turn's action tokens only: the executor sends their ranges (`ACTION_RANGES_KEY`), our samples generator turns
them into a (1, A) mask aligned with upstream's action mask (`attach_action_part`, info[ACTION_KEY]) and the seam
pops it before anything logs info.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import torch
from torch import Tensor

from swe_rl.algo.aem import aem_diagnostics, apply_aem, scope_labels, span_entropy
from swe_rl.algo.spans import span_index
from swe_rl.train.openrlhf.config import AemConfig
from swe_rl.train.openrlhf.valid_groups import VALID_KEY, valid_only_advantages

FILTER_KEY = "swe_rl_compact_filtered"  # info key: 1 = episode hit max steps / context / timeout
MASKED_KEY = (
    "swe_rl_masked"  # info key: 1 = masked by the reward spec (unsubmitted: mask); reward 0 in the baseline
)
ACTION_RANGES_KEY = "swe_rl_action_ranges"  # response key: [start, end) of each turn's action tokens
ACTION_KEY = "swe_rl_action_part"  # info key: (1, A) bool, 1 on action tokens; popped by the seam
__all__ = [
    "ACTION_KEY",
    "ACTION_RANGES_KEY",
    "FILTER_KEY",
    "MASKED_KEY",
    "VALID_KEY",
    "EntropyMissingError",
    "advantages_with_seam",
    "attach_action_part",
    "modulate_experiences",
]


class EntropyMissingError(RuntimeError):
    """Exact entropy was requested but the old-log-prob forward did not deliver it."""


def _flag(exp: Any, key: str, default: float) -> Tensor:
    b, dev = exp.action_mask.shape[0], exp.action_mask.device  # flags live where the experience lives
    v = exp.info.get(key)
    if v is None:
        return torch.full((b,), default, dtype=torch.float32, device=dev)
    return torch.as_tensor(v, dtype=torch.float32, device=dev).reshape(b)


def _entropy(exp: Any, source: str, exact: Tensor | None) -> Tensor:
    """(B, A) token entropy of one experience, 0 off the action mask."""
    mask = exp.action_mask.float()
    if source == "surprisal":
        return -exp.action_log_probs.float() * mask
    if exact is None or exact.shape != mask.shape:
        raise EntropyMissingError(
            "aem.entropy_source=exact but the old-log-prob forward returned no (B, A) entropy: the policy actors "
            "are not swe-rl's class (install_swe_rl_classes() must run before OpenRLHF's CLI; "
            "`swe-rl train-openrlhf --preflight` checks it). Use aem.entropy_source=surprisal to run without it."
        )
    return exact.to(mask.device).float() * mask  # our forward hands entropy over on the host


def _pad_cat(tensors: Sequence[Tensor], width: int) -> Tensor:
    return torch.cat([torch.nn.functional.pad(t, (0, width - t.shape[1])) for t in tensors], 0)


def attach_action_part(exp: Any, response: dict[str, Any], max_len: int) -> Any:
    """After upstream's `_process_response_into_experience`: the response's action ranges as a (1, A) mask cut
    and shifted exactly as upstream cuts its action mask (tokens [1, max_len)), in info[ACTION_KEY]."""
    ranges = response.get(ACTION_RANGES_KEY)
    if ranges is None:
        return exp
    part = torch.zeros(len(response["observation_tokens"]), dtype=torch.bool, device=exp.action_mask.device)
    for start, end in ranges:
        part[start:end] = True
    exp.info[ACTION_KEY] = part[1:max_len].unsqueeze(0)
    return exp


def _action_part(experiences: list[Any], width: int, cfg: AemConfig) -> Tensor | None:
    """(N, Amax) action-token mask for entropy_span=action (None for response); always pops ACTION_KEY."""
    parts = [e.info.pop(ACTION_KEY, None) for e in experiences]
    if not (cfg.enabled and cfg.entropy_span == "action"):
        return None
    if any(p is None or p.shape != e.action_mask.shape for p, e in zip(parts, experiences, strict=True)):
        raise ValueError(
            f"aem.entropy_span=action: every experience needs info[{ACTION_KEY!r}] shaped like its action_mask "
            f"(the executor's {ACTION_RANGES_KEY!r}, attached by SweRlSamplesGenerator)"
        )
    return _pad_cat(
        [
            p.to(e.action_mask.device).float() * e.action_mask.float()
            for p, e in zip(parts, experiences, strict=True)
        ],
        width,
    )


def zero_filtered_rewards(experiences: Sequence[Any], cfg: AemConfig) -> None:
    """Compact filtering, before the base estimator: filtered episodes score 0 but stay in their group."""
    if not cfg.compact_filter:
        return
    for exp in experiences:
        hit = _flag(exp, FILTER_KEY, 0.0) > 0
        if bool(hit.any()):
            exp.rewards = torch.where(hit.to(exp.rewards.device), torch.zeros_like(exp.rewards), exp.rewards)


def _per_sample(values: Tensor, rows: Tensor, n: int, reduce: str) -> Tensor:
    """(S,) span values → (n,) per-sample mean/min/max (1.0 where a sample has no span)."""
    dev = values.device
    out = torch.full((n,), float("nan") if reduce != "mean" else 0.0, dtype=torch.float64, device=dev)
    v = values.double()
    if reduce == "mean":
        cnt = torch.zeros(n, dtype=torch.float64, device=dev).index_add_(0, rows, torch.ones_like(v))
        out = out.index_add_(0, rows, v) / cnt.clamp(min=1)
        return torch.where(cnt > 0, out, torch.ones_like(out)).float()
    out = out.scatter_reduce(0, rows, v, "amin" if reduce == "min" else "amax", include_self=False)
    return torch.nan_to_num(out, nan=1.0).float()


@torch.no_grad()
def modulate_experiences(
    experiences: list[Any],
    n_samples_per_prompt: int,
    cfg: AemConfig,
    entropy: Sequence[Tensor | None] | None = None,
) -> dict[str, float]:
    """After the base estimator: zero invalid / filtered samples, scale each span's advantage by α.
    `entropy`: the exact (B, A) token entropy of each experience (same order), for entropy_source=exact.

    Mutates `experience.advantages` (B, A) and `experience.info`; returns batch-level diagnostics."""
    widths = [e.action_mask.shape[1] for e in experiences]
    width = max(widths)
    mask = _pad_cat([e.action_mask.float() for e in experiences], width)  # (N, Amax)
    adv = _pad_cat([e.advantages.float() for e in experiences], width)  # (N, Amax)
    rows_index = torch.tensor(
        [i for e in experiences for i in e.index], dtype=torch.long, device=mask.device
    )  # (N,) prompt order
    valid = torch.cat([_flag(e, VALID_KEY, 1.0) for e in experiences]) > 0  # (N,)
    filtered = torch.cat([_flag(e, FILTER_KEY, 0.0) for e in experiences]) > 0
    masked = torch.cat([_flag(e, MASKED_KEY, 0.0) for e in experiences]) > 0
    keep = valid & ~masked & ~(filtered if cfg.compact_filter else torch.zeros_like(filtered))
    adv = adv * keep[:, None].to(adv.dtype)

    diag: dict[str, float] = {}
    action = _action_part(experiences, width, cfg)
    idx = span_index(mask)
    alpha = torch.ones(idx.num_spans, device=mask.device)
    if cfg.enabled and idx.num_spans:
        exact = list(entropy) if entropy is not None else [None] * len(experiences)
        if len(exact) != len(experiences):
            raise EntropyMissingError(f"{len(exact)} entropy tensors for {len(experiences)} experiences")
        ent = _pad_cat(
            [_entropy(e, cfg.entropy_source, h) for e, h in zip(experiences, exact, strict=True)], width
        )
        groups = torch.div(rows_index, n_samples_per_prompt, rounding_mode="floor")  # (N,)
        span_group = idx.group(groups)
        labels = scope_labels(cfg.scope, span_group, idx.traj)
        span_valid = keep[idx.traj]
        adv, alpha = apply_aem(
            adv, ent, idx, labels, span_valid, lam=cfg.lam, min_range=cfg.min_range, reverse=cfg.reverse,
            action_mask=action,
        )  # fmt: skip
        h = span_entropy(ent, idx, action)
        span_adv = adv.sum(1)[idx.traj]  # sign of the sample's advantage for the correlation diagnostic
        diag = aem_diagnostics(alpha, h, span_group, span_adv, span_valid, min_range=cfg.min_range)
    _write_back(experiences, widths, adv, keep, alpha, idx, diag)
    return diag


def _write_back(experiences, widths, adv, keep, alpha, idx, diag) -> None:
    n = adv.shape[0]
    per = {
        "aem_alpha_mean": _per_sample(alpha, idx.traj, n, "mean"),
        "aem_alpha_min": _per_sample(alpha, idx.traj, n, "min"),
        "aem_alpha_max": _per_sample(alpha, idx.traj, n, "max"),
        "aem_num_spans": torch.bincount(idx.traj, minlength=n).float(),
        "swe_rl_adv_zeroed": (~keep).float(),
    }
    # batch-level values repeated per sample so they survive batching (never over the per-sample α above)
    for k, v in diag.items():
        per.setdefault(f"aem_{k}", torch.full((n,), float(v), device=adv.device))
    start = 0
    for exp, w in zip(experiences, widths, strict=True):
        b = exp.action_mask.shape[0]
        exp.advantages = adv[start : start + b, :w].to(exp.advantages.dtype)
        exp.action_mask = _drop_rows(exp.action_mask, keep[start : start + b].to(exp.action_mask.device))
        for k, v in per.items():
            exp.info[k] = v[start : start + b]
        start += b


def _drop_rows(action_mask: Tensor, keep: Tensor) -> Tensor:
    """(b, A) action mask of the kept samples; a dropped one (infra failure, filtered) keeps one token, its last.
    As in the built-in trainer it does not train (advantage 0: no policy gradient) and stays out of the loss
    divisor (upstream's token count is the action mask's) but for that one token (one sample in seq-mean modes).
    The token is there because upstream's `ppo_train` divides a micro-batch's metrics by its token count (and the
    loss by the optimizer step's): a micro-batch made only of dropped samples, as after a lost node, raised
    ZeroDivisionError (`make rehearsal-cluster`)."""
    m = action_mask.to(torch.bool)
    width = m.shape[1]
    pos = torch.arange(width, device=m.device).expand_as(m)
    last = torch.where(m, pos, torch.full_like(pos, -1)).amax(dim=1)  # (b,) last action token, -1 if none
    last = torch.where(last < 0, torch.full_like(last, width - 1), last)
    anchor = pos == last[:, None]
    out = torch.where(keep[:, None], m, anchor)
    return out if action_mask.dtype == torch.bool else out.to(action_mask.dtype)


def advantages_with_seam(
    original: Callable[[list[Any]], list[Any]],
    experiences: list[Any],
    args: Any,
    cfg: AemConfig,
    entropy: Sequence[Tensor | None] | None = None,
) -> list[Any]:
    """Upstream's `compute_advantages_and_returns` (`original`, bound) with our steps around it: compact-filter
    rewards, group statistics over valid members, then AEM. `args` = the trainer's hierarchized args."""
    zero_filtered_rewards(experiences, cfg)
    experiences = valid_only_advantages(original, experiences, args)
    modulate_experiences(experiences, args.rollout.n_samples_per_prompt, cfg, entropy)
    return experiences
