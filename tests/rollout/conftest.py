"""Helpers for rollout tests: one micro-suite task with its image built, and a sandbox config for it."""

from __future__ import annotations

import pytest


@pytest.fixture(scope="session")
def rollout_task():
    """The first micro-suite task, its image built if missing (through the tasks package's builder)."""
    from swe_rl.images.task_images import prepare_images
    from swe_rl.tasks.loaders import load_tasks

    task = sorted(load_tasks("micro"), key=lambda t: t.instance_id)[0]
    assert prepare_images([task], "micro") == {}
    return task


@pytest.fixture(scope="session")
def rollout_agent_cfg():
    from swe_rl.agent.config import AgentConfig

    return AgentConfig(max_steps=8, temperature=0.0)
