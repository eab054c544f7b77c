"""The OpenRLHF seams on the experiences' own device: compact-filter rewards, valid-member group statistics with
upstream's estimator run verbatim, AEM over the whole batch, the action-span attachment.

On the CPU (default suite) the experiences are host tensors while torch's default device is `meta`, so any tensor
our seam makes without a device next to them fails (upstream's own estimator runs outside that trap); with the
`gpu` marker the same experiences live on CUDA. Both must give the plain CPU run's results.
"""

from __future__ import annotations

import contextlib
import types
from collections.abc import Callable
from typing import Any

import pytest
import torch

from swe_rl.train.openrlhf.aem_seam import (
    ACTION_KEY,
    ACTION_RANGES_KEY,
    FILTER_KEY,
    MASKED_KEY,
    VALID_KEY,
    advantages_with_seam,
    attach_action_part,
)
from swe_rl.train.openrlhf.config import AemConfig
from tests.device_cases import device_under_test

N = 8  # samples per prompt: 2 prompts, micro-batches of 5 / 6 / 5 in shuffled order
ORDER = [3, 12, 0, 9, 15, 6, 1, 14, 8, 2, 11, 5, 13, 7, 10, 4]
REWARDS = [1.0] * 7 + [0.0] + [1.0, 0.0, 1.0, 0.0, 0.0, 1.0, 0.0, 1.0]
VALID = [1.0] * 7 + [0.0] + [1.0] * 6 + [0.0, 1.0]
FILTERED = {2: 1.0, 9: 1.0}
MASKED = {11: 1.0}
AEMS = {
    "group": AemConfig(compact_filter=True),
    "batch_reverse": AemConfig(scope="batch", reverse=True),
    "action_span": AemConfig(entropy_span="action"),
    "surprisal": AemConfig(entropy_source="surprisal", scope="trajectory"),
    "off": AemConfig(enabled=False, compact_filter=True),
}


def _upstream_args(orl_parse: Callable[[list[str]], Any]) -> Any:
    return orl_parse(
        ["--actor.model_name_or_path", "m", "--rollout.n_samples_per_prompt", str(N), "--algo.kl.init_coef", "0",
         "--algo.advantage.estimator", "group_norm", "--train.agent_func_path", "/x/agent.py"]
    )  # fmt: skip


def _batch(orl_experience, device: str) -> tuple[list[Any], list[torch.Tensor]]:
    """Experiences with validity / filter / mask flags, exact entropy and action parts, all on `device`."""
    g = torch.Generator().manual_seed(0)
    exps, ents, start = [], [], 0
    for size in (5, 6, 5):
        idx = ORDER[start : start + size]
        masks = [[0, 1, 1, 0, 0, 1, 1, 1, 1, 0, 1, 1][: 10 + size % 3] for _ in idx]
        info = {VALID_KEY: [VALID[i] for i in idx], FILTER_KEY: [FILTERED.get(i, 0.0) for i in idx],
                MASKED_KEY: [MASKED.get(i, 0.0) for i in idx]}  # fmt: skip
        exp = orl_experience(masks, idx, [REWARDS[i] for i in idx], **info)
        exp.kl = torch.zeros(exp.action_mask.shape)
        exp.action_log_probs = -torch.rand(exp.action_mask.shape, generator=g) * exp.action_mask
        part = exp.action_mask.clone()
        part[:, 1] = False  # the first token of each turn is reasoning, the rest its action
        exp.info[ACTION_KEY] = part
        ents.append((torch.rand(exp.action_mask.shape, generator=g) * 2.0 * exp.action_mask).to(device))
        for name in ("sequences", "attention_mask", "action_mask", "action_log_probs", "rewards", "kl"):
            setattr(exp, name, getattr(exp, name).to(device))
        exp.info = {k: v.to(device) for k, v in exp.info.items()}
        exps.append(exp)
        start += size
    return exps, ents


def _outside_trap(fn: Callable[..., Any]) -> Callable[..., Any]:
    """Upstream's estimator is not ours to guard: it runs with the CPU as default device (its own index tensor
    is a host tensor, which indexing accepts on any device)."""

    def call(*a: Any, **k: Any) -> Any:
        with torch.device("cpu"):
            return fn(*a, **k)

    return call


def _run(orl_experience, orl_estimator, orl_parse, aem: AemConfig, device: str, trap: bool) -> list[dict]:
    args = _upstream_args(orl_parse)
    exps, ents = _batch(orl_experience, device)
    original = _outside_trap(orl_estimator(args).compute_advantages_and_returns)
    response = {"observation_tokens": list(range(14)), ACTION_RANGES_KEY: [(2, 5), (8, 12)]}
    with torch.device("meta") if trap else contextlib.nullcontext():
        out = advantages_with_seam(original, exps, args, aem, ents)
        attached = attach_action_part(
            types.SimpleNamespace(info={}, action_mask=exps[0].action_mask), response, 12
        )
    rows = [
        {"advantages": e.advantages, "action_mask": e.action_mask, "rewards": e.rewards,
         **{k: v for k, v in e.info.items() if isinstance(v, torch.Tensor)}}
        for e in out
    ]  # fmt: skip
    rows.append({"action_part": attached.info[ACTION_KEY]})
    for row in rows:
        for k, v in row.items():
            assert v.device.type == torch.device(device).type, f"{k} on {v.device}, expected {device}"
    return [{k: v.detach().cpu() for k, v in row.items()} for row in rows]


def _same(want: list[dict], got: list[dict], exact: bool) -> None:
    assert len(want) == len(got)
    for a, b in zip(want, got, strict=True):
        assert a.keys() == b.keys()
        for k in a:
            tol = {"rtol": 0, "atol": 0} if exact else {"rtol": 1e-5, "atol": 1e-5}
            torch.testing.assert_close(b[k], a[k], **tol, msg=k)


@pytest.mark.parametrize("aem", sorted(AEMS))
def test_seam_makes_no_tensor_on_the_default_device(orl_experience, orl_estimator, orl_parse, aem):
    want = _run(orl_experience, orl_estimator, orl_parse, AEMS[aem], "cpu", trap=False)
    got = _run(orl_experience, orl_estimator, orl_parse, AEMS[aem], "cpu", trap=True)
    _same(want, got, exact=True)


@pytest.mark.gpu
@pytest.mark.parametrize("aem", sorted(AEMS))
def test_seam_on_cuda_experiences_equals_cpu(orl_experience, orl_estimator, orl_parse, aem):
    want = _run(orl_experience, orl_estimator, orl_parse, AEMS[aem], "cpu", trap=False)
    got = _run(orl_experience, orl_estimator, orl_parse, AEMS[aem], device_under_test(), trap=False)
    _same(want, got, exact=False)
