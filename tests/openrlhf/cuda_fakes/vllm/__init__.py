"""Named fake of the CUDA build of `vllm` (see ../README.md): the names OpenRLHF binds at import time."""

from __future__ import annotations

from dataclasses import dataclass, field

__version__ = "0.29.0+cuda-only-fake"


class CudaOnlyFake(RuntimeError):
    """A vLLM engine path was reached in a CPU test."""


@dataclass
class SamplingParams:
    """The fields OpenRLHF's SamplesGenerator sets (a record; sampling itself is vLLM's)."""

    temperature: float = 1.0
    top_p: float = 1.0
    top_k: int = -1
    max_tokens: int | None = 16
    min_tokens: int = 0
    skip_special_tokens: bool = True
    logprobs: int | None = None
    stop_token_ids: list[int] = field(default_factory=list)
    seed: int | None = None


class AsyncEngineArgs:
    def __init__(self, *args, **kwargs):
        raise CudaOnlyFake("vllm.AsyncEngineArgs: the vLLM engine needs CUDA")


class AsyncLLMEngine:
    @classmethod
    def from_engine_args(cls, *args, **kwargs):
        raise CudaOnlyFake("vllm.AsyncLLMEngine: the vLLM engine needs CUDA")
