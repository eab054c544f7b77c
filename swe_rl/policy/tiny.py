"""Tiny offline models: a byte-level BPE tokenizer with a ChatML template and a random Qwen2/Qwen3 model.

Built from a config in about a second with no hub access, for tests and the CPU demo. The tokenizer splits text
exactly as Qwen's does (NFC, Qwen's pre-tokenizer regex, byte-level), with its own small vocabulary: every loader
then encodes a saved folder the same way — transformers 5 builds `Qwen2Tokenizer` for `model_type: qwen2` and
swaps in that pre-tokenizer, as do vLLM and OpenRLHF through AutoTokenizer. Digits are one per token (Qwen's regex
splits them; calibration showed it helps copying constants); specials follow Qwen's names so chat code is shared.
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path
from typing import Any

CHATML_TEMPLATE = (
    "{% for message in messages %}"
    "{{ '<|im_start|>' + message['role'] + '\n' + message['content'] + '<|im_end|>' + '\n' }}"
    "{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|im_start|>assistant\n' }}{% endif %}"
)
SPECIALS = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]

DEFAULT_CORPUS = [
    "def add(a, b):\n    return a + b\n",
    "<function=file_editor><parameter=command>view</parameter><parameter=path>/testbed</parameter></function>",
    '<tool_call>{"name": "execute_bash", "arguments": {"command": "python -m pytest -q"}}</tool_call>',
    "The function returns the wrong value. Fix the bug so that the tests pass.",
    'Traceback (most recent call last):\n  File "x.py", line 3\nAssertionError: 1 != 2\n',
]


def build_tokenizer(corpus: Iterable[str] | None = None, vocab_size: int = 1024):
    """Train a byte-level BPE on `corpus` and wrap it as a PreTrainedTokenizerFast with a ChatML template.
    Normalizer, pre-tokenizer and decoder are Qwen2Tokenizer's (see the module docstring)."""
    from tokenizers import Regex, Tokenizer, decoders, models, normalizers, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    from swe_rl.policy.qwen_bpe import PRETOKENIZE_REGEX

    tok = Tokenizer(models.BPE())
    tok.normalizer = normalizers.NFC()
    tok.pre_tokenizer = pre_tokenizers.Sequence(
        [
            pre_tokenizers.Split(Regex(PRETOKENIZE_REGEX), behavior="isolated", invert=False),
            pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False),
        ]
    )
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size,
        special_tokens=SPECIALS,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    texts = list(corpus) if corpus is not None else DEFAULT_CORPUS * 4
    tok.train_from_iterator(texts, trainer=trainer)
    fast = PreTrainedTokenizerFast(
        tokenizer_object=tok,
        eos_token="<|im_end|>",
        pad_token="<|endoftext|>",
        bos_token=None,
        unk_token=None,
        additional_special_tokens=["<|im_start|>"],
    )
    fast.chat_template = CHATML_TEMPLATE
    return fast


TINY_SIZES = {
    # name: (hidden, layers, heads, kv_heads, ffn)
    "tiny": (64, 2, 4, 2, 128),
    "1m": (128, 4, 4, 2, 512),
    "5m": (256, 6, 8, 4, 1024),
}


def build_tiny_model(
    tokenizer, arch: str = "qwen2", size: str = "tiny", seed: int = 0, max_positions: int = 4096
):
    """A randomly initialised Qwen2ForCausalLM / Qwen3ForCausalLM sized for CPU."""
    import torch
    from transformers import Qwen2Config, Qwen2ForCausalLM, Qwen3Config, Qwen3ForCausalLM

    if size not in TINY_SIZES:
        raise ValueError(f"size={size!r}: expected one of {sorted(TINY_SIZES)}")
    hidden, layers, heads, kv, ffn = TINY_SIZES[size]
    common = dict(
        vocab_size=len(tokenizer),
        hidden_size=hidden,
        intermediate_size=ffn,
        num_hidden_layers=layers,
        num_attention_heads=heads,
        num_key_value_heads=kv,
        max_position_embeddings=max_positions,
        tie_word_embeddings=True,
        bos_token_id=None,
        eos_token_id=tokenizer.convert_tokens_to_ids("<|im_end|>"),
        pad_token_id=tokenizer.pad_token_id,
    )
    torch.manual_seed(seed)
    model: Qwen2ForCausalLM | Qwen3ForCausalLM
    if arch == "qwen2":
        model = Qwen2ForCausalLM(Qwen2Config(**common))
    elif arch == "qwen3":
        model = Qwen3ForCausalLM(Qwen3Config(head_dim=hidden // heads, **common))
    else:
        raise ValueError(f"arch={arch!r}: expected 'qwen2' or 'qwen3'")
    model.eval()
    return model


def load_tokenizer(path: str | Path) -> Any:
    """A saved tokenizer exactly as it was trained (tiny checkpoints and hub-style folders with tokenizer.json).

    For folders made by build_tokenizer this equals AutoTokenizer's result. Older tiny checkpoints used a
    digit-split GPT-2 pre-tokenizer that Qwen2Tokenizer (what AutoTokenizer builds for model_type=qwen2) replaces;
    their tokenizer-only subfolder `tokenizer/` (no config.json) loads as the saved backend, so it is read first."""
    from transformers import AutoTokenizer, PreTrainedTokenizerFast

    path = Path(path)
    if (path / "tokenizer" / "tokenizer.json").is_file():
        return AutoTokenizer.from_pretrained(path / "tokenizer")
    return PreTrainedTokenizerFast.from_pretrained(path)


def save_tokenizer(tok: Any, path: str | Path) -> None:
    """Save next to the model and in a tokenizer-only `tokenizer/` subfolder (a path some configs name)."""
    path = Path(path)
    tok.save_pretrained(path)
    tok.save_pretrained(path / "tokenizer")
