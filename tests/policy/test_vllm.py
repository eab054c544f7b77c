"""VLLMPolicy request construction and output parsing. vLLM cannot be installed here (it needs CUDA), so the
engine and vLLM's two request classes are stand-ins named as fakes; the real classes are used on a GPU machine."""

from __future__ import annotations

import importlib.util
from dataclasses import dataclass, field

import pytest

from swe_rl.policy.base import SamplingParams
from swe_rl.policy.vllm import VLLMPolicy, sampling_kwargs


class FakeSamplingParams:  # stands in for vllm.SamplingParams: keeps its keyword arguments
    def __init__(self, **kw):
        self.kw = kw


class FakeTokensPrompt(dict):  # vllm.TokensPrompt is a TypedDict
    pass


@dataclass
class FakeLogprob:
    logprob: float


@dataclass
class FakeCompletionOutput:
    token_ids: list[int]
    logprobs: list[dict[int, FakeLogprob]] | None
    text: str = ""
    finish_reason: str | None = "stop"


@dataclass
class FakeRequestOutput:
    outputs: list[FakeCompletionOutput]


@dataclass
class FakeEngine:
    """Records requests; answers with a fixed completion, streamed as two RequestOutputs (the last one counts)."""

    reply: FakeCompletionOutput
    calls: list[tuple] = field(default_factory=list)

    async def generate(self, prompt, sampling_params, request_id):
        self.calls.append((prompt, sampling_params, request_id))
        yield FakeRequestOutput([FakeCompletionOutput([], [], "", None)])
        yield FakeRequestOutput([self.reply])


def make(reply) -> tuple[VLLMPolicy, FakeEngine]:
    engine = FakeEngine(reply)
    policy = VLLMPolicy(
        engine, sampling_cls=FakeSamplingParams, prompt_cls=FakeTokensPrompt, final_only_kind="FINAL"
    )
    return policy, engine


async def test_request_construction_and_completion():
    reply = FakeCompletionOutput(
        [5, 7, 2],
        [{5: FakeLogprob(-0.1)}, {7: FakeLogprob(-0.2), 1: FakeLogprob(-3.0)}, {2: FakeLogprob(-0.3)}],
        "x",
    )
    policy, engine = make(reply)
    sp = SamplingParams(temperature=0.6, top_p=0.9, max_new_tokens=32, stop_token_ids=(2,), seed=4)
    c = await policy.generate([1, 2, 3], sp)
    await policy.generate([1], sp)
    prompt, params, rid = engine.calls[0]
    assert prompt == {"prompt_token_ids": [1, 2, 3]} and rid != engine.calls[1][2]
    assert params.kw == {**sampling_kwargs(sp), "output_kind": "FINAL"}
    assert params.kw["logprobs"] == 0 and params.kw["max_tokens"] == 32 and params.kw["seed"] == 4
    assert c.token_ids == [5, 7, 2] and c.logprobs == [-0.1, -0.2, -0.3] and c.finish_reason == "stop"
    assert c.token_entropy is None


async def test_missing_logprobs_is_an_error():
    policy, _ = make(FakeCompletionOutput([5], None, "x", "length"))
    with pytest.raises(RuntimeError, match="no logprob"):
        await policy.generate([1], SamplingParams())


def test_vllm_is_imported_lazily():
    if importlib.util.find_spec("vllm") is not None:
        pytest.skip("vLLM is installed here; the contract test below covers it")
    with pytest.raises(ImportError):
        VLLMPolicy(object())  # without stand-ins it needs the real vLLM


def test_contract_with_installed_vllm():
    """On a GPU machine with vLLM: the real classes accept what we send (fails loudly after an upgrade)."""
    pytest.importorskip("vllm", reason="vLLM is not installable on this CPU machine")
    import inspect

    from vllm import SamplingParams as VSamplingParams
    from vllm.v1.engine.async_llm import AsyncLLM

    params = list(inspect.signature(AsyncLLM.generate).parameters)
    assert params[1:4] == ["prompt", "sampling_params", "request_id"]
    VSamplingParams(**sampling_kwargs(SamplingParams(seed=1, stop_token_ids=(2,))))
