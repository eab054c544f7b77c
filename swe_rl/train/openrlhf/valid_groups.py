"""Group statistics over valid members only, with OpenRLHF's own estimator and dynamic filter run verbatim.

An infrastructure failure (`swe_rl_valid` = 0) is scored 0 by the executor so that OpenRLHF can batch it, but it
must not count as a real 0 in its group, or 7 solved + 1 sandbox failure would give each solved episode +0.354
and pass the dynamic filter. swe_rl.algo leaves invalid members out of the group statistics; here:
- the baseline: `valid_only_advantages` runs upstream's `compute_advantages_and_returns` once per group size c
  (the number of valid members), on the valid rows of the groups of that size, with n_samples_per_prompt = c.
  Invalid rows and groups with < 2 valid members get advantage 0 (swe_rl.algo's singleton="zero");
- dynamic filtering: `impute_invalid_scores` gives each invalid member its group's valid mean score, so
  upstream's group mean equals the valid members' mean (no valid member: the range floor, i.e. rejected).
A batch without invalid rows takes upstream's call unchanged.
"""

from __future__ import annotations

import contextlib
import copy
from collections import Counter, defaultdict
from collections.abc import Callable, Iterator
from typing import Any

import torch
from torch import Tensor

VALID_KEY = "swe_rl_valid"  # info / extra_logs key: 0 = infrastructure failure


def row_valid(exp: Any) -> Tensor:
    """(B,) bool: the executor's validity flag of each row (1 where the key is absent)."""
    b, dev = exp.action_mask.shape[0], exp.action_mask.device
    v = exp.info.get(VALID_KEY)
    return (
        torch.ones(b, dtype=torch.bool, device=dev)
        if v is None
        else torch.as_tensor(v, device=dev).reshape(b) > 0
    )


def take_rows(exp: Any, rows: Tensor) -> Any:
    """A shallow copy of an Experience holding only `rows` (B,) bool: every per-row tensor, list and info entry."""
    b = rows.shape[0]
    idx = rows.nonzero().flatten()
    out = copy.copy(exp)

    def pick(v: Any) -> Any:
        if isinstance(v, Tensor) and v.dim() > 0 and v.shape[0] == b:
            return v[idx.to(v.device)]  # info tensors may sit on another device than the masks
        if isinstance(v, list) and len(v) == b:
            return [v[i] for i in idx.tolist()]
        return v

    for name, value in vars(exp).items():
        out.__dict__[name] = {k: pick(t) for k, t in value.items()} if name == "info" else pick(value)
    return out


@contextlib.contextmanager
def group_size(args: Any, n: int) -> Iterator[None]:
    """Upstream reads the group size from args.rollout.n_samples_per_prompt (the trainer is single-threaded)."""
    old = args.rollout.n_samples_per_prompt
    args.rollout.n_samples_per_prompt = n
    try:
        yield
    finally:
        args.rollout.n_samples_per_prompt = old


def _partitions(experiences: list[Any], n: int) -> dict[int, list[tuple[int, Tensor, list[int]]]]:
    """{valid count c: [(experience position, rows (B,) bool, new indices)]} for c >= 2. New indices number the
    valid members of the c-sized groups so that consecutive blocks of c are one group (upstream's reshape)."""
    valid = {i: bool(v) for e in experiences for i, v in zip(e.index, row_valid(e).tolist(), strict=True)}
    count = Counter(i // n for i, v in valid.items() if v)
    rank: dict[int, int] = {}  # old index → new index within its class
    next_group: dict[int, int] = defaultdict(int)
    for g in sorted(count):
        c = count[g]
        members = sorted(i for i in valid if i // n == g and valid[i])
        base = next_group[c] * c
        next_group[c] += 1
        rank.update({i: base + m for m, i in enumerate(members)})
    parts: dict[int, list[tuple[int, Tensor, list[int]]]] = defaultdict(list)
    for pos, e in enumerate(experiences):
        for c in set(count.values()) - {0, 1}:
            rows = torch.tensor(
                [valid[i] and count[i // n] == c for i in e.index],
                dtype=torch.bool,
                device=e.action_mask.device,
            )
            if bool(rows.any()):
                parts[c].append(
                    (pos, rows, [rank[i] for i, r in zip(e.index, rows.tolist(), strict=True) if r])
                )
    return parts


def _zeroed(exp: Any) -> None:
    """Advantage, return and their logs 0 for every row (overwritten below for rows that are computed)."""
    b, dev = exp.action_mask.shape[0], exp.action_mask.device
    exp.advantages = torch.zeros(exp.action_mask.shape, dtype=torch.float32, device=dev)
    exp.returns = torch.zeros(exp.action_mask.shape, dtype=torch.float32, device=dev)
    exp.info["return"] = torch.zeros(b, device=dev)
    exp.info["group_reward_std"] = torch.zeros(b, device=dev)
    exp.rewards = exp.rewards.to(torch.promote_types(exp.rewards.dtype, torch.float32))


def _write_rows(dst: Any, rows: Tensor, src: Any) -> None:
    idx = rows.nonzero().flatten()
    for name in ("advantages", "returns", "rewards"):
        full = getattr(dst, name)
        part = getattr(src, name)
        full = full.to(torch.promote_types(full.dtype, part.dtype))
        full[idx.to(full.device)] = part.to(full.device, full.dtype)
        setattr(dst, name, full)
    for k, v in src.info.items():
        if k not in dst.info:
            dst.info[k] = torch.zeros(rows.shape[0], dtype=v.dtype, device=v.device)
        info = dst.info[k]
        info[idx.to(info.device)] = v.to(info.device, info.dtype)


def valid_only_advantages(
    original: Callable[[list[Any]], list[Any]], experiences: list[Any], args: Any
) -> list[Any]:
    """Upstream's estimator (`original(experiences)`, verbatim) with group statistics over valid members only."""
    if all(bool(row_valid(e).all()) for e in experiences):
        return original(experiences)
    n = args.rollout.n_samples_per_prompt
    parts = _partitions(experiences, n)
    for e in experiences:
        _zeroed(e)
    for c, members in sorted(parts.items()):
        subs = []
        for pos, rows, new_index in members:
            sub = take_rows(experiences[pos], rows)
            sub.index = new_index
            subs.append(sub)
        with group_size(args, c):
            subs = original(subs)
        for (pos, rows, _), sub in zip(members, subs, strict=True):
            _write_rows(experiences[pos], rows, sub)
    for e in experiences:
        e.kl = None  # as upstream leaves it
    return experiences


def impute_invalid_scores(responses: list[dict], floor: float) -> list[dict]:
    """One prompt group of executor responses: each invalid member's `scores` := the valid members' mean (no valid
    member: `floor`, the dynamic filter's open lower bound, so the group is rejected). Rewards are untouched."""
    valid = [bool(r.get("extra_logs", {}).get(VALID_KEY, 1.0)) for r in responses]
    if all(valid):
        return responses
    scores = [float(r["scores"]) for r, v in zip(responses, valid, strict=True) if v]
    fill = sum(scores) / len(scores) if scores else floor
    return [r if v else {**r, "scores": fill} for r, v in zip(responses, valid, strict=True)]
