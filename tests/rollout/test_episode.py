"""rollout_one is the single exception boundary: every failure becomes an error trajectory, never an exception."""

from __future__ import annotations

import pytest

from swe_rl.policy.openai import OpenAIPolicy
from swe_rl.policy.scripted import ScriptedGoldPolicy
from swe_rl.rollout.context import grading_reward_fn, task_sandbox_factory
from swe_rl.rollout.episode import rollout_one

pytestmark = pytest.mark.docker


async def test_gold_episode_is_graded_resolved(rollout_task, rollout_agent_cfg, tiny_tokenizer):
    factory = task_sandbox_factory({"backend": "docker"}, run_id="rollout-ep-gold")
    policy = ScriptedGoldPolicy(rollout_task, tiny_tokenizer)
    traj = await rollout_one(
        rollout_task,
        3,
        policy,
        factory,
        rollout_agent_cfg,
        grading_reward_fn(factory),
        tokenizer=tiny_tokenizer,
    )
    assert traj.error is None, traj.error
    assert (traj.task_id, traj.sample_idx, traj.exit_status) == (rollout_task.instance_id, 3, "submitted")
    assert traj.reward == 1.0 and traj.resolved and traj.patch.startswith("diff --git")
    assert traj.metrics["grading"]["failure"] is None and traj.metrics["grading_s"] > 0


async def test_sandbox_start_failure_is_an_error_trajectory(rollout_task, rollout_agent_cfg, tiny_tokenizer):
    task = rollout_task.model_copy(update={"image": "swe-rl/does-not-exist:never"})
    factory = task_sandbox_factory({"backend": "docker", "pull": "never"}, run_id="rollout-ep-noimg")
    traj = await rollout_one(
        task,
        0,
        ScriptedGoldPolicy(task, tiny_tokenizer),
        factory,
        rollout_agent_cfg,
        None,
        tokenizer=tiny_tokenizer,
    )
    assert traj.exit_status == "error" and traj.reward is None and not traj.resolved
    assert "SandboxStartError" in traj.error


async def test_policy_server_down_keeps_the_partial_trajectory(
    rollout_task, rollout_agent_cfg, tiny_tokenizer
):
    factory = task_sandbox_factory({"backend": "docker"}, run_id="rollout-ep-down")
    down = OpenAIPolicy("http://127.0.0.1:9/v1", "m", max_retries=1, backoff_s=0.01, request_timeout_s=5)
    traj = await rollout_one(
        rollout_task,
        1,
        down,
        factory,
        rollout_agent_cfg,
        grading_reward_fn(factory),
        tokenizer=tiny_tokenizer,
    )
    assert traj.exit_status == "error" and traj.reward is None and traj.truncated and not traj.terminated
    assert traj.sample_idx == 1 and traj.error and "Traceback" in traj.error
    assert traj.prompt_len > 0 or traj.messages  # the agent's partial record (prompt built) survives
    # its kind, and the evaluation report names it with its error (it said "episode_error" and nothing more)
    from swe_rl.evaluation.report import build_report, episode_from, report_markdown

    assert traj.metrics["infra_failure"] == "policy_server_error"
    rep = build_report([episode_from(traj, None, "r")], 1, {"name": "x"})
    assert rep["infra_failure_labels"] == {"policy_server_error": 1}
    first = rep["infra_failure_examples"]["policy_server_error"]
    assert first.startswith(
        "swe_rl.policy.openai.PolicyServerError: POST http://127.0.0.1:9/v1/completions"
    ), first
    assert f"- policy_server_error, the first: `{first}`" in report_markdown(rep, [])


async def test_grader_exception_and_empty_patch(rollout_task, rollout_agent_cfg, tiny_tokenizer):
    from swe_rl.policy.scripted import ReplayPolicy

    factory = task_sandbox_factory({"backend": "docker"}, run_id="rollout-ep-grader")

    def broken_grader(task, patch):
        raise RuntimeError("grader crashed")

    submit_now = ReplayPolicy(tiny_tokenizer, ["<function=submit></function>"])
    empty = await rollout_one(
        rollout_task, 0, submit_now, factory, rollout_agent_cfg, broken_grader, tokenizer=tiny_tokenizer
    )
    # An empty patch is scored 0 without calling the grader (it cannot resolve anything).
    assert (
        empty.exit_status == "submitted" and empty.patch == "" and empty.reward == 0.0 and empty.error is None
    )
    gold = ScriptedGoldPolicy(rollout_task, tiny_tokenizer)
    crashed = await rollout_one(
        rollout_task, 0, gold, factory, rollout_agent_cfg, broken_grader, tokenizer=tiny_tokenizer
    )
    assert crashed.exit_status == "submitted" and crashed.reward is None and "grader crashed" in crashed.error
    assert crashed.metrics["grading"]["failure"] == "grader_exception"


@pytest.mark.parametrize("prepare", [True, False])
async def test_a_generated_tasks_repo_is_in_the_sandbox_before_the_agent_starts(
    rollout_agent_cfg, tiny_tokenizer, prepare
):
    from swe_rl.agent.trajectory import Trajectory
    from swe_rl.tasks.generator import generate_tasks

    (task,) = generate_tasks(1, split="held_out", seed=5)
    task = task.model_copy(update={"metadata": {**task.metadata, "setup_script": "touch /tmp/setup-ran"}})
    seen: dict[str, str] = {}

    async def look(task, sandbox, policy, tokenizer, cfg, *, sample_idx=0):
        # what an agent would find: the repo committed once at /testbed, the setup script already run
        res = await sandbox.exec(
            "cd /testbed && git log --oneline | wc -l; ls; ls /tmp/setup-ran", timeout=30
        )
        seen["out"] = res.output
        return Trajectory(task_id=task.instance_id, exit_status="submitted")

    factory = task_sandbox_factory({"backend": "docker"}, run_id="rollout-ep-prepare")
    traj = await rollout_one(
        task, 0, None, factory, rollout_agent_cfg, None, episode_fn=look, prepare=prepare
    )
    assert traj.error is None, traj.error
    if prepare:
        n_commits, *files = seen["out"].split()
        assert n_commits == "1" and set(task.metadata["files"]) <= set(files), seen["out"]
        assert "/tmp/setup-ran" in files, seen["out"]
    else:  # the caller's sandboxes hold the repo (trainer slots): nothing is written twice
        assert "/testbed: No such file" in seen["out"], seen["out"]
        assert "cannot access '/tmp/setup-ran'" in seen["out"], seen["out"]
