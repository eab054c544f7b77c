"""A saved tiny checkpoint reloads with the exact tokenizer it was trained with (through every loader we use)."""

from __future__ import annotations

import pytest

from swe_rl.policy.tiny import build_tiny_model, load_tokenizer, save_tokenizer
from swe_rl.rollout.policies import HFPolicySpec

TEXTS = [
    "<|im_start|>user\nx * 12345 + 67 returns 890<|im_end|>\n",
    "     1\tdef add(a, b):\n     2\t    return a + b\n\n  x_y(z) café\r\n\t\t done.",
]


@pytest.mark.parametrize("arch", ["qwen2", "qwen3"])
def test_checkpoint_tokenizer_round_trip(tmp_path, tiny_tokenizer, arch):
    """Ours, the HF policy spec and AutoTokenizer (which builds Qwen2Tokenizer for model_type qwen2 and swaps in
    its pre-tokenizer) all encode like the tokenizer that was saved."""
    from transformers import AutoTokenizer

    model = build_tiny_model(tiny_tokenizer, arch=arch, size="tiny")
    model.save_pretrained(tmp_path)
    save_tokenizer(tiny_tokenizer, tmp_path)
    shared = HFPolicySpec(model=str(tmp_path)).build()
    for text in TEXTS:
        want = tiny_tokenizer(text, add_special_tokens=False)["input_ids"]
        assert load_tokenizer(tmp_path)(text, add_special_tokens=False)["input_ids"] == want
        assert shared.tokenizer(text, add_special_tokens=False)["input_ids"] == want
        assert AutoTokenizer.from_pretrained(tmp_path)(text, add_special_tokens=False)["input_ids"] == want
