"""One clear line for a model path that is not a usable Hugging Face folder, before anything loads it.

Every entry point that takes a model folder (`swe-rl eval`, `train`, `sft`, `demo`, `gateway`, `train-openrlhf`)
calls `check_model_dir`; without it transformers answers a missing `./runs/x` with a long traceback ending in
"Repo id must use alphanumeric chars". A hub id (`Qwen/Qwen3-32B`) that is not a local folder is left to
transformers (it may be in the HF cache or downloadable) unless `local_only`.
"""

from __future__ import annotations

import re
from pathlib import Path

TOKENIZER_FILES = ("tokenizer.json", "tokenizer_config.json", "vocab.json", "tokenizer.model")
WEIGHT_SUFFIXES = (".safetensors", ".bin", ".pt", ".gguf")
_HUB_ID = re.compile(r"^[A-Za-z0-9][\w.-]*/[\w.-]+$")  # owner/name, no leading ./ or /


class ModelPathError(ValueError):
    """The model path is missing or not a usable HF folder; str(e) is the one line to show."""


def looks_like_hub_id(path: str) -> bool:
    return bool(_HUB_ID.match(path)) and not Path(path).exists() and ".." not in path


def check_model_dir(
    path: str | Path, field: str, *, weights: bool = True, tokenizer: bool = True, local_only: bool = False
) -> None:
    """Raise ModelPathError naming `field` when `path` is not a folder with config.json (and weights, and a
    tokenizer, as asked). A hub id that is not a local path passes unless `local_only`."""
    text = str(path)
    if not text:
        raise ModelPathError(f"{field}: empty model path (expected a Hugging Face model folder)")
    if not local_only and looks_like_hub_id(text):
        return
    p = Path(text)
    expected = "a folder written by save_pretrained: config.json, the weights and the tokenizer files"
    if not p.exists():
        raise ModelPathError(f"{field}={text!r}: no such folder (expected {expected})")
    if not p.is_dir():
        raise ModelPathError(f"{field}={text!r}: is a file, not a model folder (expected {expected})")
    if weights and not (p / "config.json").is_file():
        raise ModelPathError(f"{field}={text!r}: no config.json in the folder (expected {expected})")
    if weights and not any(f.name.endswith(WEIGHT_SUFFIXES) for f in p.iterdir()):
        raise ModelPathError(f"{field}={text!r}: no weights (*.safetensors / *.bin) in the folder")
    if tokenizer and not any((p / name).is_file() for name in TOKENIZER_FILES):
        raise ModelPathError(
            f"{field}={text!r}: no tokenizer in the folder (expected one of {', '.join(TOKENIZER_FILES)})"
        )


def check_policy_paths(spec: object, field: str) -> None:
    """The model folders a rollout policy spec names (swe_rl.rollout.policies): hf model + tokenizer, openai
    tokenizer. Other kinds (tiny, scripted) name none."""
    kind = getattr(spec, "kind", None)
    if kind == "hf":
        check_model_dir(spec.model, f"{field}.model", tokenizer=not getattr(spec, "tokenizer", None))  # type: ignore[attr-defined]
        if getattr(spec, "tokenizer", None):
            check_model_dir(spec.tokenizer, f"{field}.tokenizer", weights=False)  # type: ignore[attr-defined]
    elif kind == "openai":
        check_model_dir(spec.tokenizer, f"{field}.tokenizer", weights=False)  # type: ignore[attr-defined]
