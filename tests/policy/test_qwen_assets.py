"""The offline Qwen2.5 / Qwen3 tokenizers against public token-id vectors and tiktoken, and the tiny real-vocab models."""

from __future__ import annotations

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from swe_rl.policy import qwen_assets


def ids(tok, text: str) -> list[int]:
    return tok(text, add_special_tokens=False)["input_ids"]


@pytest.mark.parametrize("flavor", ["qwen25", "qwen3"])
def test_all_public_qwen2_vectors_match(flavor, request):
    tok = request.getfixturevalue(f"{flavor}_tokenizer")
    vectors = qwen_assets.vocab_vectors()
    assert len(vectors) == 46
    wrong = [(text, ids(tok, text), want) for text, want in vectors if ids(tok, text) != want]
    assert wrong == []


def test_added_tokens_ids_and_config(qwen25_tokenizer, qwen3_tokenizer, qwen3_tokenizer_dir):
    assert len(qwen25_tokenizer) == 151_665 and len(qwen3_tokenizer) == 151_669
    for tok in (qwen25_tokenizer, qwen3_tokenizer):
        assert tok.convert_tokens_to_ids(["<|endoftext|>", "<|im_start|>", "<|im_end|>"]) == [
            151643,
            151644,
            151645,
        ]
        assert tok.convert_tokens_to_ids(["<tool_call>", "<|file_sep|>"]) == [151657, 151664]
        assert (tok.eos_token, tok.pad_token, tok.bos_token, tok.unk_token) == (
            "<|im_end|>",
            "<|endoftext|>",
            None,
            None,
        )
    assert ids(qwen3_tokenizer, "<think></think><tool_response>") == [151667, 151668, 151665]
    assert ids(qwen25_tokenizer, "<think>") == [13708, 766, 29]  # plain text before Qwen3
    assert ids(qwen25_tokenizer, "<tool_response>") == [27, 14172, 9655, 29]
    assert ids(qwen3_tokenizer, 'print("<|endoftext|>")') == [
        1350,
        445,
        151643,
        899,
    ]  # Qwen's tokenization note
    merges = json.loads((qwen3_tokenizer_dir / "tokenizer.json").read_text())["model"]["merges"]
    assert len(merges) == 151_643 - 256


def test_real_chat_templates(qwen25_tokenizer, qwen3_tokenizer):
    msgs = [
        {"role": "system", "content": "You are Qwen, created by Alibaba Cloud."},
        {"role": "user", "content": "Hi"},
    ]
    text = qwen25_tokenizer.apply_chat_template(msgs, tokenize=False, add_generation_prompt=True)
    assert ids(qwen25_tokenizer, text)[:10] == [151644, 8948, 198, 2610, 525, 1207, 16948, 11, 3465, 553]
    default = qwen25_tokenizer.apply_chat_template(msgs[1:], tokenize=False)
    assert default.startswith("<|im_start|>system\nYou are Qwen, created by Alibaba Cloud. You are a helpful")
    off = qwen3_tokenizer.apply_chat_template(
        msgs, tokenize=False, add_generation_prompt=True, enable_thinking=False
    )
    assert off.endswith("<|im_start|>assistant\n<think>\n\n</think>\n\n")
    history = [*msgs[1:], {"role": "assistant", "content": "<think>\nr\n</think>\n\nHello"}, msgs[1]]
    assert "<think>" not in qwen3_tokenizer.apply_chat_template(
        history, tokenize=False
    )  # old reasoning dropped


_texts = st.text(st.characters(blacklist_categories=("Cs",)), max_size=60) | st.from_regex(
    r"(\s|[a-z_]{1,8}|[(){}:.,=+\-*/]|\d{1,5}|[\u4e00-\u4e10]|\U0001F999){1,30}", fullmatch=True
)


@pytest.fixture(scope="module")
def tiktoken_qwen():
    tiktoken = pytest.importorskip("tiktoken")
    ranks = qwen_assets.load_ranks(qwen_assets.fetch() / "qwen.tiktoken")
    return tiktoken.Encoding(
        "qwen", pat_str=qwen_assets.PRETOKENIZE_REGEX, mergeable_ranks=ranks, special_tokens={}
    )


@settings(max_examples=150, deadline=None)
@given(text=_texts)
def test_matches_tiktoken_and_round_trips(text, qwen3_tokenizer, tiktoken_qwen):
    import unicodedata

    text = unicodedata.normalize("NFC", text)  # Qwen normalises to NFC before BPE
    got = ids(qwen3_tokenizer, text)
    if not any(
        t in text for t, _ in qwen_assets.ADDED_TOKENS + qwen_assets.QWEN3_EXTRA
    ):  # unknown to tiktoken
        assert got == tiktoken_qwen.encode_ordinary(text)
    assert qwen3_tokenizer.decode(got) == text


def test_tiny_models_have_the_real_embedding(qwen25_tiny_model_dir, qwen3_tiny_model_dir):
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    for folder, arch in ((qwen25_tiny_model_dir, "qwen2"), (qwen3_tiny_model_dir, "qwen3")):
        model = AutoModelForCausalLM.from_pretrained(folder)
        tok = AutoTokenizer.from_pretrained(folder)
        assert model.config.model_type == arch and model.get_input_embeddings().weight.shape == (151_936, 64)
        assert model.config.eos_token_id == 151645 and model.generation_config.eos_token_id == [
            151645,
            151643,
        ]
        with torch.no_grad():
            logits = model(torch.tensor([ids(tok, "<|im_start|>user\nhi")])).logits
        assert logits.shape[-1] == 151_936 and torch.isfinite(logits).all()


def test_bad_flavor_and_cache_is_reused(qwen3_tokenizer_dir):
    with pytest.raises(ValueError, match="flavor='qwen4'"):
        qwen_assets.build_qwen_tokenizer("qwen4", qwen3_tokenizer_dir.parent / "never")  # type: ignore[arg-type]
    assert (
        qwen_assets.cached_tokenizer("qwen3") == qwen3_tokenizer_dir
    )  # same content -> same folder, no rebuild
