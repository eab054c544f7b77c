"""`Trajectory`: one agent episode as tokens (for training) and as messages (for people)."""

from __future__ import annotations

import json
from dataclasses import dataclass, field, fields
from pathlib import Path
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
    # Where each turn's action (its tool call, after any reasoning) starts: absolute token indices, at most one
    # per turn (run of loss_mask 1s); the action runs from there to the turn's end. A turn without an entry is
    # all action. AEM's entropy_span=action averages over these tokens (action_token_mask).
    action_starts: list[int] = field(default_factory=list)
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
        # the fields as they are: dataclasses.asdict deep-copies every token list and message first, which made
        # this 3-4x slower on a 64K-token episode (bench/trajectory_json.py)
        return json.dumps({f.name: getattr(self, f.name) for f in fields(self)})

    @classmethod
    def from_json(cls, line: str) -> Trajectory:
        return cls(**json.loads(line))


def mask_runs(loss_mask: list[int]) -> list[tuple[int, int]]:
    """Maximal runs of 1 as [start, end) pairs: one per assistant turn (the response spans)."""
    runs: list[tuple[int, int]] = []
    start = None
    for i, m in enumerate(loss_mask):
        if m and start is None:
            start = i
        elif not m and start is not None:
            runs.append((start, i))
            start = None
    if start is not None:
        runs.append((start, len(loss_mask)))
    return runs


def span_ids(loss_mask: list[int]) -> list[int]:
    """(T,) span index per token: k for tokens of the k-th run of 1s, -1 for mask-0 tokens."""
    out = [-1] * len(loss_mask)
    for k, (s, e) in enumerate(mask_runs(loss_mask)):
        out[s:e] = [k] * (e - s)
    return out


def action_token_mask(loss_mask: list[int], action_starts: list[int]) -> list[int]:
    """(T,) 1 on action tokens: in a turn (run of 1s) holding an action start, the tokens from it to the turn's
    end; a turn without one counts whole. Starts outside every turn (an empty turn) are ignored."""
    out = [1 if m else 0 for m in loss_mask]
    for s, e in mask_runs(loss_mask):
        inside = [a for a in action_starts if s <= a < e]
        if inside:
            out[s : min(inside)] = [0] * (min(inside) - s)
    return out


# where a reply's call begins, by action format
ACTION_OPENERS = {"xml": "<function=", "hermes": "<tool_call>"}


def action_offset(tokenizer: Any, toks: list[int], reply: str, fmt: str) -> int:
    """Index in `toks` of the token where the reply's call begins (after the last </think>, as the parsers read
    it): the first token whose decoded prefix reaches the opener (binary search, log2(len) decodes). 0 when
    the reply holds no call (the whole turn is its action). `reply` = the tokenizer's decode of `toks` (special
    tokens kept), as the agent loop decodes a turn."""
    think = reply.rfind("</think>")
    at = reply.find(ACTION_OPENERS[fmt], think + len("</think>") if think >= 0 else 0)
    if at <= 0:
        return 0
    lo, hi = 0, len(toks)  # invariant: decode(toks[:lo]) ends at or before `at`; the answer lies in [lo, hi]
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if len(tokenizer.decode(toks[:mid], skip_special_tokens=False)) <= at:
            lo = mid
        else:
            hi = mid - 1
    return min(lo, max(len(toks) - 1, 0))


def write_jsonl(path: str | Path, trajectories: list[Trajectory], *, append: bool = True) -> Path:
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("a" if append else "w") as f:
        for t in trajectories:
            f.write(t.to_json() + "\n")
    return path


def read_jsonl(path: str | Path) -> list[Trajectory]:
    """Every trajectory in a JSONL file; a bad line fails with its line number."""
    out = []
    for n, line in enumerate(Path(path).read_text().splitlines(), 1):
        if not line.strip():
            continue
        try:
            out.append(Trajectory.from_json(line))
        except (json.JSONDecodeError, TypeError) as e:
            raise ValueError(f"{path}:{n}: not a trajectory JSON line ({e})") from None
    return out
