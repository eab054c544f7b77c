"""`Trajectory`: one agent episode as tokens (for training) and as messages (for people)."""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from typing import Any

EXIT_STATUSES = ("submitted", "max_steps", "context_limit", "timeout", "format_errors", "error")


@dataclass
class Trajectory:
    task_id: str
    sample_idx: int = 0
    prompt_len: int = 0  # the first prompt_len tokens are the initial prompt (system + task), mask 0
    token_ids: list[int] = field(default_factory=list)  # (T,) the whole episode, never re-tokenized
    loss_mask: list[int] = field(default_factory=list)  # (T,) 1 = policy token
    logprobs: list[float] = field(default_factory=list)  # (T,) rollout logprob on policy tokens, 0 elsewhere
    entropy: list[float] | None = None  # (T,) rollout token entropy when the backend gives it
    messages: list[dict[str, Any]] = field(default_factory=list)  # readable transcript
    patch: str = ""
    exit_status: str = ""  # one of EXIT_STATUSES
    terminated: bool = False  # the agent ended the episode itself (submit)
    truncated: bool = False  # a limit ended it (steps, context, time)
    reward: float | None = None  # None = unscorable -> masked, never scored 0
    resolved: bool = False
    error: str | None = None  # traceback of an infrastructure failure
    metrics: dict[str, Any] = field(default_factory=dict)

    @property
    def valid(self) -> bool:
        return self.reward is not None

    def to_json(self) -> str:
        return json.dumps(asdict(self))

    @classmethod
    def from_json(cls, line: str) -> Trajectory:
        return cls(**json.loads(line))
