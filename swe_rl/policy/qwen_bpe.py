"""Qwen's tiktoken BPE ranks as a Hugging Face `tokenizers` BPE: vocabulary, merges, normalizer, pre-tokenizer.

The ranks file lists each token's bytes (base64) and rank. HF's byte-level BPE needs each token as GPT-2's
byte-to-unicode string and one merge per non-byte token: the last merge tiktoken's own merge loop makes when it
encodes that token's bytes with only lower ranks available (151,387 merges for 151,643 ranks). Sources of every
fact: /work/shared/reference/qwen.md (Qwen's PAT_STR, torchtune's and transformers' Qwen2 tokenizers).
"""

from __future__ import annotations

import base64
from pathlib import Path
from typing import Any

N_RANKS = 151_643  # BPE tokens; the added tokens follow from this id
PRETOKENIZE_REGEX = r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+"


def _byte_encoder() -> dict[int, str]:
    """GPT-2's bytes_to_unicode: printable latin-1 bytes map to themselves, the other 68 to U+0100 + n."""
    keep = [*range(ord("!"), ord("~") + 1), *range(ord("¡"), ord("¬") + 1), *range(ord("®"), ord("ÿ") + 1)]
    mapping, extra = {b: chr(b) for b in keep}, 0
    for b in range(256):
        if b not in mapping:
            mapping[b] = chr(256 + extra)
            extra += 1
    return mapping


def load_ranks(tiktoken_file: Path) -> dict[bytes, int]:
    ranks = {}
    for line in tiktoken_file.read_bytes().splitlines():
        if line:
            tok, rank = line.split()
            ranks[base64.b64decode(tok)] = int(rank)
    if sorted(ranks.values()) != list(range(N_RANKS)):
        raise ValueError(f"{tiktoken_file}: expected ranks 0..{N_RANKS - 1} without gaps")
    return ranks


def _merge_of(token: bytes, rank: int, ranks: dict[bytes, int]) -> tuple[bytes, bytes]:
    """The last merge of tiktoken's merge loop on `token` using only lower ranks: the BPE merge that makes it."""
    parts = [token[i : i + 1] for i in range(len(token))]
    while len(parts) > 2:
        best, best_i = rank, -1
        for i in range(len(parts) - 1):
            r = ranks.get(parts[i] + parts[i + 1], rank)
            if r < best:
                best, best_i = r, i
        if best_i < 0:
            raise ValueError(f"token {token!r} (rank {rank}) cannot be built from lower ranks")
        parts[best_i : best_i + 2] = [parts[best_i] + parts[best_i + 1]]
    return parts[0], parts[1]


def vocab_and_merges(ranks: dict[bytes, int]) -> tuple[dict[str, int], list[tuple[str, str]]]:
    enc = _byte_encoder()
    show = lambda b: "".join(enc[x] for x in b)  # noqa: E731
    vocab = {show(tok): r for tok, r in ranks.items()}
    merges = []
    for tok, r in sorted(ranks.items(), key=lambda x: x[1]):
        if len(tok) > 1:  # the 256 single bytes are the alphabet, not merges
            left, right = _merge_of(tok, r, ranks)
            merges.append((show(left), show(right)))
    return vocab, merges


def backend(ranks: dict[bytes, int], added: list[tuple[str, bool]]) -> Any:
    from tokenizers import AddedToken, Regex, Tokenizer, decoders, normalizers, pre_tokenizers, processors
    from tokenizers.models import BPE

    vocab, merges = vocab_and_merges(ranks)
    tok = Tokenizer(
        BPE(vocab, merges, unk_token=None, fuse_unk=False, byte_fallback=False, ignore_merges=False)
    )
    tok.normalizer = normalizers.NFC()
    byte_level = dict(add_prefix_space=False, trim_offsets=False, use_regex=False)
    tok.pre_tokenizer = pre_tokenizers.Sequence(
        [
            pre_tokenizers.Split(Regex(PRETOKENIZE_REGEX), behavior="isolated", invert=False),
            pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False),
        ]
    )
    tok.post_processor = processors.ByteLevel(**byte_level)
    tok.decoder = decoders.ByteLevel(**byte_level)
    for i, (content, special) in enumerate(added):
        token = AddedToken(
            content, single_word=False, lstrip=False, rstrip=False, normalized=False, special=special
        )
        (tok.add_special_tokens if special else tok.add_tokens)([token])
        if tok.token_to_id(content) != N_RANKS + i:
            raise ValueError(
                f"added token {content!r} got id {tok.token_to_id(content)}, expected {N_RANKS + i}"
            )
    return tok
