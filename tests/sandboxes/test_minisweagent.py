"""mini-swe-agent's real DefaultAgent loop, driven by its DeterministicModel, inside a DockerSandbox."""

from __future__ import annotations

import time

import pytest

pytest.importorskip("minisweagent")

from minisweagent.agents.default import DefaultAgent
from minisweagent.config import get_config_from_spec
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


@pytest.mark.docker
def test_shipped_swebench_config_episode(sbx_cfg, sbx_docker_client):
    """mini-swe-agent's own swebench.yaml (agent templates, environment section with interpreter/env/cwd, model
    observation template) drives a scripted fix of a micro task in a DockerSandbox at /testbed."""
    config = get_config_from_spec("swebench.yaml")
    env_cfg = config["environment"] | {
        "environment_class": "sandboxes.adapters.minisweagent.SandboxEnvironment",
        "sandbox": sbx_cfg(workdir="/testbed").model_dump(),
        "container_timeout": "20m",
    }
    env = get_environment(env_cfg)
    try:
        labels = sbx_docker_client.api.inspect_container(env.sandbox.id)["Config"]["Labels"]
        assert abs(float(labels["sandboxes.expires_at"]) - time.time() - 1200) < 120  # container_timeout
        setup = "printf 'def add(a, b):\\n    return a - b\\n' > calc.py && git init -q && git add . && git commit -qm i"
        assert env.execute({"command": setup})["returncode"] == 0  # what env_startup_command would do
        fix = "sed -i 's/a - b/a + b/' calc.py && python3 -c 'import calc; assert calc.add(2, 3) == 5' && echo ok $PAGER"
        model = DeterministicModel(
            outputs=[
                make_output("fix it", [{"command": fix}]),
                make_output(
                    "submit", [{"command": "echo COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT && git diff"}]
                ),
            ],
            observation_template=config["model"]["observation_template"],
        )
        agent = DefaultAgent(model, env, **config["agent"])
        info = agent.run("add() subtracts")
    finally:
        env.cleanup()
    assert info["exit_status"] == "Submitted"
    assert "-    return a - b\n+    return a + b" in info["submission"]
    fixed = [m["content"] for m in agent.messages if m["role"] in ("user", "tool")][-1]
    assert "<returncode>0</returncode>" in fixed and "ok cat" in fixed  # the config's env (PAGER=cat)
    assert "add() subtracts" in agent.messages[1]["content"]  # the shipped instance template rendered


def test_interpreter_and_forward_env(monkeypatch):
    monkeypatch.setenv("SBX_FORWARDED", "from-host")
    py = SandboxEnvironment(sandbox=LocalSandboxConfig().model_dump(), interpreter=["python3", "-c"])
    sh = SandboxEnvironment(
        sandbox=LocalSandboxConfig().model_dump(), forward_env=["SBX_FORWARDED", "SBX_UNSET"], env={"B": "b"}
    )
    try:
        out = py.execute({"command": "import sys; print(sys.version_info[0]); sys.exit(3)"})
        assert (out["output"], out["returncode"]) == ("3\n", 3)  # a non-bash interpreter gets the command
        out = sh.execute({"command": 'echo "$SBX_FORWARDED ${SBX_UNSET-none} $B"'})
        assert out["output"] == "from-host none b\n"
        assert sh.get_template_vars(extra=1)["forward_env"] == ["SBX_FORWARDED", "SBX_UNSET"]
    finally:
        py.cleanup()
        sh.cleanup()
    with pytest.raises(ValueError, match="run_args"):
        SandboxEnvironment(sandbox=LocalSandboxConfig().model_dump(), run_args=["--privileged"])
