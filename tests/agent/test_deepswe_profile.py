"""The `deepswe` profile: R2E-Gym's tool interface (DeepSWE-Preview's training interface) through real episodes.

DeepSWE-format replies (execute_bash(cmd), file_editor(..., concise), finish(command=submit, result)) are replayed
through the real agent loop in a Docker sandbox of a micro task and graded by the real grader.
"""

from __future__ import annotations

import pytest

from swe_rl.agent.config import AgentConfig
from swe_rl.agent.loop import run_episode
from swe_rl.agent.prompts import Prompts
from swe_rl.policy.scripted import ReplayPolicy

TASK = "swe-rl-micro__exprcalc-2"


def call(name: str, thought: str, **params: str) -> str:
    """A DeepSWE reply: Qwen3 reasoning, then the call as R2E-Gym's Action.to_xml_string writes it (two-space
    indented parameters, one line each)."""
    inner = "".join(f"  <parameter={k}>{v}</parameter>\n" for k, v in params.items())
    return f"<think>\n{thought}\n</think>\n\n{thought}\n\n<function={name}>\n{inner}</function>"


DEEPSWE_REPLIES = [
    call("file_editor", "Let me see the parser's structure.", command="view",
         path="/testbed/exprcalc/parser.py", concise="True"),
    call("execute_bash", "Reproduce the issue.",
         cmd="python3 -c \"from exprcalc import evaluate; print(evaluate('-2 ^ 2'))\""),
    call("file_editor", "Unary minus must bind looser than ^.", command="str_replace",
         path="/testbed/exprcalc/parser.py", old_str="_UNARY_POWER = 50  # unary operators bind tightest",
         new_str="_UNARY_POWER = 30  # between * and ^"),
    call("execute_bash", "Check again.",
         cmd="python3 -c \"from exprcalc import evaluate; print(evaluate('-2 ^ 2'))\""),
    call("finish", "The issue is fixed.", command="submit", result="unary minus now binds looser than ^"),
]  # fmt: skip


def test_deepswe_prompts_show_r2e_tools(tmp_path):
    p = Prompts.load(AgentConfig(profile="deepswe"))
    for needle in ("FUNCTION #2: execute_bash", "(1) cmd (string, required)", "concise (boolean, optional)",
                   "FUNCTION #4: finish", "(1) command (string, required)", "(2) result (string, optional)"):  # fmt: skip
        assert needle in p.system, needle
    assert "submit" not in p.system.split("FUNCTION #4")[0].split("FUNCTION #1")[0]  # no `submit` tool listed
    assert "<github_issue>" in p.task("boom", "/testbed") and "boom" in p.task("boom", "/testbed")
    # an exact reproduction takes R2E-Gym's published agent YAML by path (its two prompt keys)
    y = tmp_path / "edit_non_fn_calling.yaml"
    y.write_text("system_prompt: |-\n  SYS\ninstance_prompt: |-\n  ISSUE {problem_statement}\n")
    p = Prompts.load(AgentConfig(profile="deepswe", prompt_config_file=str(y)))
    assert p.system == "SYS" and p.task("boom", "/testbed") == "ISSUE boom"
    y.write_text("system: x\n")
    with pytest.raises(ValueError, match=r"prompt_config_file=.*system_prompt and instance_prompt"):
        Prompts.load(AgentConfig(prompt_config_file=str(y)))


@pytest.mark.docker
@pytest.mark.timeout(600)
async def test_deepswe_calls_replayed_through_a_real_episode_resolve(qwen3_tokenizer, agent_check):
    """With DeepSWE's own tokenizer family and template (Qwen3, thinking on) and its interface."""
    from sandboxes.config import make_sandbox
    from swe_rl.grading.grader import docker_factory, grade
    from swe_rl.images.task_images import build_task_images
    from swe_rl.tasks.loaders import MICRO_SUITE, load_tasks

    assert all(r.status != "failed" for r in build_task_images(MICRO_SUITE, [TASK]))
    task = next(t for t in load_tasks("micro") if t.instance_id == TASK)
    cfg = AgentConfig(profile="deepswe", max_context_tokens=65536, max_steps=10,
                      chat_template_kwargs={"enable_thinking": True})  # fmt: skip
    tok = qwen3_tokenizer
    policy = ReplayPolicy(tok, DEEPSWE_REPLIES)
    async with make_sandbox({"backend": "docker"}, image=task.image, labels={"swe-rl.test": "agent"}) as sb:
        traj = await run_episode(task, sb, policy, tok, cfg)
    agent_check(traj, tok)
    assert traj.exit_status == "submitted" and traj.metrics["format_errors"] == 0
    obs = [m["content"] for m in traj.messages if m["role"] == "user"][1:]
    assert len(obs) == 4 and not any("ERROR" in o or "Unknown parameter" in o for o in obs), obs
    assert (
        obs[0].startswith("Execution output of [file_editor]:\nHere is a concise view") and "elided" in obs[0]
    )
    assert obs[1].startswith("Exit code: 0\nExecution output of [execute_bash]:\n[STDOUT]\n\n4.0"), obs[1]
    assert obs[3].startswith("Exit code: 0\nExecution output of [execute_bash]:\n[STDOUT]\n\n-4.0"), obs[3]
    assert traj.messages[-1]["action"] == {"name": "submit", "params": {"command": "submit",
                                           "result": "unary minus now binds looser than ^"}}  # fmt: skip
    result = await grade(task, traj.patch, docker_factory())
    assert result.failure is None and result.resolved and result.reward == 1.0, result.log[-2000:]
