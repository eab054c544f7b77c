"""HFLocalPolicy's sampler (`swe_rl.policy.sampling._sample`): one uniform per sampled row, inverted through the CDF;
min_p, top_k and top_p in vLLM's order, from `topk` before any full sort. Checked by frequencies over many rows
(5 sigma), against a full-sort reference at Qwen's vocabulary, and for what a seed promises. `sampler_frequencies`
also runs on CUDA (tests/gpu)."""

from __future__ import annotations

import math

import pytest
import torch

from swe_rl.policy.sampling import _cutoff, _sample, _uniforms

P = [0.5, 0.25, 0.15, 0.1, 0.0]  # the last token can never be drawn
QWEN_VOCAB = 151936
CASES = {  # temp, top_p, top_k, min_p
    "T1": (1.0, 1.0, -1, 0.0),
    "T2": (2.0, 1.0, -1, 0.0),
    "T0.5": (0.5, 1.0, -1, 0.0),
    "p0.7": (1.0, 0.7, -1, 0.0),
    "p0.45": (1.0, 0.45, -1, 0.0),  # only the first (0.5 itself sits on a rounding edge)
    "k2": (1.0, 1.0, 2, 0.0),
    "k3p0.6": (1.0, 0.6, 3, 0.0),  # top_p over top_k's renormalized three
    "minp0.25": (1.0, 1.0, -1, 0.25),
    "minp0.25p0.8": (1.0, 0.8, -1, 0.25),  # top_p over min_p's survivors
    "T2k3minp0.5": (2.0, 1.0, 3, 0.5),
}


def sampler_frequencies(
    device: str, temp: float, top_p: float, top_k: int = -1, min_p: float = 0.0, rows: int = 40000,
    head_draw: bool = False,
) -> torch.Tensor:  # fmt: skip
    """Token frequencies of `rows` independent draws (one step, every row the same distribution P); `head_draw`:
    as the generation loop calls the sampler when every row truncates (the draw among the kept top tokens)."""
    # log(0) as a very negative finite logit: its probability underflows to exactly 0 (a model's logits are finite)
    logits = torch.tensor(P, device=device).log().clamp_min(-1e4).expand(rows, -1).contiguous()

    def full(v: float, dtype: torch.dtype = torch.float32) -> torch.Tensor:
        return torch.full((rows,), v, dtype=dtype, device=device)

    greedy = torch.zeros(rows, dtype=torch.bool, device=device)
    tok, lp, ent = _sample(logits, full(temp), full(top_p), greedy, [None] * rows, top_ks=full(top_k, torch.long),
                           min_ps=full(min_p), all_truncate=head_draw,
                           first_k=top_k + 1 if head_draw and top_k > 0 else 256)  # fmt: skip
    assert torch.isfinite(lp).all() and torch.isfinite(ent).all()
    return torch.bincount(tok.cpu(), minlength=len(P)).double() / rows


def expected(temp: float, top_p: float, top_k: int = -1, min_p: float = 0.0) -> list[float]:
    """vLLM's order: temperature, min_p (x the top probability), top_k, top_p (mass before a token <= top_p), each
    on what the previous step left, renormalized. P is in descending order."""
    q = [p ** (1 / temp) for p in P]
    q = [x / sum(q) for x in q]
    q = [x if x >= min_p * max(q) else 0.0 for x in q]
    q = [x if top_k <= 0 or r < top_k else 0.0 for r, x in enumerate(q)]
    q = [x / sum(q) for x in q]
    kept, mass = [], 0.0
    for x in q:
        kept.append(x if mass <= top_p and x > 0 else 0.0)
        mass += x
    return [x / sum(kept) for x in kept]


def assert_frequencies(freq: torch.Tensor, want: list[float], rows: int = 40000) -> None:
    for tok, (f, w) in enumerate(zip(freq.tolist(), want, strict=True)):
        if w == 0:
            assert f == 0, f"token {tok} has probability 0 and was drawn ({f:.4f})"
        else:
            assert abs(f - w) <= 5 * math.sqrt(w * (1 - w) / rows) + 1e-12, (
                f"token {tok}: {f:.4f}, expected {w:.4f}"
            )


@pytest.mark.parametrize("case", sorted(CASES))
def test_sampled_frequencies_follow_the_distribution(case):
    torch.manual_seed(0)
    assert_frequencies(sampler_frequencies("cpu", *CASES[case]), expected(*CASES[case]))


@pytest.mark.parametrize("case", ["k2", "k3p0.6", "T2k3minp0.5"])
def test_the_draw_among_the_kept_top_tokens_follows_the_distribution(case):
    torch.manual_seed(0)
    assert_frequencies(sampler_frequencies("cpu", *CASES[case], head_draw=True), expected(*CASES[case]))


def test_the_cases_differ_from_plain_sampling():
    """Each case's distribution is not the plain one, so a sampler that ignored its setting fails that case."""
    plain = expected(1.0, 1.0)
    for case, args in CASES.items():
        if case != "T1":
            assert max(abs(a - b) for a, b in zip(expected(*args), plain, strict=True)) > 0.05, case


def _full_sort_reference(probs: torch.Tensor, top_p: float, top_k: int, min_p: float) -> list[set[int]]:
    """The kept token set per row, vLLM's way, over a full sort (a token tied with the last kept one is kept)."""
    out = []
    for row in probs:
        sp, idx = row.double().sort(descending=True)
        sp = torch.where(sp >= min_p * sp[0], sp, 0)
        if top_k > 0:
            sp[top_k:] = 0
        sp = sp / sp.sum()
        keep = ((sp.cumsum(0) - sp) <= top_p) & (sp > 0)
        cut = row[idx[keep]].min()
        out.append(set(torch.nonzero(row >= cut).flatten().tolist()))
    return out


@pytest.mark.parametrize("first_k", [256, 8], ids=["k256", "k8-escalates"])
@pytest.mark.parametrize(
    "top_p,top_k,min_p", [(0.9, -1, 0.0), (1.0, 40, 0.0), (0.9, 40, 0.0), (1.0, -1, 0.05), (0.9, -1, 0.02)]
)
def test_truncation_from_topk_equals_a_full_sort_at_qwen_vocab(top_p, top_k, min_p, first_k):
    """Peaked rows (a trained model's) and a flat row that needs the whole sort, in one batch."""
    g = torch.Generator().manual_seed(0)
    peaked = torch.randn(3, QWEN_VOCAB, generator=g) * 6
    flat = torch.randn(1, QWEN_VOCAB, generator=g) * 0.01
    probs = torch.softmax(torch.cat([peaked, flat]), dim=-1)
    want = _full_sort_reference(probs, top_p, top_k, min_p)
    cut = _cutoff(
        probs, torch.full((4,), top_p), torch.full((4,), top_k), torch.full((4,), min_p), first_k=first_k
    )
    got = [set(torch.nonzero(probs[r] >= cut[r]).flatten().tolist()) for r in range(4)]
    assert got == want
    if top_k < 0 and min_p == 0:
        assert len(want[3]) > 0.85 * QWEN_VOCAB  # the flat row kept most of the vocabulary


def test_top_k_keeps_every_token_tied_with_the_kth_as_vllm_does():
    torch.manual_seed(0)
    n = 4000
    logits = torch.tensor([2.0, 2.0, 1.0, 0.0]).expand(n, 4).contiguous()
    tok, _, _ = _sample(logits, torch.ones(n), torch.ones(n), torch.zeros(n, dtype=torch.bool), [None] * n,
                        top_ks=torch.ones(n, dtype=torch.long), min_ps=torch.zeros(n))  # fmt: skip
    counts = torch.bincount(tok, minlength=4).tolist()
    assert counts[2] == counts[3] == 0 and min(counts[:2]) > 0.45 * n, counts


def test_rows_that_do_not_truncate_draw_from_the_whole_vocabulary():
    """A batch mixing a top_k row with a plain one: the plain row's draws reach beyond the truncated width."""
    torch.manual_seed(0)
    logits = torch.randn(2, QWEN_VOCAB) * 0.01
    top5 = set(logits[0].topk(5).indices.tolist())
    draws = [
        _sample(
            logits,
            torch.ones(2),
            torch.ones(2),
            torch.zeros(2, dtype=torch.bool),
            [None, None],
            top_ks=torch.tensor([5, -1]),
            min_ps=torch.zeros(2),
        )[0].tolist()
        for _ in range(50)
    ]
    assert all(t[0] in top5 for t in draws)
    head = set(logits[1].topk(256).indices.tolist())  # the truncated rows' width
    assert sum(t[1] not in head for t in draws) > 40, (
        "the untruncated row was cut to the truncated rows' width"
    )


@pytest.mark.parametrize("neighbours", ["flat", "top_k_1000", "unseeded"])
def test_a_seeded_row_samples_the_same_tokens_whatever_shares_its_batch(neighbours):
    """bf16-rounded logits (ties, as a bf16 model gives them) at top_p 0.95: the row's draws must not depend on the
    rows beside it, even those that change how many tokens the truncation looks at."""
    g = torch.Generator().manual_seed(1)
    row = (torch.randn(1, QWEN_VOCAB, generator=g) * 3).bfloat16().float()
    other = (
        (torch.randn(2, QWEN_VOCAB, generator=g) * (0.01 if neighbours == "flat" else 3)).bfloat16().float()
    )
    k_other = 1000 if neighbours == "top_k_1000" else -1

    def draw(
        logits: torch.Tensor, seeds: list[int | None], top_ks: list[int], steps: int = 40
    ) -> list[list[int]]:
        gens = [None if s is None else torch.Generator().manual_seed(s) for s in seeds]
        n, out = len(logits), []
        for _ in range(steps):
            tok, _, _ = _sample(logits, torch.ones(n), torch.full((n,), 0.95), torch.zeros(n, dtype=torch.bool),
                                gens, top_ks=torch.tensor(top_ks), min_ps=torch.zeros(n))  # fmt: skip
            out.append(tok.tolist())
        return out

    alone = [t[0] for t in draw(row, [7], [-1])]
    seeds = [None, 7, None] if neighbours == "unseeded" else [3, 7, 5]
    batched = [t[1] for t in draw(torch.cat([other[:1], row, other[1:]]), seeds, [k_other, -1, k_other])]
    assert alone == batched
    assert len(set(alone)) > 10, "forty draws from a spread distribution should not mostly agree"


def test_a_seeded_rows_uniforms_come_from_its_seed_on_any_device():
    """A seeded row's uniforms are its CPU generator's, whatever the device the batch is on (a CUDA generator's
    stream differs from the CPU's, so drawing there would give one seed other tokens on a GPU); unseeded rows draw
    from the global generator of the device. `meta` stands in for a device other than the CPU."""

    def draws(seeds: list[int | None], device: str, steps: int = 5) -> torch.Tensor:
        gens = [None if s is None else torch.Generator().manual_seed(s) for s in seeds]
        return torch.stack([_uniforms(gens, device) for _ in range(steps)], dim=1)  # (B, steps)

    def own(seed: int, steps: int = 5) -> torch.Tensor:
        return 1.0 - torch.rand(steps, dtype=torch.float64, generator=torch.Generator().manual_seed(seed))

    mixed = draws([11, None, 12, None], "cpu")
    assert torch.equal(mixed[0], own(11)) and torch.equal(mixed[2], own(12))
    assert torch.equal(draws([12], "cpu")[0], own(12)), "alone or beside unseeded rows: the same draws"
    assert ((mixed > 0) & (mixed <= 1)).all()
    assert not torch.equal(mixed[1], mixed[3]), "unseeded rows draw independently"
    for seeds in ([11, 12], [11, None]):
        gens = [None if s is None else torch.Generator().manual_seed(s) for s in seeds]
        out = torch.stack([_uniforms(gens, "meta") for _ in range(5)], dim=1)
        assert out.device.type == "meta" and out.shape == (2, 5), "the uniforms land on the batch's device"
        after = torch.Generator().manual_seed(11)
        after.set_state(gens[0].get_state())
        assert torch.equal(1.0 - torch.rand(1, dtype=torch.float64, generator=after), own(11, 6)[5:]), (
            "five draws on another device must be five draws of the row's CPU generator"
        )


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


def test_the_sampler_makes_no_tensor_off_its_inputs_device():
    """Device guard (as tests/algo/test_device_placement.py): CPU inputs under torch's `meta` default device, so a
    tensor made without the inputs' device lands on `meta` and fails next to them. Every path: greedy, plain,
    truncating (escalating to a full sort), mixed seeded and unseeded rows."""
    g = torch.Generator().manual_seed(3)
    logits = torch.cat([torch.randn(2, 2000, generator=g) * 4, torch.zeros(2, 2000)])
    n = len(logits)
    gens = [torch.Generator().manual_seed(1), None, None, torch.Generator().manual_seed(2)]
    with torch.device("meta"):
        for trunc in (False, True):
            tok, lp, ent = _sample(
                logits, torch.tensor([0.7, 1.0, 1.3, 1.0], device="cpu"),
                torch.tensor([0.9, 1.0, 0.95, 0.5], device="cpu"), torch.tensor([False, True, False, False], device="cpu"),
                gens, top_ks=torch.tensor([-1, -1, 20, -1], device="cpu"),
                min_ps=torch.tensor([0.05, 0.0, 0.0, 0.0], device="cpu"), truncate=trunc,
            )  # fmt: skip
            assert tok.device.type == lp.device.type == ent.device.type == "cpu"
        tok, _, _ = _sample(logits, torch.ones(n, device="cpu"), torch.ones(n, device="cpu"),
                            torch.ones(n, dtype=torch.bool, device="cpu"), [None] * n, all_greedy=True)  # fmt: skip
        assert tok.device.type == "cpu"
