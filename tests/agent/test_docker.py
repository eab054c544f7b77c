"""End to end in real Docker sandboxes on the micro suite: the gold policy's patch (made through the tools) is graded
resolved by the grading module; a tiny random model's episode is well-formed."""

from __future__ import annotations

import pytest

from swe_rl.agent.config import AgentConfig
from swe_rl.agent.loop import run_episode
from swe_rl.policy.scripted import ScriptedGoldPolicy

pytestmark = [pytest.mark.docker, pytest.mark.timeout(600)]


@pytest.fixture(scope="module")
def agent_micro():
    from swe_rl.images.task_images import build_task_images
    from swe_rl.tasks.loaders import MICRO_SUITE, load_tasks

    ids = ["swe-rl-micro__confini-1", "swe-rl-micro__exprcalc-2"]
    results = build_task_images(MICRO_SUITE, ids)  # skips images that exist
    assert all(r.status != "failed" for r in results), results
    tasks = {t.instance_id: t for t in load_tasks("micro")}
    picked = [tasks[i] for i in ids]
    return {t.instance_id: t for t in picked}


def docker_sandbox(task):
    from sandboxes.config import make_sandbox

    return make_sandbox({"backend": "docker"}, image=task.image, labels={"swe-rl.test": "agent"})


@pytest.mark.parametrize("instance_id", ["swe-rl-micro__confini-1", "swe-rl-micro__exprcalc-2"])
async def test_gold_policy_resolves_micro_task(instance_id, agent_micro, tiny_tokenizer, agent_check):
    from swe_rl.grading.grader import docker_factory, grade

    task = agent_micro[instance_id]
    cfg = AgentConfig(max_context_tokens=200_000)
    async with docker_sandbox(task) as sb:
        traj = await run_episode(task, sb, ScriptedGoldPolicy(task, tiny_tokenizer), tiny_tokenizer, cfg)
    assert traj.exit_status == "submitted", traj.messages[-1]
    agent_check(traj, tiny_tokenizer)
    assert traj.patch.strip() and "__pycache__" not in traj.patch
    result = await grade(task, traj.patch, docker_factory())
    assert result.failure is None and result.resolved and result.reward == 1.0, result.log[-2000:]


async def test_tiny_model_episode_in_docker(agent_micro, tiny_tokenizer, agent_check, tmp_path):
    from swe_rl.policy.hf import HFLocalPolicy
    from swe_rl.policy.tiny import build_tiny_model

    task = agent_micro["swe-rl-micro__confini-1"]
    (tmp_path / "s.md").write_text("Fix the issue with the tools.")
    (tmp_path / "t.md").write_text("Issue in {repo_dir}: {problem_statement}")
    cfg = AgentConfig(
        system_prompt_file=str(tmp_path / "s.md"), task_prompt_file=str(tmp_path / "t.md"),
        max_new_tokens=16, max_format_errors=2, seed=0,
    )  # fmt: skip
    policy = HFLocalPolicy(build_tiny_model(tiny_tokenizer, arch="qwen3", seed=2), tiny_tokenizer)
    async with docker_sandbox(task) as sb:
        traj = await run_episode(task, sb, policy, tiny_tokenizer, cfg)
    await policy.close()
    agent_check(traj, tiny_tokenizer)
    assert traj.exit_status == "format_errors" and traj.patch == ""  # random text edits nothing
