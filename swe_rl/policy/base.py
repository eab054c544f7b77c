"""Policy protocol: async, token-in/token-out. Backends: HF local, OpenAI-compatible server, vLLM engine."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Protocol, runtime_checkable


@dataclass(frozen=True)
class SamplingParams:
    temperature: float = 1.0
    top_p: float = 1.0
    max_new_tokens: int = 512
    stop_token_ids: tuple[
        int, ...
    ] = ()  # generation stops after emitting one of these (it is kept in token_ids)
    seed: int | None = None
    top_k: int = -1  # keep the k most likely tokens (-1 = off)
    min_p: float = 0.0  # drop tokens below min_p x the top probability (0 = off)
    extra_body: tuple[tuple[str, object], ...] = ()  # extra fields for a served policy's request (key, value)


def truncation_fields(body: dict) -> dict:
    """top_p, top_k and min_p of an OpenAI/vLLM-style request body as SamplingParams fields, checked: a bad value
    raises one ValueError naming the field. Absent (or null) = off; top_k <= 0 = off, as vLLM reads it."""
    out: dict = {}
    for name in ("top_p", "top_k", "min_p"):
        raw = body.get(name)
        if raw is None:
            continue
        integer = name == "top_k"
        try:
            if isinstance(raw, bool) or (integer and float(raw) != int(raw)):
                raise ValueError
            value = int(raw) if integer else float(raw)
        except (TypeError, ValueError):
            raise ValueError(f"{name}={raw!r}: expected {'an integer' if integer else 'a number'}") from None
        if integer:
            out[name] = value if value > 0 else -1
        elif 0.0 <= value <= 1.0:
            out[name] = value
        else:
            raise ValueError(f"{name}={raw!r}: expected 0.0 <= {name} <= 1.0")
    return out


class ContextLengthExceeded(RuntimeError):
    """The backend refused the prompt as longer than its context: the episode ends as `context_limit`."""


# How servers word that refusal. vLLM 0.29: "This model's maximum context length is N tokens ...", "... is longer
# than the maximum model length of N", and, for a turn budget (max_tokens) larger than the whole context,
# "max_tokens=M cannot be greater than max_model_len=... Please request fewer output tokens." (a server that does
# not report its max_model_len, so the agent's budget was not capped to it).
CONTEXT_MARKERS = (
    "maximum context length",
    "context_length_exceeded",
    "longer than the maximum model length",
    "request fewer output tokens",
)


@dataclass(frozen=True)
class Completion:
    token_ids: list[int]
    logprobs: list[float]  # log p(token) under the sampling distribution (after temperature), one per token
    text: str
    finish_reason: str  # "stop" | "length"
    token_entropy: list[float] | None = field(
        default=None
    )  # exact entropy per token when the backend has logits


@runtime_checkable
class Policy(Protocol):
    async def generate(self, prompt_ids: list[int], sampling: SamplingParams) -> Completion: ...
