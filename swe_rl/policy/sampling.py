"""The sampler of `HFLocalPolicy`'s generation loop (swe_rl.policy.hf): one step's logits (B, V) -> token, log-prob
and exact entropy per row. One uniform per sampled row (its own seeded stream, `turn_seed`, or torch's global one),
inverted through the CDF in vocabulary order; min_p, top_k and top_p as vLLM applies them (min_p, then top_k, then
top_p), the kept set found among the K most likely tokens (`topk`, top_k + 1 of them when every row has a top_k)
and the draw made over those K alone, never a sort of the vocabulary. Its distribution equals transformers'
TemperatureLogitsWarper -> TopKLogitsWarper -> TopPLogitsWarper (generate's order) where min_p is off
(tests/policy/test_sampler_warpers.py).
"""

from __future__ import annotations

from typing import Any


def _sample(
    logits: Any,
    temps: Any,
    top_ps: Any,
    greedy: Any,
    gens: list[Any],
    *,
    top_ks: Any = None,
    min_ps: Any = None,
    truncate: bool | None = None,
    max_top_k: int | None = None,
    all_greedy: bool = False,
    unit_temps: bool = False,
    all_truncate: bool = False,
    first_k: int = 256,
) -> tuple[Any, Any, Any]:
    """logits (B, V) -> (token (B,), logprob (B,), entropy (B,)) at each row's temperature.

    A sampled row draws one uniform per step (from its own generator when seeded, else torch's global one) and
    inverts its CDF (float64 cumsum + searchsorted): one pass over the vocabulary, where `torch.multinomial` cost
    ~45 ms a step on two CPU cores at Qwen's 151,936 rows (bench/generate.py). Greedy rows take the argmax; a step
    whose rows are all greedy (`all_greedy`, host-side) draws nothing. Truncation as vLLM's sampler does it (min_p,
    then top_k, then top_p, each on the distribution left by the one before): `top_ks` (B,) long, <= 0 = off;
    `min_ps` (B,), 0 = off; None = off for every row. `truncate` (host-side: some row truncates) and `max_top_k`
    (host-side: the largest top_k) save device syncs; None = read them from the tensors. `unit_temps` (host-side:
    every row's temperature is 1, greedy rows' included) skips the division, a pass over (B, V). `all_truncate`
    (host-side: every sampled row truncates) lets the draw run over the K tokens the truncation kept
    (`_draw_from_head`, the same token as over the whole row) instead of a float64 cumsum of (B, V); `first_k` is
    the truncation's first K (top_k + 1 when every sampled row has a top_k: no sort of the vocabulary, one of
    K values). The log-prob and entropy are those of the tempered distribution before truncation (what the trainer
    recomputes). A row's token depends on its own logits and uniform only, never on the rows beside it (ties
    included)."""
    import torch

    # fp32 even inside HFLocalPolicy's bf16 autocast, which would run torch.linalg.vecdot (the entropy) in bf16
    with torch.autocast(device_type=logits.device.type, enabled=False):
        return _sample_fp32(logits, temps, top_ps, greedy, gens, top_ks, min_ps, truncate, max_top_k, all_greedy,
                            unit_temps, all_truncate, first_k)  # fmt: skip


def _sample_fp32(
    logits: Any, temps: Any, top_ps: Any, greedy: Any, gens: list[Any], top_ks: Any, min_ps: Any,
    truncate: bool | None, max_top_k: int | None, all_greedy: bool, unit_temps: bool, all_truncate: bool,
    first_k: int,
) -> tuple[Any, Any, Any]:  # fmt: skip
    """`_sample`'s body, with autocast off."""
    import torch

    scaled = logits if unit_temps else logits / temps[:, None]
    logp = torch.log_softmax(scaled, dim=-1)  # (B, V)
    probs = logp.exp()
    entropy = -torch.linalg.vecdot(probs, logp)  # sum(p * log p) without a (B, V) product in memory
    argmax = logits.argmax(-1)
    if all_greedy:
        return argmax, logp.gather(-1, argmax[:, None]).squeeze(-1), entropy
    if truncate is None:
        truncate = (
            bool((top_ps < 1.0).any())
            or (top_ks is not None and bool((top_ks > 0).any()))
            or (min_ps is not None and bool((min_ps > 0).any()))
        )
    u = _uniforms(gens, logits.device)  # (B,) in (0, 1]: never lands on a token of probability 0
    if not truncate:
        tok = _inverse_cdf(probs, u)
    else:  # min_p / top_k / top_p: the cut, found among the K most likely tokens
        cut, head, idx = _truncation(probs, top_ps, top_ks, min_ps, max_top_k=max_top_k, first_k=first_k)
        if (
            all_truncate and head.shape[-1] < probs.shape[-1]
        ):  # every sampled row's kept tokens are in the head
            tok = _draw_from_head(head, idx, cut, u)
        else:  # a row keeps the whole vocabulary: zero what the others drop, the draw over the whole row
            tok = _inverse_cdf(probs.masked_fill(probs < cut[:, None], 0.0), u)
    tok = torch.where(greedy, argmax, tok)
    return tok, logp.gather(-1, tok[:, None]).squeeze(-1), entropy


def _inverse_cdf(weights: Any, u: Any) -> Any:
    """(B, V) non-negative weights, (B,) uniforms in (0, 1] -> (B,) the index whose CDF interval holds u x total.
    The first index whose CDF reaches the value: a weight of 0 is never taken (its CDF equals its predecessor's)."""
    import torch

    cdf = weights.double().cumsum(-1)
    return torch.searchsorted(cdf, (u * cdf[:, -1])[:, None]).squeeze(-1).clamp_(max=cdf.shape[-1] - 1)


def _uniforms(gens: list[Any], device: Any) -> Any:
    """One uniform in (0, 1] per row, float64: a seeded row's from its own CPU generator, the others' from torch's
    global generator on the device in one draw. A seeded row's draws depend on its seed alone: not on which other
    rows share the batch, nor on the device (a CUDA generator's stream is not the CPU one's, so the seeded draws are
    made on the CPU and copied over: B numbers a step, no device sync). So one seed samples the same tokens on CUDA
    as on the CPU wherever the two devices' probabilities agree to the draw's resolution."""
    import torch

    free = sum(g is None for g in gens)
    glob = torch.rand(free, dtype=torch.float64, device=device)  # (0,) when every row is seeded
    if free == len(gens):
        return 1.0 - glob
    seeded = torch.cat(
        [torch.rand(1, dtype=torch.float64, device="cpu", generator=g) for g in gens if g is not None]
    ).to(device)
    if free == 0:
        return 1.0 - seeded
    parts, j, k = [], 0, 0
    for g in gens:
        if g is None:
            parts.append(glob[j : j + 1])
            j += 1
        else:
            parts.append(seeded[k : k + 1])
            k += 1
    return 1.0 - torch.cat(parts)


def _cutoff(
    probs: Any, top_ps: Any, top_ks: Any = None, min_ps: Any = None, *, max_top_k: int | None = None,
    first_k: int = 256,
) -> Any:  # fmt: skip
    """min_p, top_k and top_p per row as one number: the smallest probability the row keeps (B,), 0 for a row that
    truncates nothing (`_truncation`'s first result)."""
    return _truncation(probs, top_ps, top_ks, min_ps, max_top_k=max_top_k, first_k=first_k)[0]


def _truncation(
    probs: Any, top_ps: Any, top_ks: Any = None, min_ps: Any = None, *, max_top_k: int | None = None,
    first_k: int = 256,
) -> tuple[Any, Any, Any]:  # fmt: skip
    """min_p, top_k and top_p per row as one number, the cut: the smallest probability the row keeps (B,), 0 for a
    row that truncates nothing; with the K most likely tokens it was found among, (B, K) probabilities (descending)
    and their vocabulary indices. A token is kept iff its probability reaches the cut, so tokens tied with the last
    kept one are kept too (vLLM's top_k keeps every token tied with the k-th) and the kept set depends on the row
    alone.

    K starts at max(first_k, the largest top_k) (`topk`, a partial selection), then x16, then a full sort: a full
    sort of 151,936 rows costs ~100 ms a step on two CPU cores. K is enough once, in every truncating row, the K-th
    token falls below the cut: then every kept token is among the K (a caller that knows every row has a top_k
    passes first_k = top_k + 1, and one round does unless the k-th token ties with the next). One device sync per
    round. Masses in float64, as on the CPU, so a CUDA device keeps the same tokens at the top_p boundary."""
    import torch

    b, vocab = probs.shape
    dev = probs.device
    ks = torch.zeros(b, dtype=torch.long, device=dev) if top_ks is None else top_ks
    thr = torch.zeros(b, device=dev) if min_ps is None else min_ps * probs.max(-1).values  # min_p x top prob
    rows = (top_ps < 1.0) | (ks > 0) | (thr > 0)
    # what top_p is a fraction of: the top_k survivors (all inside the K), else the mass min_p leaves (1 without)
    kept_all = probs if min_ps is None else probs * (probs >= thr[:, None])
    survivors = kept_all.sum(-1, dtype=torch.float64)
    top_p = top_ps.double()
    k = min(vocab, max(first_k, int(ks.max()) if max_top_k is None else max_top_k))
    while True:
        head, idx = probs.topk(k, dim=-1) if k < vocab else probs.sort(dim=-1, descending=True)
        rank = torch.arange(k, device=dev)
        keep = (head >= thr[:, None]) & ((ks[:, None] <= 0) | (rank[None, :] < ks[:, None]))
        cum = (head * keep).double().cumsum(-1)
        z = torch.where(ks > 0, cum[:, -1], survivors)
        # top_p drops a token once the kept mass before it is past top_p of z; the first token is always kept
        keep &= ~((top_p[:, None] < 1.0) & ((cum - head.double() * keep) > top_p[:, None] * z[:, None]))
        last = (keep.sum(-1) - 1).clamp_(min=0)  # kept tokens are a prefix of the descending head
        cut = torch.where(rows, head.gather(-1, last[:, None]).squeeze(-1), torch.zeros_like(head[:, 0]))
        if k >= vocab or bool((~rows | (head[:, -1] < cut)).all()):
            return cut, head, idx
        # past a quarter of the vocabulary a topk costs what the full sort does
        k = k * 16 if k * 16 <= vocab // 4 else vocab


def _draw_from_head(head: Any, idx: Any, cut: Any, u: Any) -> Any:
    """The token the full-row inverse CDF would draw, from the K tokens that hold every kept one: the kept ones
    put back in vocabulary order (a sort of K indices, not of the vocabulary), so each uniform maps to the same
    token as over the whole row (the dropped tokens' zeros add nothing to the CDF)."""
    import torch

    kept = head >= cut[:, None]
    order, perm = idx.masked_fill(~kept, torch.iinfo(idx.dtype).max).sort(-1)  # the dropped: after the kept
    weights = torch.where(kept, head, torch.zeros_like(head)).gather(-1, perm)
    return order.gather(-1, _inverse_cdf(weights, u)[:, None]).squeeze(-1)
