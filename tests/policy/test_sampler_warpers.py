"""Our filtered sampler (swe_rl.policy.sampling) against transformers' own warpers, in the order `generate`
applies them (transformers 5.15 `_get_logits_processor`: TemperatureLogitsWarper, TopKLogitsWarper,
TopPLogitsWarper, then MinPLogitsWarper): the same kept tokens and the same probabilities (1e-6) at Qwen's
vocabulary; the draw from the K kept tokens gives, uniform for uniform, the token of a draw over the whole row, so
the sampled distribution is that filtered one. Where min_p is on with top_k / top_p, the orders differ (we apply
min_p first, as vLLM does), so min_p is checked alone."""

from __future__ import annotations

import pytest
import torch
from transformers.generation.logits_process import (
    MinPLogitsWarper,
    TemperatureLogitsWarper,
    TopKLogitsWarper,
    TopPLogitsWarper,
)

from swe_rl.policy.sampling import _draw_from_head, _inverse_cdf, _sample, _truncation

QWEN_VOCAB = 151936
CASES = {  # temperature, top_p, top_k, min_p
    "recipe T0.6 p0.95 k20": (0.6, 0.95, 20, 0.0),
    "T1 p0.9 k50": (1.0, 0.9, 50, 0.0),
    "k20 alone": (0.7, 1.0, 20, 0.0),
    "p0.8 alone": (1.0, 0.8, -1, 0.0),
    "min_p 0.05 alone": (1.0, 1.0, -1, 0.05),
}


def _logits(rows: int = 6) -> torch.Tensor:
    g = torch.Generator().manual_seed(0)
    peaked = (
        torch.randn(rows - 1, QWEN_VOCAB, generator=g) * 6
    )  # a trained model's rows: a few tokens hold most
    flat = torch.randn(1, QWEN_VOCAB, generator=g) * 0.5  # and a flat one, where top_p keeps thousands
    return torch.cat([peaked, flat])


def transformers_probs(
    logits: torch.Tensor, temp: float, top_p: float, top_k: int, min_p: float
) -> torch.Tensor:
    scores = logits.clone()
    ids = torch.zeros(len(logits), 1, dtype=torch.long)
    warpers = [TemperatureLogitsWarper(temp)]
    if top_k > 0:
        warpers.append(TopKLogitsWarper(top_k=top_k))
    if top_p < 1.0:
        warpers.append(TopPLogitsWarper(top_p=top_p))
    if min_p > 0:
        warpers.append(MinPLogitsWarper(min_p=min_p))
    for w in warpers:
        scores = w(ids, scores)
    return torch.softmax(scores, dim=-1)


def ours(logits: torch.Tensor, temp: float, top_p: float, top_k: int, min_p: float, first_k: int):
    n = len(logits)
    probs = torch.softmax(logits / temp, dim=-1)
    full = lambda v, dt=torch.float32: torch.full((n,), v, dtype=dt)  # noqa: E731
    cut, head, idx = _truncation(probs, full(top_p), full(top_k, torch.long), full(min_p) if min_p else None,
                                 max_top_k=top_k, first_k=first_k)  # fmt: skip
    kept = probs * (probs >= cut[:, None])
    return kept.double() / kept.double().sum(-1, keepdim=True), probs, cut, head, idx


@pytest.mark.parametrize("case", sorted(CASES))
def test_filtered_distribution_equals_transformers_warpers(case):
    temp, top_p, top_k, min_p = CASES[case]
    logits = _logits()
    want = transformers_probs(logits, temp, top_p, top_k, min_p)
    first_k = top_k + 1 if top_k > 0 else 256  # as the generation loop passes it
    got, _, _, head, _ = ours(logits, temp, top_p, top_k, min_p, first_k)
    for r in range(len(logits)):
        assert torch.equal(got[r] > 0, want[r] > 0), f"{case}, row {r}: another set of tokens is kept"
    assert (got - want.double()).abs().max() < 1e-6
    if top_k > 0:  # the truncation looked at top_k + 1 tokens, not the vocabulary
        assert head.shape[-1] == top_k + 1
    if case == "p0.8 alone":
        assert int((want[-1] > 0).sum()) > 1000  # the flat row: top_p keeps thousands, found past the first K


@pytest.mark.parametrize("case", sorted(CASES))
def test_the_draw_from_the_kept_head_is_the_draw_over_the_whole_row(case):
    temp, top_p, top_k, min_p = CASES[case]
    # the peaked rows: the flat one sends every row's truncation to a full sort, where the loop draws over the row
    logits = _logits()[:-1]
    _, probs, cut, head, idx = ours(logits, temp, top_p, top_k, min_p, top_k + 1 if top_k > 0 else 256)
    masked = probs.masked_fill(probs < cut[:, None], 0.0)
    for u in torch.linspace(1e-6, 1.0, 301, dtype=torch.float64):
        us = u.expand(len(logits))
        assert torch.equal(_draw_from_head(head, idx, cut, us), _inverse_cdf(masked, us))
    assert head.shape[-1] < QWEN_VOCAB // 4


def test_generation_loop_settings_sample_what_the_full_row_draw_samples():
    """_sample as the generation loop calls it (all_truncate, first_k = top_k + 1) and as it did before (the draw over
    the whole row, topk(256)) give the same tokens for the same seeds, with our log-probs and entropies."""
    logits = _logits(8)
    n = len(logits)
    temps, top_ps, top_ks = torch.full((n,), 0.6), torch.full((n,), 0.95), torch.full((n,), 20)
    greedy = torch.zeros(n, dtype=torch.bool)
    runs = []
    for fast in (True, False):
        gens = [torch.Generator().manual_seed(1000 + i) for i in range(n)]
        steps = [_sample(logits, temps, top_ps, greedy, gens, top_ks=top_ks, truncate=True, max_top_k=20,
                         all_truncate=fast, first_k=21 if fast else 256) for _ in range(30)]  # fmt: skip
        runs.append(steps)
    for (t1, lp1, h1), (t2, lp2, h2) in zip(*runs, strict=True):
        assert torch.equal(t1, t2) and torch.equal(lp1, lp2) and torch.equal(h1, h2)
    ref = torch.log_softmax(logits.double() / 0.6, -1)
    tok, lp, h = runs[0][0]
    torch.testing.assert_close(lp.double(), ref.gather(-1, tok[:, None]).squeeze(-1), rtol=0, atol=1e-5)
    torch.testing.assert_close(h.double(), -(ref.exp() * ref).sum(-1), rtol=0, atol=1e-4)


def test_entropy_and_logprobs_stay_fp32_under_bf16_autocast():
    """HFLocalPolicy(autocast=torch.bfloat16) samples inside autocast: the returned entropies and log-probs must be
    those of the fp32 logits (torch.linalg.vecdot, for one, would run in bf16)."""
    logits = _logits(4)
    n = len(logits)
    args = (logits, torch.full((n,), 0.6), torch.full((n,), 0.95), torch.zeros(n, dtype=torch.bool))
    kw = dict(top_ks=torch.full((n,), 20), truncate=True, max_top_k=20, all_truncate=True, first_k=21)
    want = _sample(*args, [torch.Generator().manual_seed(i) for i in range(n)], **kw)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        got = _sample(*args, [torch.Generator().manual_seed(i) for i in range(n)], **kw)
    assert torch.equal(got[0], want[0])
    for a, b in zip(got[1:], want[1:], strict=True):
        assert a.dtype == torch.float32
        torch.testing.assert_close(a, b, rtol=0, atol=1e-5)
