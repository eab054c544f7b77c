"""The experiment environments as `swe-rl train` data sources: `toy` (two-turn toy episodes) and `decisions`
(the in-process multi-decision environment, with its own SFT start). Registered in the trainer's
DATA_SOURCES table (swe_rl.train.sources) when swe_rl.experiments is imported, so the trainer never imports them
itself. Light at import (the environments' modules load when a source is built): the swe-rl CLI imports it."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from swe_rl.train.sources import DataSource, Env, register_source

if TYPE_CHECKING:
    from swe_rl.train.config import TrainConfig


def _with_progress(roll: Any, progress: Any, label: str = "rollouts") -> Any:
    from swe_rl.train.progress import ProgressRollouter

    return ProgressRollouter(roll, progress, label) if progress is not None else roll


def toy_env(cfg: TrainConfig, model: Any, tok: Any, progress: Any = None) -> Env:
    """The two-turn toy environment (no sandboxes; for smoke runs and tests)."""
    from swe_rl.experiments.toy import ToyRollouter, toy_sampler, toy_tasks

    toy = ToyRollouter(model, tok, temperature=cfg.rollout.temperature)
    return Env(_with_progress(toy, progress), toy_tasks(10, stride=2), toy_sampler)


def decisions_env(cfg: TrainConfig, model: Any, tok: Any, progress: Any = None) -> Env:
    """The in-process multi-decision environment (swe_rl.experiments.decisions): no sandboxes."""
    from swe_rl.experiments.decisions import DecisionRollouter, decision_tasks
    from swe_rl.experiments.toy import toy_sampler
    from swe_rl.train.evaluate import HeldOutEval

    roll = DecisionRollouter(model, tok, temperature=cfg.rollout.temperature,
                             reason_first=cfg.data.decisions.reason_first)  # fmt: skip
    tasks = decision_tasks("train", cfg.data.n_train, cfg.data.seed, field="data.n_train")
    held = decision_tasks(cfg.eval.split, cfg.eval.n_tasks, cfg.data.seed, field="eval.n_tasks")
    evaluator = HeldOutEval(_with_progress(roll, progress, "held-out"), held, sampled=cfg.eval.sampled)
    return Env(_with_progress(roll, progress), tasks, toy_sampler, evaluator)


def decisions_start(cfg: TrainConfig) -> str:
    """Its start: SFT on noisy demonstrations, built once into a folder keyed by the config."""
    from swe_rl.experiments.decisions import build_start, start_folder

    return str(build_start(cfg, start_folder(cfg)))


register_source("toy", DataSource(toy_env))
register_source("decisions", DataSource(decisions_env, start=decisions_start))
