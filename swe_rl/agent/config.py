"""`AgentConfig`: every knob of the DeepSWE-style agent loop (limits, tools, prompts, chat template)."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field, model_validator

from swe_rl.config import StrictModel


class AgentConfig(StrictModel):
    action_format: Literal["xml", "hermes"] = (
        "xml"  # DeepSWE XML function calls or Qwen/Hermes JSON tool calls
    )
    profile: Literal["swe_rl", "deepswe"] = (
        "swe_rl"  # tool interface: ours, or R2E-Gym's as DeepSWE was trained (swe_rl.agent.profiles)
    )
    max_steps: int = Field(40, ge=1)  # assistant turns before exit "max_steps"
    max_context_tokens: int = Field(
        32768, ge=16
    )  # whole episode (prompt + turns + observations); "context_limit"
    max_new_tokens: int = Field(2048, ge=1)  # per assistant turn (capped by what the context has left)
    max_wall_s: float = Field(1800.0, gt=0)  # wall clock per trajectory, policy + tools; exit "timeout"
    max_format_errors: int = Field(3, ge=1)  # replies without a valid call before exit "format_errors"
    temperature: float = Field(1.0, ge=0)  # sampling temperature (0 = greedy)
    top_p: float = Field(1.0, gt=0, le=1)  # nucleus sampling
    top_k: int = Field(-1, ge=-1)  # keep the k most likely tokens (-1 = off; Qwen3 recommends 20)
    min_p: float = Field(0.0, ge=0, le=1)  # drop tokens below min_p x the top probability (0 = off)
    extra_body: dict[str, Any] = Field(
        default_factory=dict
    )  # extra request fields for a served policy (e.g. repetition_penalty); local backends ignore them
    seed: int | None = None  # base sampling seed, hashed with task, sample_idx, step per turn (turn_seed)
    tool_timeout_s: float = Field(90.0, gt=0)  # execute_bash timeout inside the sandbox
    max_observation_chars: int = Field(16000, ge=100)  # longer observations are clipped (head + tail)
    token_warning_fraction: float = Field(0.9, gt=0, le=1)  # warn "running out of tokens" past this share
    repo_dir: str = "/testbed"  # repository inside the sandbox
    tools_dir: str = "/usr/local/lib/swe_rl_tools"  # where the tool scripts are copied
    tool_python: str = (
        "python3 -I -S"  # runs the tool scripts in the sandbox; -I -S: stdlib only, ~2x faster start
    )
    system_prompt_file: str | None = (
        None  # replaces the bundled system prompt (placeholders: {tool_descriptions}, {tools_json})
    )
    task_prompt_file: str | None = (
        None  # replaces the bundled task prompt (placeholders: {problem_statement}, {repo_dir})
    )
    prompt_config_file: str | None = (
        None  # an R2E-Gym agent YAML (system_prompt, instance_prompt) used as system and task prompt
    )
    notes_file: str | None = (
        None  # replaces the bundled per-step notes (YAML: steps_remaining, last_step, token_warning)
    )
    observation_role: Literal["user", "tool"] | None = None  # None: "user" for xml, "tool" for hermes
    chat_template_kwargs: dict[str, Any] = Field(
        default_factory=dict
    )  # e.g. {enable_thinking: false} for Qwen3
    # what the policy is fed each turn. stream: our token stream, never re-tokenized; earlier turns' <think> blocks
    # stay in it (as rLLM trains and serves DeepSWE), while Qwen3's template drops them when it re-renders.
    # rerender: the template's rendering of the conversation so far, as a chat server feeds the model (serving
    # parity for evaluation); the trajectory still records the stream, whose logprobs then belong to other
    # prompts, so train on stream episodes only.
    history: Literal["stream", "rerender"] = "stream"
    turn_end_token: str = "<|im_end|>"  # closes an assistant turn; appended (mask 0) when generation was cut
    extra_stop_tokens: list[str] = Field(
        default_factory=lambda: ["<|endoftext|>"]
    )  # also end a turn if in vocab
    patch_exclude: list[str] = Field(
        default_factory=lambda: ["*.pyc", "__pycache__", ".pytest_cache", "*.egg-info"]
    )  # pathspecs left out of the patch (build and cache artefacts)
    setup_timeout_s: float = Field(120.0, gt=0)  # tool install, base-commit lookup, patch extraction

    @model_validator(mode="after")
    def _check(self) -> AgentConfig:
        if not self.repo_dir.startswith("/"):
            raise ValueError(f"repo_dir={self.repo_dir!r}: expected an absolute path")
        if self.prompt_config_file and (self.system_prompt_file or self.task_prompt_file):
            raise ValueError(
                "prompt_config_file replaces system_prompt_file and task_prompt_file: set one or the other"
            )
        return self

    @property
    def obs_role(self) -> str:
        if self.observation_role is not None:
            return self.observation_role
        return "tool" if self.action_format == "hermes" else "user"
