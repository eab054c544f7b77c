"""`HFLocalPolicy`: a transformers causal LM as an async, batching, token-in/token-out policy (CPU by default).

Concurrent `generate` calls (one per trajectory) go into an asyncio queue; a worker takes everything waiting (up to
`max_batch`) and runs one batched generation in a thread, so the event loop keeps driving sandboxes meanwhile.
The batch is left-padded with explicit position ids and a KV cache; rows that finish leave the batch (their cache
rows are dropped) so long stragglers do not pay for finished rows. Logprobs are at the sampling temperature
(log_softmax(logits / T), T = 1 when greedy) and entropy is the exact entropy of that same distribution; min_p,
top_k and top_p then truncate it as vLLM does before the draw (swe_rl.policy.sampling).

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
from swe_rl.policy.sampling import _sample


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
    ks_l = [t[1] for t in trunc]
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
        # host-side: every sampled row truncates (the draw runs over the kept head), and each has a top_k (the
        # truncation starts from top_k + 1 tokens instead of 256)
        sampled_ks = [k for k, g in zip(ks_l, greedy_l, strict=True) if not g]
        first_k = max(sampled_ks) + 1 if sampled_ks and min(sampled_ks) > 0 else 256
        tok, lp, ent = _sample(out.logits[:, -1, :].float(), temps, top_ps, greedy, gens, top_ks=top_ks,
                               min_ps=min_ps if use_min_p else None, truncate=any(trunc_l), max_top_k=max_top_k,
                               all_greedy=all(greedy_l), unit_temps=all(unit_l),
                               all_truncate=all(t or g for t, g in zip(trunc_l, greedy_l, strict=True)),
                               first_k=first_k)  # fmt: skip
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
            greedy_l, trunc_l, unit_l, ks_l = (
                [greedy_l[r] for r in keep],
                [trunc_l[r] for r in keep],
                [unit_l[r] for r in keep],
                [ks_l[r] for r in keep],
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
