"""`VLLMPolicy`: token-in/token-out over an in-process vLLM engine (`vllm.v1.engine.async_llm.AsyncLLM`, GPU).

Written against vLLM 0.29's API: `AsyncLLM.generate(prompt, sampling_params, request_id)` is an async generator of
`RequestOutput`; the prompt is `TokensPrompt(prompt_token_ids=...)`; `SamplingParams(logprobs=0)` returns the
sampled token's logprob per position (`outputs[0].logprobs[i][token_id].logprob`); `FINAL_ONLY` output kind makes
the generator yield once. Start the engine with `logprobs_mode="processed_logprobs"` for logprobs after temperature
(the Policy contract). No entropy: vLLM does not return the full distribution.

vLLM is imported only when a policy is built from engine args or when `sampling_cls` / `prompt_cls` are not given,
so this module imports on CPU machines (tests use stand-ins for those two classes and for the engine).
"""

from __future__ import annotations

import itertools
from typing import Any

from swe_rl.policy.base import Completion, SamplingParams


def sampling_kwargs(sampling: SamplingParams) -> dict[str, Any]:
    """Keyword arguments for vllm.SamplingParams matching our SamplingParams."""
    kw: dict[str, Any] = {
        "n": 1,
        "temperature": sampling.temperature,
        "top_p": sampling.top_p,
        "max_tokens": sampling.max_new_tokens,
        "stop_token_ids": list(sampling.stop_token_ids),
        "logprobs": 0,  # only the sampled token's logprob
        "skip_special_tokens": False,
        "detokenize": True,
        "ignore_eos": False,
    }
    if sampling.seed is not None:
        kw["seed"] = sampling.seed
    return kw


class VLLMPolicy:
    def __init__(
        self,
        engine: Any,
        *,
        sampling_cls: Any = None,
        prompt_cls: Any = None,
        final_only_kind: Any = "auto",
        request_prefix: str = "swe-rl",
    ):
        self.engine = engine  # an AsyncLLM (or anything with its async-generator `generate`)
        if sampling_cls is None or prompt_cls is None:
            from vllm import SamplingParams as VSamplingParams
            from vllm import TokensPrompt

            sampling_cls, prompt_cls = sampling_cls or VSamplingParams, prompt_cls or TokensPrompt
        if final_only_kind == "auto":
            from vllm.sampling_params import RequestOutputKind

            final_only_kind = RequestOutputKind.FINAL_ONLY
        self.sampling_cls = sampling_cls
        self.prompt_cls = prompt_cls
        self.final_only_kind = final_only_kind
        self.request_prefix = request_prefix
        self._ids = itertools.count()

    @classmethod
    def from_engine_args(cls, **engine_args: Any) -> VLLMPolicy:
        """Build the engine in-process: VLLMPolicy.from_engine_args(model=path, logprobs_mode=..., ...)."""
        from vllm.engine.arg_utils import AsyncEngineArgs
        from vllm.v1.engine.async_llm import AsyncLLM

        engine_args.setdefault("logprobs_mode", "processed_logprobs")
        return cls(AsyncLLM.from_engine_args(AsyncEngineArgs(**engine_args)))

    def build_request(self, prompt_ids: list[int], sampling: SamplingParams) -> tuple[Any, Any, str]:
        kw = sampling_kwargs(sampling)
        if self.final_only_kind is not None:
            kw["output_kind"] = self.final_only_kind
        prompt = self.prompt_cls(prompt_token_ids=list(prompt_ids))
        return prompt, self.sampling_cls(**kw), f"{self.request_prefix}-{next(self._ids)}"

    async def generate(self, prompt_ids: list[int], sampling: SamplingParams) -> Completion:
        prompt, params, request_id = self.build_request(prompt_ids, sampling)
        final = None
        async for out in self.engine.generate(prompt, params, request_id):
            final = out
        if final is None or not final.outputs:
            raise RuntimeError(f"vLLM request {request_id}: the engine returned no output")
        return completion_from_output(final.outputs[0], sampling)

    async def close(self) -> None:
        shutdown = getattr(self.engine, "shutdown", None)
        if shutdown is not None:
            shutdown()


def completion_from_output(out: Any, sampling: SamplingParams) -> Completion:
    """vLLM CompletionOutput -> Completion. `out.logprobs[i]` maps token id -> Logprob(logprob=...)."""
    ids = [int(t) for t in out.token_ids]
    lps: list[float] = []
    for i, t in enumerate(ids):
        entry = out.logprobs[i] if out.logprobs is not None else None
        if entry is None or t not in entry:
            raise RuntimeError(f"vLLM output has no logprob for token {i} ({t}); request logprobs=0")
        lps.append(float(entry[t].logprob))
    stopped = out.finish_reason == "stop" or (bool(ids) and ids[-1] in sampling.stop_token_ids)
    return Completion(ids, lps, out.text or "", "stop" if stopped else "length", None)
