"""The AEM seam: our swe_rl.algo modulation applied to OpenRLHF's experiences after its base advantage.

OpenRLHF has no hook for custom advantages, so `wrap_compute_advantages` wraps
`RemoteExperienceMaker.compute_advantages_and_returns(self, experiences)` (patch.py installs it):
  before: compact-filtered episodes get reward 0 (they keep their place in the group baseline, as in DeepSWE);
  original: length penalties, group baseline (group_norm / rloo / dr_grpo ...), token advantages (B, A);
  after:  per-span α from swe_rl.algo.aem over the whole rollout batch (groups span micro-batches), invalid and
          compact-filtered samples get advantage 0, α diagnostics land in `experience.info` (→ wandb).
Spans are the runs of 1 in `action_mask` (one agent turn each). Entropy: exact per-token entropy attached by our
policy forward (patch.py), or the sampled-token surprisal −log π(a) as a cheaper fallback.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import torch
from torch import Tensor

from swe_rl.algo.aem import aem_diagnostics, apply_aem, scope_labels
from swe_rl.algo.spans import span_index, span_mean
from swe_rl.train.openrlhf.config import AemConfig

VALID_KEY = "swe_rl_valid"  # info key (from the executor's extra_logs): 0 = infrastructure failure
FILTER_KEY = "swe_rl_compact_filtered"  # info key: 1 = episode hit max steps / context / timeout
ENTROPY_ATTR = "swe_rl_entropy"  # attribute on action_log_probs carrying the exact (B, A) entropy
PATCHED_MARK = "_swe_rl_aem_wrapped"


class EntropyMissingError(RuntimeError):
    """Exact entropy was requested but the old-log-prob forward did not deliver it."""


def _flag(exp: Any, key: str, default: float) -> Tensor:
    b = exp.action_mask.shape[0]
    v = exp.info.get(key)
    if v is None:
        return torch.full((b,), default, dtype=torch.float32)
    return torch.as_tensor(v, dtype=torch.float32).reshape(b)


def _entropy(exp: Any, source: str) -> Tensor:
    """(B, A) token entropy of one experience, 0 off the action mask."""
    mask = exp.action_mask.float()
    if source == "surprisal":
        return -exp.action_log_probs.float() * mask
    ent = getattr(exp.action_log_probs, ENTROPY_ATTR, None)
    if ent is None:
        raise EntropyMissingError(
            "aem.entropy_source=exact but action_log_probs carry no entropy: the policy forward patch is not "
            "installed in the actor processes, or RAY_ENABLE_ZERO_COPY_TORCH_TENSORS=1 stripped the attribute "
            "(our launcher sets it to 0). Use aem.entropy_source=surprisal to run without it."
        )
    return ent.float() * mask


def _pad_cat(tensors: Sequence[Tensor], width: int) -> Tensor:
    return torch.cat([torch.nn.functional.pad(t, (0, width - t.shape[1])) for t in tensors], 0)


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
    out = torch.full((n,), float("nan") if reduce != "mean" else 0.0, dtype=torch.float64)
    v = values.double()
    if reduce == "mean":
        cnt = torch.zeros(n, dtype=torch.float64).index_add_(0, rows, torch.ones_like(v))
        out = out.index_add_(0, rows, v) / cnt.clamp(min=1)
        return torch.where(cnt > 0, out, torch.ones_like(out)).float()
    out = out.scatter_reduce(0, rows, v, "amin" if reduce == "min" else "amax", include_self=False)
    return torch.nan_to_num(out, nan=1.0).float()


@torch.no_grad()
def modulate_experiences(
    experiences: list[Any], n_samples_per_prompt: int, cfg: AemConfig
) -> dict[str, float]:
    """After the base estimator: zero invalid / filtered samples, scale each span's advantage by α.

    Mutates `experience.advantages` (B, A) and `experience.info`; returns batch-level diagnostics."""
    widths = [e.action_mask.shape[1] for e in experiences]
    width = max(widths)
    mask = _pad_cat([e.action_mask.float() for e in experiences], width)  # (N, Amax)
    adv = _pad_cat([e.advantages.float() for e in experiences], width)  # (N, Amax)
    rows_index = torch.tensor(
        [i for e in experiences for i in e.index], dtype=torch.long
    )  # (N,) prompt order
    valid = torch.cat([_flag(e, VALID_KEY, 1.0) for e in experiences]) > 0  # (N,)
    filtered = torch.cat([_flag(e, FILTER_KEY, 0.0) for e in experiences]) > 0
    keep = valid & ~(filtered if cfg.compact_filter else torch.zeros_like(filtered))
    adv = adv * keep[:, None].to(adv.dtype)

    diag: dict[str, float] = {}
    idx = span_index(mask)
    alpha = torch.ones(idx.num_spans)
    if cfg.enabled and idx.num_spans:
        ent = _pad_cat([_entropy(e, cfg.entropy_source) for e in experiences], width)
        groups = torch.div(rows_index, n_samples_per_prompt, rounding_mode="floor")  # (N,)
        span_group = idx.group(groups)
        labels = scope_labels(cfg.scope, span_group, idx.traj)
        span_valid = keep[idx.traj]
        adv, alpha = apply_aem(
            adv, ent, idx, labels, span_valid, lam=cfg.lam, min_range=cfg.min_range, reverse=cfg.reverse
        )
        h = span_mean(ent, idx)
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
    for k, v in diag.items():  # batch-level values repeated per sample so they survive batching
        per[f"aem_{k}"] = torch.full((n,), float(v))
    start = 0
    for exp, w in zip(experiences, widths, strict=True):
        b = exp.action_mask.shape[0]
        exp.advantages = adv[start : start + b, :w].to(exp.advantages.dtype)
        for k, v in per.items():
            exp.info[k] = v[start : start + b]
        if hasattr(exp.action_log_probs, ENTROPY_ATTR):  # don't ship (B, A) entropy to the trainer ranks
            delattr(exp.action_log_probs, ENTROPY_ATTR)
        start += b


def wrap_compute_advantages(original: Callable[..., list[Any]], cfg: AemConfig) -> Callable[..., list[Any]]:
    """`RemoteExperienceMaker.compute_advantages_and_returns` → the same plus our pre/post steps."""
    if getattr(original, PATCHED_MARK, False):
        return original

    def compute_advantages_and_returns(self, experiences, *args, **kwargs):
        zero_filtered_rewards(experiences, cfg)
        experiences = original(self, experiences, *args, **kwargs)
        modulate_experiences(experiences, self.strategy.args.rollout.n_samples_per_prompt, cfg)
        return experiences

    compute_advantages_and_returns.__wrapped__ = original  # type: ignore[attr-defined]
    setattr(compute_advantages_and_returns, PATCHED_MARK, True)
    return compute_advantages_and_returns
