"""Picklable policy specs (a typed union on `kind`), each building a PolicyProvider inside a worker.

- `openai`: a served policy (vLLM/SGLang OpenAI-compatible endpoint) shared by all actors; each builds a client.
- `hf`: a transformers model loaded in each actor (CPU or its GPU); `set_state` loads trainer weights into it.
- `tiny`: a random tiny Qwen-architecture model built offline (tests, demos: it never solves anything).
- `scripted`: replays each task's gold fix through the real tools (swe_rl.policy.scripted); resolves everything.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import Field

from swe_rl.config import StrictModel
from swe_rl.policy.base import Policy
from swe_rl.tasks.task import Task


class SharedPolicy:
    """One policy for every episode of a worker (batched by the backend); weights loadable into `model`."""

    def __init__(self, policy: Policy, tokenizer: Any, model: Any = None):
        self.policy = policy
        self.tokenizer = tokenizer
        self.model = model

    def policy_for(self, task: Task, sample_idx: int) -> Policy:
        return self.policy

    def set_state(self, state_dict: Any) -> None:
        if self.model is None:
            raise TypeError(f"{type(self.policy).__name__} has no local weights to update (a served policy?)")
        self.model.load_state_dict(state_dict)


class ScriptedProvider:
    """A fresh scripted policy per episode: it needs the task (its gold patch) to act."""

    def __init__(
        self,
        tokenizer: Any,
        agent_format: Literal["xml", "hermes"],
        test_command: str = "python3 -m pytest -q",
    ):
        self.tokenizer = tokenizer
        self.agent_format = agent_format
        self.test_command = test_command

    def policy_for(self, task: Task, sample_idx: int) -> Policy:
        from swe_rl.policy.scripted import ScriptedGoldPolicy

        return ScriptedGoldPolicy(
            task, self.tokenizer, action_format=self.agent_format, test_command=self.test_command
        )

    def set_state(self, state_dict: Any) -> None:
        raise TypeError("the scripted policy has no weights")


class ScriptedPolicySpec(StrictModel):
    kind: Literal["scripted"] = "scripted"  # replays the gold patch through the tools (reference/upper bound)
    action_format: Literal["xml", "hermes"] = "xml"  # must match agent.action_format
    test_command: str = "python3 -m pytest -q"  # the test run it does before submitting

    def build(self) -> ScriptedProvider:
        from swe_rl.policy.tiny import build_tokenizer

        return ScriptedProvider(build_tokenizer(), self.action_format, self.test_command)


class TinyPolicySpec(StrictModel):
    kind: Literal["tiny"] = "tiny"  # random tiny Qwen model, built offline (tests, smoke runs)
    arch: Literal["qwen2", "qwen3"] = "qwen2"  # architecture of the random model
    size: str = "tiny"  # swe_rl.policy.tiny.TINY_SIZES key
    seed: int = 0  # weight init seed
    max_batch: int = Field(8, ge=1)  # concurrent generations batched together

    def build(self) -> SharedPolicy:
        from swe_rl.policy.hf import HFLocalPolicy
        from swe_rl.policy.tiny import build_tiny_model, build_tokenizer

        tok = build_tokenizer()
        model = build_tiny_model(tok, arch=self.arch, size=self.size, seed=self.seed)
        return SharedPolicy(HFLocalPolicy(model, tok, max_batch=self.max_batch), tok, model)


class HFPolicySpec(StrictModel):
    kind: Literal["hf"] = "hf"  # a transformers checkpoint loaded in every worker
    model: str  # local path of the model (config + weights)
    tokenizer: str | None = None  # tokenizer path (default: model)
    device: str = "cpu"  # torch device of the worker
    dtype: Literal["float32", "bfloat16", "float16"] = "float32"  # weights dtype
    max_batch: int = Field(8, ge=1)  # concurrent generations batched together

    def build(self) -> SharedPolicy:
        import torch
        from transformers import AutoModelForCausalLM

        from swe_rl.policy.hf import HFLocalPolicy
        from swe_rl.policy.tiny import load_tokenizer

        tok = load_tokenizer(self.tokenizer or self.model)
        model: Any = AutoModelForCausalLM.from_pretrained(self.model, dtype=getattr(torch, self.dtype))
        model = model.to(self.device)
        model.eval()
        return SharedPolicy(HFLocalPolicy(model, tok, max_batch=self.max_batch), tok, model)


class OpenAIPolicySpec(StrictModel):
    kind: Literal["openai"] = "openai"  # a served OpenAI-compatible endpoint shared by all workers
    base_url: str  # e.g. http://head-node:8000/v1
    model: str  # served model name
    tokenizer: str  # local tokenizer path (token-in/token-out: the client sends and receives token ids)
    api_key_env: str = (
        "OPENAI_API_KEY"  # environment variable holding the key (may be unset for local servers)
    )
    max_concurrency: int = Field(64, ge=1)  # in-flight requests per worker

    def check_server(self) -> None:
        """ValueError naming base_url or model where no server answers or it does not serve `model`."""
        import os

        from swe_rl.policy.openai import check_server

        check_server(self.base_url, self.model, os.environ.get(self.api_key_env))

    def build(self) -> SharedPolicy:
        import os

        from swe_rl.policy.openai import OpenAIPolicy
        from swe_rl.policy.tiny import load_tokenizer

        tok = load_tokenizer(self.tokenizer)
        policy = OpenAIPolicy(
            base_url=self.base_url,
            model=self.model,
            api_key=os.environ.get(self.api_key_env),
            max_concurrency=self.max_concurrency,
        )
        return SharedPolicy(policy, tok)


PolicySpec = Annotated[
    ScriptedPolicySpec | TinyPolicySpec | HFPolicySpec | OpenAIPolicySpec, Field(discriminator="kind")
]
