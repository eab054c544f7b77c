"""Helpers for the evaluation tests: a short-episode eval config over the bundled micro suite."""

from __future__ import annotations

import json
from pathlib import Path

import pytest


@pytest.fixture(scope="session")
def eval_config_factory():
    """Build an EvalConfig with short episodes; keyword overrides as dotted keys (pool.num_actors=2 ...)."""
    from swe_rl.config import load_config
    from swe_rl.evaluation.config import EvalConfig

    def make(out: Path, name: str, *overrides: str) -> EvalConfig:
        base = [
            f"output_dir={out}",
            f"name={name}",
            "agent.max_steps=10",
            "pool.num_actors=2",
            "pool.episodes_per_actor=2",
            "pool.progress=false",
        ]
        return load_config(EvalConfig, overrides=[*base, *overrides])

    return make


def eval_report_body(path: Path) -> dict:
    """report.json without the fields that name the run or where it ran (Ray node ids differ from run to run):
    two runs of the same setup must agree on the rest."""
    rep = json.loads(Path(path).read_text())
    rep.pop("name", None)
    rep.pop("per_node", None)
    return rep


@pytest.fixture(scope="session")
def eval_report_reader():
    return eval_report_body


@pytest.fixture(scope="session")
def eval_containers():
    """Containers of one evaluation (label sandboxes.run_id=eval-<name>), in any state."""
    import docker

    client = docker.from_env()

    def list_for(name: str) -> list:
        return client.containers.list(all=True, filters={"label": f"sandboxes.run_id=eval-{name}"})

    return list_for
