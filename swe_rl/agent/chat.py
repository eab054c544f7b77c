"""Incremental chat templating for token-in/token-out episodes: the history is never re-tokenized.

The initial prompt (system + task) is rendered once. Each assistant turn's tokens come from the policy as is.
Each observation is rendered as the *delta* the tokenizer's own chat template produces after an assistant turn:
render [user, assistant(SENTINEL), observation] + generation prompt, cut everything up to and including
SENTINEL + turn_end_token, tokenize the rest. This works for templates that rewrite earlier turns (Qwen3 drops
old <think> blocks) because only text after the last assistant turn is used.

Observations and the task are untrusted text (a repository may contain `<|im_end|>` or `</tool_response>`): when
their content holds the surface form of an added token, the content is encoded with the plain BPE (no added
tokens), so it stays text and cannot end the turn or forge one; the template's own markup keeps its control tokens.
Qwen's tokenization note says the same ("do not parse special-token surface forms in untrusted text").
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

_SENTINEL = "\x00SWE_RL_ASSISTANT_SENTINEL\x00"
_CONTENT = "\x00SWE_RL_CONTENT_SENTINEL\x00"


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


def control_forms(tokenizer: Any) -> list[str]:
    """Surface forms of the tokenizer's control tokens: special added tokens (`<|im_end|>`) and added tokens that are
    markup (`<tool_call>`, `<think>`, `</tool_response>`). Other added tokens are vocabulary, not control: the demo
    tokenizer adds `/testbed/calc.py` and `Execution output of [file_editor]:` as single tokens, and encoding an
    observation that holds them as plain BPE gave the shipped checkpoint token ids it never saw (0% resolved)."""
    special = {t.content for t in tokenizer.added_tokens_decoder.values() if t.special}
    return [f for f in tokenizer.get_added_vocab() if f in special or (f.startswith("<") and f.endswith(">"))]


def encode_text(tokenizer: Any, text: str) -> list[int]:
    """`text` as plain text: added-token surface forms are BPE-encoded like any other characters."""
    if not any(form in text for form in control_forms(tokenizer)):
        return encode(tokenizer, text)
    backend = (
        tokenizer.backend_tokenizer
    )  # its normalizer, pre-tokenizer and BPE model, minus the added tokens
    if backend.normalizer is not None:
        text = backend.normalizer.normalize_str(text)
    pieces = backend.pre_tokenizer.pre_tokenize_str(text) if backend.pre_tokenizer else [(text, None)]
    return [t.id for piece, _ in pieces for t in backend.model.tokenize(piece)]


def encode_with_content(tokenizer: Any, text: str, content: str, render_with: Any) -> list[int]:
    """Encode rendered `text` whose one untrusted `content` is kept text. `render_with(c)` re-renders with c in
    place of the content, which locates it; the markup around it is encoded normally."""
    if not any(form in content for form in control_forms(tokenizer)):
        return encode(tokenizer, text)
    pre, sep, post = render_with(_CONTENT).partition(_CONTENT)
    if not sep or pre + content + post != text:
        raise ValueError("the chat template does not insert message content verbatim; cannot keep it as text")
    return encode(tokenizer, pre) + encode_text(tokenizer, content) + encode(tokenizer, post)


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

        def with_task(content: str) -> str:
            msgs = [{"role": "system", "content": system}, {"role": "user", "content": content}]
            return render(self.tokenizer, msgs, add_generation_prompt=True, **self._kw())

        text = with_task(task)
        return text, encode_with_content(self.tokenizer, text, task, with_task)

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
        return text, encode_with_content(self.tokenizer, text, content, self.observation_text)

    def stop_ids(self, extra: list[str]) -> tuple[int, ...]:
        ids = [self.turn_end_id]
        for tok in extra:
            t = encode(self.tokenizer, tok)
            if len(t) == 1 and t[0] not in ids:
                ids.append(t[0])
        return tuple(ids)
