"""Incremental chat templating for token-in/token-out episodes: the history is never re-tokenized.

The initial prompt (system + task) is rendered once. Each assistant turn's tokens come from the policy as is.
Each observation is rendered as the *delta* the tokenizer's own chat template produces after an assistant turn:
render [user, assistant(SENTINEL), observation] + generation prompt, cut everything up to and including
SENTINEL + turn_end_token, tokenize the rest. This works for templates that rewrite earlier turns (Qwen3 drops
old <think> blocks) because only text after the last assistant turn is used.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

_SENTINEL = "\x00SWE_RL_ASSISTANT_SENTINEL\x00"


def render(
    tokenizer: Any, messages: list[dict[str, Any]], *, add_generation_prompt: bool, **kwargs: Any
) -> str:
    text = tokenizer.apply_chat_template(
        messages, tokenize=False, add_generation_prompt=add_generation_prompt, **kwargs
    )
    if not isinstance(text, str):
        raise TypeError(f"chat template rendered {type(text).__name__}, expected str")
    return text


def encode(tokenizer: Any, text: str) -> list[int]:
    return list(tokenizer(text, add_special_tokens=False)["input_ids"])


@dataclass
class ChatFormat:
    tokenizer: Any
    turn_end_token: str = "<|im_end|>"
    obs_role: str = "user"
    template_kwargs: dict[str, Any] | None = None

    def __post_init__(self) -> None:
        ids = encode(self.tokenizer, self.turn_end_token)
        if len(ids) != 1:
            raise ValueError(
                f"turn_end_token={self.turn_end_token!r} is not a single token for this tokenizer ({ids})"
            )
        self.turn_end_id = ids[0]

    def _kw(self) -> dict[str, Any]:
        return dict(self.template_kwargs or {})

    def prompt(self, system: str, task: str) -> tuple[str, list[int]]:
        """The initial prompt, ending with the generation prompt: (text, ids)."""
        msgs = [{"role": "system", "content": system}, {"role": "user", "content": task}]
        text = render(self.tokenizer, msgs, add_generation_prompt=True, **self._kw())
        return text, encode(self.tokenizer, text)

    def observation_text(self, content: str) -> str:
        """Template text that follows a finished assistant turn (after its turn_end token) for one observation."""
        msgs = [
            {"role": "user", "content": "task"},
            {"role": "assistant", "content": _SENTINEL},
            {"role": self.obs_role, "content": content},
        ]
        full = render(self.tokenizer, msgs, add_generation_prompt=True, **self._kw())
        marker = _SENTINEL + self.turn_end_token
        cut = full.find(marker)
        if cut < 0:
            raise ValueError(
                "the chat template does not end an assistant turn with "
                f"turn_end_token={self.turn_end_token!r} right after its content"
            )
        return full[cut + len(marker) :]

    def observation(self, content: str) -> tuple[str, list[int]]:
        text = self.observation_text(content)
        return text, encode(self.tokenizer, text)

    def stop_ids(self, extra: list[str]) -> tuple[int, ...]:
        ids = [self.turn_end_id]
        for tok in extra:
            t = encode(self.tokenizer, tok)
            if len(t) == 1 and t[0] not in ids:
                ids.append(t[0])
        return tuple(ids)
