"""A saved tiny checkpoint reloads with the exact tokenizer it was trained with (through every loader we use)."""

from __future__ import annotations

from swe_rl.policy.tiny import build_tiny_model, load_tokenizer, save_tokenizer
from swe_rl.rollout.policies import HFPolicySpec


def test_checkpoint_tokenizer_round_trip(tmp_path, tiny_tokenizer):
    text = "<|im_start|>user\nx * 12345 + 67 returns 890<|im_end|>\n"
    model = build_tiny_model(tiny_tokenizer, arch="qwen2", size="tiny")
    model.save_pretrained(tmp_path)
    save_tokenizer(tiny_tokenizer, tmp_path)
    want = tiny_tokenizer(text, add_special_tokens=False)["input_ids"]
    assert load_tokenizer(tmp_path)(text, add_special_tokens=False)["input_ids"] == want
    shared = HFPolicySpec(model=str(tmp_path)).build()
    assert shared.tokenizer(text, add_special_tokens=False)["input_ids"] == want
