"""Helpers for trainer tests: a tiny toy-environment run in a temporary run directory."""

from __future__ import annotations

import pytest


@pytest.fixture
def train_toy_setup(tmp_path):
    """Factory: (cfg overrides) -> (cfg, run, model, tokenizer, rollouter, tasks), all fresh and seeded."""
    from swe_rl.experiments.toy import ToyRollouter, toy_tasks
    from swe_rl.policy.tiny import build_tiny_model, build_tokenizer
    from swe_rl.runs import RunDir
    from swe_rl.train.config import TrainConfig

    tok = build_tokenizer()

    def make(name: str = "toy", **overrides):
        cfg = TrainConfig(name=name, out_dir=str(tmp_path), seed=0, save_every=0, log_trajectories=0)
        cfg.rollout.tasks_per_step = 8
        cfg.rollout.n_samples = 8
        cfg.optim.lr = 3e-3
        for key, value in overrides.items():
            target = cfg
            *path, last = key.split(".")
            for p in path:
                target = getattr(target, p)
            setattr(target, last, value)
        model = build_tiny_model(tok, size="tiny", seed=0)
        run = RunDir.create(cfg.out_dir, cfg.name)
        return cfg, run, model, tok, ToyRollouter(model, tok), toy_tasks(10, stride=2)

    return make
