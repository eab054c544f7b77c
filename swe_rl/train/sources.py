"""The `data.source` table of the built-in trainer: `DataSource(build, start, engines)` by name.

A light module (no torch, no sandboxes) so that packages built on the trainer can register their environments at
import without paying for the trainer: swe_rl.train.run registers `generated` and `tasks`, swe_rl.experiments
registers `toy` and `decisions`. The trainer itself imports no experiment.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from swe_rl.train.config import TrainConfig


@dataclass
class Env:
    rollouter: Any
    tasks: list[Any]
    sample_tasks: Callable[..., list[Any]]
    evaluator: Any = None  # HeldOutEval or None
    close: Callable[[], None] = lambda: None


@dataclass(frozen=True)
class DataSource:
    """One `data.source`: `build(cfg, model, tok, progress) -> Env`; `start(cfg) -> model.init` when the config
    names no model.init; `engines`: the rollout.engine values its episodes can generate with; `cuda`: its
    environment follows the model's device (train.device auto picks CUDA only then)."""

    build: Callable[[TrainConfig, Any, Any, Any], Env]
    start: Callable[[TrainConfig], str] | None = None
    engines: tuple[str, ...] = ("hf",)
    cuda: bool = False


DATA_SOURCES: dict[str, DataSource] = {}  # filled at import by the packages that own sources


def register_source(name: str, source: DataSource) -> None:
    DATA_SOURCES[name] = source


def data_source(cfg: TrainConfig) -> DataSource:
    """The registered source of cfg.data.source; one error naming the field and the names there are."""
    name = cfg.data.source
    src = DATA_SOURCES.get(name)
    if src is None:
        raise ValueError(
            f"data.source={name!r}: unknown; registered: {', '.join(sorted(DATA_SOURCES))} (experiment "
            "environments such as toy and decisions register when swe_rl.experiments is imported, as the "
            "swe-rl command does)"
        )
    if cfg.rollout.engine not in src.engines:
        raise ValueError(
            f"rollout.engine={cfg.rollout.engine} needs data.source=generated "
            f"(data.source={name} supports rollout.engine {', '.join(src.engines)})"
        )
    return src
