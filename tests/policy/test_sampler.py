"""HFLocalPolicy's sampler (`swe_rl.policy.hf._sample`): one uniform per sampled row, inverted through the CDF, and
top-p from `topk` before any full sort. Checked by frequencies over many rows (5 sigma), against a full-sort
nucleus at Qwen's vocabulary, and for what a seed promises. `sampler_frequencies` also runs on CUDA (tests/gpu)."""

from __future__ import annotations

import math

import pytest
import torch

from swe_rl.policy.hf import _nucleus, _sample

P = [0.5, 0.25, 0.15, 0.1, 0.0]  # the last token can never be drawn
QWEN_VOCAB = 151936


def sampler_frequencies(device: str, temp: float, top_p: float, rows: int = 40000) -> torch.Tensor:
    """Token frequencies of `rows` independent draws (one step, every row the same distribution P)."""
    # log(0) as a very negative finite logit: its probability underflows to exactly 0 (a model's logits are finite)
    logits = torch.tensor(P, device=device).log().clamp_min(-1e4).expand(rows, -1).contiguous()
    temps = torch.full((rows,), temp, device=device)
    top_ps = torch.full((rows,), top_p, device=device)
    greedy = torch.zeros(rows, dtype=torch.bool, device=device)
    tok, lp, ent = _sample(logits, temps, top_ps, greedy, [None] * rows)
    assert torch.isfinite(lp).all() and torch.isfinite(ent).all()
    return torch.bincount(tok.cpu(), minlength=len(P)).double() / rows


def expected(temp: float, top_p: float) -> list[float]:
    q = [p ** (1 / temp) for p in P]
    q = [x / sum(q) for x in q]
    kept, mass = [], 0.0
    for x in q:  # P is in descending order: keep while the mass before a token is within top_p
        kept.append(x if mass <= top_p and x > 0 else 0.0)
        mass += x
    return [x / sum(kept) for x in kept]


def assert_frequencies(freq: torch.Tensor, want: list[float], rows: int = 40000) -> None:
    for tok, (f, w) in enumerate(zip(freq.tolist(), want, strict=True)):
        if w == 0:
            assert f == 0, f"token {tok} has probability 0 and was drawn ({f:.4f})"
        else:
            assert abs(f - w) < 5 * math.sqrt(w * (1 - w) / rows), f"token {tok}: {f:.4f}, expected {w:.4f}"


@pytest.mark.parametrize(
    "temp,top_p",
    [(1.0, 1.0), (2.0, 1.0), (0.5, 1.0), (1.0, 0.7), (1.0, 0.5)],
    ids=["T1", "T2", "T0.5", "p0.7", "p0.5"],
)
def test_sampled_frequencies_follow_the_distribution(temp, top_p):
    torch.manual_seed(0)
    assert_frequencies(sampler_frequencies("cpu", temp, top_p), expected(temp, top_p))


def _full_sort_nucleus(probs: torch.Tensor, top_p: float) -> list[set[int]]:
    sp, idx = probs.sort(dim=-1, descending=True)
    keep = (sp.cumsum(-1) - sp) <= top_p
    return [set(idx[r][keep[r]].tolist()) for r in range(len(probs))]


def test_nucleus_from_topk_equals_a_full_sort_at_qwen_vocab():
    """Peaked rows (a trained model's) are settled by the first 256; a flat row forces the whole sort."""
    g = torch.Generator().manual_seed(0)
    peaked = torch.randn(3, QWEN_VOCAB, generator=g) * 6
    flat = torch.randn(1, QWEN_VOCAB, generator=g) * 0.01
    probs = torch.softmax(torch.cat([peaked, flat]), dim=-1)
    top_ps = torch.full((4,), 0.9)
    idx, kept = _nucleus(probs[:3], top_ps[:3])
    assert idx.shape[-1] == 256, "peaked rows should need only the first topk"
    want = _full_sort_nucleus(probs, 0.9)
    for r in range(3):
        assert set(idx[r][kept[r] > 0].tolist()) == want[r], f"row {r}"
    idx, kept = _nucleus(probs, top_ps)
    assert idx.shape[-1] == QWEN_VOCAB, "a flat row needs the whole vocabulary"
    for r in range(4):
        assert set(idx[r][kept[r] > 0].tolist()) == want[r], f"row {r}"
    assert len(want[3]) > 0.85 * QWEN_VOCAB


def test_a_seeded_row_samples_the_same_tokens_whatever_shares_its_batch():
    g = torch.Generator().manual_seed(1)
    row = torch.randn(1, QWEN_VOCAB, generator=g) * 3
    others = torch.randn(3, QWEN_VOCAB, generator=g) * 3

    def draw(logits: torch.Tensor, seeds: list[int | None], steps: int = 6) -> list[list[int]]:
        gens = [None if s is None else torch.Generator().manual_seed(s) for s in seeds]
        n = len(logits)
        out = []
        for _ in range(steps):
            tok, _, _ = _sample(
                logits, torch.ones(n), torch.full((n,), 0.95), torch.zeros(n, dtype=torch.bool), gens
            )
            out.append(tok.tolist())
        return out

    alone = [t[0] for t in draw(row, [7])]
    batched = [t[2] for t in draw(torch.cat([others[:2], row, others[2:]]), [None, 3, 7, None])]
    assert alone == batched
    assert len(set(alone)) > 1, "six draws from a spread distribution should not all agree"


def test_greedy_rows_take_the_argmax_and_an_all_greedy_step_draws_nothing():
    g = torch.Generator().manual_seed(2)
    logits = torch.randn(4, QWEN_VOCAB, generator=g) * 3
    greedy = torch.tensor([True, False, True, False])
    state = torch.get_rng_state()
    tok, lp, ent = _sample(logits, torch.ones(4), torch.ones(4), greedy, [None] * 4)
    assert tok[0] == logits[0].argmax() and tok[2] == logits[2].argmax()
    assert not torch.equal(torch.get_rng_state(), state), (
        "the sampled rows draw from torch's global generator"
    )
    logp = torch.log_softmax(logits, -1)
    torch.testing.assert_close(lp, logp.gather(-1, tok[:, None]).squeeze(-1))
    torch.testing.assert_close(ent, -(logp.exp() * logp).sum(-1))
    state = torch.get_rng_state()
    tok, _, _ = _sample(logits, torch.ones(4), torch.ones(4), torch.ones(4, dtype=torch.bool), [None] * 4,
                        all_greedy=True, unit_temps=True)  # fmt: skip
    assert torch.equal(tok, logits.argmax(-1))
    assert torch.equal(torch.get_rng_state(), state), (
        "an all-greedy step must not advance the global generator"
    )
