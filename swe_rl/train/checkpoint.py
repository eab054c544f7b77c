"""Checkpoints: model, optimizer, RNG states, data cursor and EPO history, so `--resume` continues exactly.

Layout: <run>/checkpoints/step_<k>/{model.safetensors-like state via torch.save, state.pt}, written to a temp
folder and renamed so a killed save never leaves a half checkpoint. `latest(run)` finds the newest complete one.
"""

from __future__ import annotations

import random
import shutil
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import torch


@dataclass
class TrainState:
    """Everything besides the weights that the next step depends on."""

    step: int = 0  # number of completed RL steps
    task_rng: Any = None  # random.Random.getstate() of the task sampler (the data cursor)
    epo_history: list[float] = field(
        default_factory=list
    )  # batch mean entropy of each past step (EPO window)
    extra: dict[str, Any] = field(default_factory=dict)


def rng_states() -> dict[str, Any]:
    out = {"python": random.getstate(), "numpy": np.random.get_state(), "torch": torch.get_rng_state()}
    if torch.cuda.is_available() and torch.cuda.is_initialized():  # a GPU run's CUDA streams resume too
        out["cuda"] = [s.cpu() for s in torch.cuda.get_rng_state_all()]
    return out


def set_rng_states(states: dict[str, Any]) -> None:
    random.setstate(states["python"])
    np.random.set_state(states["numpy"])
    torch.set_rng_state(states["torch"].cpu())
    cuda = states.get("cuda")
    if cuda and torch.cuda.is_available() and len(cuda) == torch.cuda.device_count():
        torch.cuda.set_rng_state_all(cuda)  # a CPU machine resuming a GPU run keeps only the CPU streams


def save_checkpoint(
    directory: Path,
    model: Any,
    optimizer: torch.optim.Optimizer | None,
    state: TrainState,
    tokenizer: Any = None,
) -> Path:
    """Write step_<k>/ atomically; returns its path."""
    directory.mkdir(parents=True, exist_ok=True)
    final = directory / f"step_{state.step:06d}"
    tmp = directory / f".tmp_step_{state.step:06d}"
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir()
    model.save_pretrained(tmp / "model")
    if tokenizer is not None:
        from swe_rl.policy.tiny import save_tokenizer

        save_tokenizer(tokenizer, tmp / "model")
    torch.save(
        {
            "optimizer": optimizer.state_dict() if optimizer is not None else None,
            "rng": rng_states(),
            "step": state.step,
            "task_rng": state.task_rng,
            "epo_history": list(state.epo_history),
            "extra": state.extra,
        },
        tmp / "state.pt",
    )
    shutil.rmtree(final, ignore_errors=True)
    tmp.rename(final)
    return final


def load_checkpoint(path: Path, model: Any, optimizer: torch.optim.Optimizer | None) -> TrainState:
    """Load weights in place (the rollout policy shares the object), optimizer and RNG states."""
    from transformers import AutoModelForCausalLM

    loaded = AutoModelForCausalLM.from_pretrained(path / "model")
    model.load_state_dict(loaded.state_dict())  # copied onto the model's own device, whichever wrote them
    # a checkpoint written on a GPU holds CUDA optimizer tensors: read on the host, then the optimizer moves its
    # state onto each parameter's device (Optimizer.load_state_dict)
    blob = torch.load(path / "state.pt", weights_only=False, map_location="cpu")
    if optimizer is not None and blob["optimizer"] is not None:
        optimizer.load_state_dict(blob["optimizer"])
    set_rng_states(blob["rng"])
    return TrainState(
        step=blob["step"],
        task_rng=blob["task_rng"],
        epo_history=blob["epo_history"],
        extra=blob.get("extra", {}),
    )


def latest(directory: Path) -> Path | None:
    """Newest complete step_<k> folder under `directory`, or None."""
    if not directory.is_dir():
        return None
    done = sorted(p for p in directory.glob("step_*") if (p / "state.pt").is_file())
    return done[-1] if done else None


def prune(directory: Path, keep: int) -> None:
    """Delete all but the `keep` newest checkpoints."""
    done = sorted(p for p in directory.glob("step_*") if (p / "state.pt").is_file())
    for p in done[:-keep] if keep > 0 else []:
        shutil.rmtree(p, ignore_errors=True)
