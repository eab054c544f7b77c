"""`HFLocalPolicy`: a transformers causal LM as an async, batching, token-in/token-out policy (CPU by default).

Concurrent `generate` calls (one per trajectory) go into an asyncio queue; a worker takes everything waiting (up to
`max_batch`) and runs one batched generation in a thread, so the event loop keeps driving sandboxes meanwhile.
The batch is left-padded with explicit position ids and a KV cache; rows that finish leave the batch (their cache
rows are dropped) so long stragglers do not pay for finished rows. Logprobs are at the sampling temperature
(log_softmax(logits / T), T = 1 when greedy) and entropy is the exact entropy of that same distribution; min_p,
top_k and top_p then truncate it as vLLM does before the draw (`_sample`).

Multi-turn episodes reuse the K/V of their previous turn (swe_rl.policy.kv_store): from turn 2 on only the reply's
last token and the observation are prefilled. The model is held by reference: a trainer that updates its weights in
place is seen by the next batch, and the stored K/V are dropped then.
"""

from __future__ import annotations

import asyncio
import contextlib
from dataclasses import dataclass
from typing import Any

from swe_rl.policy.base import Completion, SamplingParams
from swe_rl.policy.kv_store import PrefixKVStore, assemble, extract, weights_version


@dataclass
class _Request:
    prompt_ids: list[int]
    sampling: SamplingParams
    future: asyncio.Future


class HFLocalPolicy:
    def __init__(
        self,
        model: Any,
        tokenizer: Any,
        *,
        max_batch: int = 64,
        pad_token_id: int | None = None,
        batch_wait_s: float = 0.002,
        reuse_prefix: bool = True,
        max_cached_bytes: int = 256 << 20,
        autocast: Any = None,
    ):
        if max_batch < 1:
            raise ValueError(f"max_batch={max_batch}: expected >= 1")
        if batch_wait_s < 0:
            raise ValueError(f"batch_wait_s={batch_wait_s}: expected >= 0")
        # after the first request, wait this long for more before generating: episodes whose tool calls end at
        # nearly the same time then share one batch instead of trailing in small ones
        self.batch_wait_s = batch_wait_s
        # K/V of finished turns, reused when the same episode's next prompt extends them (skips most of the
        # prefill from turn 2 on); cleared whenever the weights change in place
        self.kv_store = PrefixKVStore(max_bytes=max_cached_bytes) if reuse_prefix else None
        self.model = model  # a reference, never a copy: in-place weight updates must be visible
        # a torch dtype (bf16) to run generation under torch.autocast on the model's device; None = the weights'
        # own dtype. Set per call: autocast state is per thread and generation runs in a worker thread.
        self.autocast = autocast
        self.tokenizer = tokenizer
        self.max_batch = max_batch
        pad = pad_token_id if pad_token_id is not None else tokenizer.pad_token_id
        self.pad_token_id = int(pad if pad is not None else 0)
        self._queue: asyncio.Queue[_Request] | None = None
        self._worker: asyncio.Task | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self.stats = {"batches": 0, "requests": 0, "tokens": 0, "gen_s": 0.0}

    # --- async front end ------------------------------------------------------------------------------------
    async def generate(self, prompt_ids: list[int], sampling: SamplingParams) -> Completion:
        loop = asyncio.get_running_loop()
        if self._loop is not loop or self._worker is None or self._worker.done():
            self._loop, self._queue = loop, asyncio.Queue()
            self._worker = loop.create_task(self._run_worker())
        fut: asyncio.Future = loop.create_future()
        assert self._queue is not None
        self._queue.put_nowait(_Request(list(prompt_ids), sampling, fut))
        return await fut

    async def close(self) -> None:
        if self._worker is not None and not self._worker.done():
            self._worker.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._worker
        self._worker = None

    async def _run_worker(self) -> None:
        assert self._queue is not None
        while True:
            batch = [await self._queue.get()]
            await asyncio.sleep(0)  # let coroutines that are ready enqueue their turn too
            deadline = asyncio.get_running_loop().time() + self.batch_wait_s
            while len(batch) < self.max_batch:
                if not self._queue.empty():
                    batch.append(self._queue.get_nowait())
                    continue
                left = deadline - asyncio.get_running_loop().time()
                if left <= 0:
                    break
                try:
                    batch.append(await asyncio.wait_for(self._queue.get(), timeout=left))
                except asyncio.TimeoutError:
                    break
            batch = [r for r in batch if not r.future.done()]  # cancelled by a timeout meanwhile
            if not batch:
                continue
            try:
                results = await asyncio.to_thread(
                    self.generate_batch, [r.prompt_ids for r in batch], [r.sampling for r in batch]
                )
            except Exception as e:  # surfaced to every waiting caller, the worker keeps serving
                for r in batch:
                    if not r.future.done():
                        r.future.set_exception(e)
                continue
            for r, res in zip(batch, results, strict=True):
                if not r.future.done():
                    r.future.set_result(res)

    # --- batched generation (runs in a worker thread) ----------------------------------------------------------
    def generate_batch(self, prompts: list[list[int]], samplings: list[SamplingParams]) -> list[Completion]:
        import time

        import torch

        t0 = time.perf_counter()
        amp: Any = contextlib.nullcontext()
        if self.autocast is not None:
            dev = next(self.model.parameters()).device
            amp = torch.autocast(device_type=dev.type, dtype=self.autocast)
        with torch.inference_mode(), amp:
            if self.kv_store is not None:
                self.kv_store.sync(weights_version(self.model))
            out = _generate(self.model, prompts, samplings, self.pad_token_id, self.kv_store)
        completions = []
        for (toks, lps, ents), sp in zip(out, samplings, strict=True):
            stopped = bool(toks) and toks[-1] in sp.stop_token_ids
            text = self.tokenizer.decode(toks, skip_special_tokens=False)
            completions.append(Completion(toks, lps, text, "stop" if stopped else "length", ents))
        self.stats["batches"] += 1
        self.stats["requests"] += len(prompts)
        self.stats["tokens"] += sum(len(c.token_ids) for c in completions)
        self.stats["gen_s"] += time.perf_counter() - t0
        return completions


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
) -> tuple[Any, Any, Any]:
    """logits (B, V) -> (token (B,), logprob (B,), entropy (B,)) at each row's temperature.

    A sampled row draws one uniform per step (from its own generator when seeded, else torch's global one) and
    inverts its CDF (float64 cumsum + searchsorted): one pass over the vocabulary, where `torch.multinomial` cost
    ~45 ms a step on two CPU cores at Qwen's 151,936 rows (bench/generate.py). Greedy rows take the argmax; a step
    whose rows are all greedy (`all_greedy`, host-side) draws nothing. Truncation as vLLM's sampler does it (min_p,
    then top_k, then top_p, each on the distribution left by the one before): `top_ks` (B,) long, <= 0 = off;
    `min_ps` (B,), 0 = off; None = off for every row. `truncate` (host-side: some row truncates) and `max_top_k`
    (host-side: the largest top_k) save device syncs; None = read them from the tensors. `unit_temps` (host-side:
    every row's temperature is 1, greedy rows' included) skips the division, a pass over (B, V). The log-prob and
    entropy are those of the tempered distribution before truncation (what the trainer recomputes). A row's token
    depends on its own logits and uniform only, never on the rows beside it (ties included)."""
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
    if (
        truncate
    ):  # zero what min_p / top_k / top_p drop; the draw stays in vocabulary order over the whole row
        cut = _cutoff(probs, top_ps, top_ks, min_ps, max_top_k=max_top_k)
        probs = probs.masked_fill(probs < cut[:, None], 0.0)
    tok = torch.where(greedy, argmax, _inverse_cdf(probs, u))
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
    truncates nothing. A token is kept iff its probability reaches it, so tokens tied with the last kept one are kept
    too (vLLM's top_k keeps every token tied with the k-th) and the kept set depends on the row alone.

    The K most likely tokens come from `topk` (K = max(256, the largest top_k), then x16, then a full sort when a flat
    row needs it): a full sort of 151,936 rows costs ~100 ms a step on two CPU cores. K is enough once, in every
    truncating row, no token beyond the K can be kept: top_k (<= K), the K-th below min_p's threshold, or the kept
    mass of the K past top_p of the mass top_p is taken over. One device sync per round (a second K is rare). Masses
    in float64, as on the CPU, so a CUDA device keeps the same tokens at the top_p boundary."""
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
        head, _ = probs.topk(k, dim=-1) if k < vocab else probs.sort(dim=-1, descending=True)
        rank = torch.arange(k, device=dev)
        keep = (head >= thr[:, None]) & ((ks[:, None] <= 0) | (rank[None, :] < ks[:, None]))
        cum = (head * keep).double().cumsum(-1)
        z = torch.where(ks > 0, cum[:, -1], survivors)
        settled = ~rows | (ks > 0) | ~keep[:, -1] | ((top_p < 1.0) & (cum[:, -1] > top_p * z))
        if k >= vocab or bool(settled.all()):
            break
        # past a quarter of the vocabulary a topk costs what the full sort does
        k = k * 16 if k * 16 <= vocab // 4 else vocab
    # top_p drops a token once the kept mass before it is past top_p of z; the first token is always kept
    keep &= ~((top_p[:, None] < 1.0) & ((cum - head.double() * keep) > top_p[:, None] * z[:, None]))
    last = (keep.sum(-1) - 1).clamp_(min=0)  # kept tokens are a prefix of the descending head
    cut = head.gather(-1, last[:, None]).squeeze(-1)
    return torch.where(rows, cut, torch.zeros_like(cut))


def _generate(
    model: Any,
    prompts: list[list[int]],
    samplings: list[SamplingParams],
    pad_id: int,
    store: PrefixKVStore | None = None,
) -> list[tuple]:
    """Batched sampling with a KV cache; rows reuse stored prefix K/V, finished rows leave the batch (and leave
    their K/V in `store` for the episode's next turn)."""
    import torch
    from transformers import DynamicCache

    device = next(model.parameters()).device
    n = len(prompts)
    results: list[tuple[list[int], list[float], list[float]]] = [([], [], []) for _ in range(n)]
    max_new = [max(0, sp.max_new_tokens) for sp in samplings]
    rows = [i for i in range(n) if max_new[i] > 0 and prompts[i]]
    if not rows:
        return results
    cached = [store.take(prompts[i]) if store is not None else None for i in rows]
    batch = assemble([prompts[i] for i in rows], cached, pad_id, device)
    attn = batch["attention_mask"]  # (R, C + N): grows by one column per decode step, like the cache
    temps = torch.tensor([samplings[i].temperature or 1.0 for i in rows], device=device)
    greedy_l = [samplings[i].temperature == 0 for i in rows]  # host copies: no device sync to read them
    unit_l = [samplings[i].temperature in (0, 1) for i in rows]  # the division by T is a no-op
    # a greedy row takes the argmax: its truncation settings are off (they would only cost a sort)
    trunc = [(1.0, -1, 0.0) if g else (samplings[i].top_p, samplings[i].top_k, samplings[i].min_p)
             for g, i in zip(greedy_l, rows, strict=True)]  # fmt: skip
    top_ps = torch.tensor([t[0] for t in trunc], device=device)
    top_ks = torch.tensor([t[1] for t in trunc], device=device)
    min_ps = torch.tensor([t[2] for t in trunc], device=device)
    greedy = torch.tensor(greedy_l, device=device)
    # host copies of "this row truncates" (top_p as the float32 tensor rounds it) and of the largest top_k
    trunc_l = [
        bool(p < 1.0) or t[1] > 0 or t[2] > 0 for p, t in zip(top_ps.cpu().tolist(), trunc, strict=True)
    ]
    max_top_k = max(t[1] for t in trunc)
    use_min_p = any(t[2] > 0 for t in trunc)  # else min_p's two passes over (B, V) are skipped
    seeds = [samplings[i].seed for i in rows]
    gens = [None if s is None else torch.Generator().manual_seed(s) for s in seeds]  # CPU: see _uniforms
    cache = DynamicCache(ddp_cache_data=batch["layers"], config=model.config)
    out = model(
        input_ids=batch["input_ids"],
        attention_mask=attn,
        position_ids=batch["position_ids"],
        past_key_values=cache,
        use_cache=True,
        logits_to_keep=1,
    )
    last_pos = batch["position_ids"][:, -1]

    def save(r: int, i: int) -> None:  # row r (request i) is done: keep its K/V for the next turn
        if store is not None:
            store.put(prompts[i] + results[i][0][:-1], extract(cache, r, attn[r].bool()))

    while rows:
        tok, lp, ent = _sample(out.logits[:, -1, :].float(), temps, top_ps, greedy, gens, top_ks=top_ks,
                               min_ps=min_ps if use_min_p else None, truncate=any(trunc_l), max_top_k=max_top_k,
                               all_greedy=all(greedy_l),
                               unit_temps=all(unit_l))  # fmt: skip
        keep = []
        # one host copy per step, not per row nor per tensor (float64 holds token ids and fp32 values exactly)
        tok_l, lp_l, ent_l = torch.stack([tok.double(), lp.double(), ent.double()]).tolist()
        for r, i in enumerate(rows):
            t = int(tok_l[r])
            toks, lps, ents = results[i]
            toks.append(t)
            lps.append(lp_l[r])
            ents.append(ent_l[r])
            if t not in samplings[i].stop_token_ids and len(toks) < max_new[i]:
                keep.append(r)
            else:
                save(r, i)
        if not keep:
            break
        if len(keep) < len(rows):  # drop finished rows from every per-row tensor and from the KV cache
            sel = torch.tensor(keep, device=device)
            cache.batch_select_indices(sel)
            rows = [rows[r] for r in keep]
            tok, attn, last_pos = tok[sel], attn[sel], last_pos[sel]
            temps, top_ps, top_ks, min_ps, greedy = (
                temps[sel],
                top_ps[sel],
                top_ks[sel],
                min_ps[sel],
                greedy[sel],
            )
            gens = [gens[r] for r in keep]
            greedy_l, trunc_l, unit_l = (
                [greedy_l[r] for r in keep],
                [trunc_l[r] for r in keep],
                [unit_l[r] for r in keep],
            )
        attn = torch.cat([attn, attn.new_ones((len(rows), 1))], dim=-1)
        last_pos = last_pos + 1
        out = model(
            input_ids=tok[:, None],
            attention_mask=attn,
            position_ids=last_pos[:, None],
            past_key_values=cache,
            use_cache=True,
        )
    return results
