"""Where the built-in trainer runs: `train.device` (auto / cpu / cuda / cuda:N) and `train.autocast` (off / bf16).

`auto` picks the first CUDA device when torch sees one, else the CPU; a data source that cannot run on CUDA (its
environment feeds the model host tensors itself, e.g. the toy experiments) stays on the CPU under `auto` and is an
error with an explicit `cuda`. On the CPU nothing changes: same tensors, same random streams, no autocast.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any

import torch


def resolve_device(name: str, *, cuda_ok: bool = True, source: str = "") -> torch.device:
    """The torch.device of a `train.device` value. `cuda_ok=False` (a data source that is CPU-only): auto
    gives the CPU, an explicit cuda is an error naming the source."""
    if name == "auto":
        return torch.device("cuda" if cuda_ok and torch.cuda.is_available() else "cpu")
    dev = torch.device(name)
    if dev.type == "cuda":
        if not cuda_ok:
            raise ValueError(
                f"train.device={name}: data.source={source} runs on the CPU only (use auto or cpu)"
            )
        if not torch.cuda.is_available():
            raise ValueError(f"train.device={name}: torch sees no CUDA device here (use auto or cpu)")
        if dev.index is not None and dev.index >= torch.cuda.device_count():
            raise ValueError(f"train.device={name}: only {torch.cuda.device_count()} CUDA device(s) here")
    return dev


def model_device(model: Any) -> torch.device:
    """The device of a model's first parameter (CPU for a model without parameters)."""
    p = next(iter(model.parameters()), None)
    return p.device if p is not None else torch.device("cpu")


def autocast_dtype(mode: str) -> torch.dtype | None:
    return {"off": None, "bf16": torch.bfloat16}[mode]


@contextlib.contextmanager
def autocast(device: torch.device, dtype: torch.dtype | None) -> Iterator[None]:
    """torch.autocast on `device` with `dtype`; a no-op when dtype is None (fp32, the CPU default)."""
    if dtype is None:
        yield
        return
    with torch.autocast(device_type=device.type, dtype=dtype):
        yield
