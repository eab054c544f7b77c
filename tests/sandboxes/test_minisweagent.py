"""mini-swe-agent's real DefaultAgent loop, driven by its DeterministicModel, inside a DockerSandbox."""

from __future__ import annotations

import pytest

pytest.importorskip("minisweagent")

from minisweagent.agents.default import DefaultAgent
from minisweagent.environments import get_environment
from minisweagent.models.test_models import DeterministicModel, make_output

from sandboxes import LocalSandboxConfig, SandboxError
from sandboxes.adapters.minisweagent import SandboxEnvironment


def _agent(env) -> DefaultAgent:
    model = DeterministicModel(
        outputs=[
            make_output(
                "go to a scratch dir",
                [{"command": "mkdir -p scratch/w && cd scratch/w && export GREETING=hi"}],
            ),
            make_output("write a file", [{"command": 'printf "%s from %s\\n" "$GREETING" "$PWD" > out.txt'}]),
            make_output("fail on purpose", [{"command": "cat missing.txt"}]),
            make_output("too slow", [{"command": "sleep 30"}]),
            make_output("submit", [{"command": "echo COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT && cat out.txt"}]),
        ]
    )
    return DefaultAgent(
        model,
        env,
        system_template="You are a test agent on {{system}}.",
        instance_template="Task: {{task}} (timeout {{timeout}})",
        step_limit=10,
        cost_limit=100.0,
    )


@pytest.mark.docker
def test_default_agent_loop_in_docker_sandbox(sbx_cfg, sbx_docker_client):
    env = SandboxEnvironment(sandbox=sbx_cfg().model_dump(), timeout=2)
    try:
        cid = env.sandbox.id
        assert sbx_docker_client.api.inspect_container(cid)["HostConfig"]["NetworkMode"] == "none"
        agent = _agent(env)
        info = agent.run("write a greeting")
    finally:
        env.cleanup()
    assert info["exit_status"] == "Submitted"
    assert info["submission"] == "hi from /scratch/w\n"  # cwd and env persisted across actions
    observations = [m["content"] for m in agent.messages if m["role"] == "user"][1:]
    assert "<returncode>1</returncode>" in observations[2] and "No such file" in observations[2]
    assert "timed out after 2s" in observations[3]
    assert agent.save(None)["info"]["config"]["environment_type"].endswith("SandboxEnvironment")
    with pytest.raises(SandboxError):
        env.sandbox.exec("true")  # closed by cleanup


def test_environment_class_from_minisweagent_config():
    # mini-swe-agent's own factory resolves our class from a dotted path in its config
    env = get_environment(
        {
            "environment_class": "sandboxes.adapters.minisweagent.SandboxEnvironment",
            "sandbox": LocalSandboxConfig().model_dump(),
            "timeout": 2,
        }
    )
    try:
        assert isinstance(env, SandboxEnvironment)
        info = _agent(env).run("write a greeting")
        assert info["exit_status"] == "Submitted"
        assert info["submission"] == f"hi from {env.sandbox.sandbox.root}/scratch/w\n"
    finally:
        env.cleanup()
