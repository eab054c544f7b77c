"""One scripted SWE-agent episode in a DockerSandbox through SandboxDeployment (SWE-agent 1.x, real classes).

SWE-agent is not installable from PyPI (the `sweagent` name there is a 0.0.1 placeholder whose dependencies do
not resolve), so this skips unless it was installed from its source tree (`pip install -e SWE-agent/`); the
swe-rex interface it uses is covered by test_swerex.py either way. To run it: in a venv with this project's
sandboxes on the path, `pip install -e <SWE-agent checkout>` (it needs its config/, tools/ and an empty
trajectories/ beside the package), then `LITELLM_LOCAL_MODEL_COST_MAP=True pytest tests/sandboxes/test_sweagent.py`
(litellm otherwise spends ~10 s trying to fetch its cost map). Measured: passes in ~2.5 s with SWE-agent 1.1.0.
"""

from __future__ import annotations

import subprocess

import pytest

pytest.importorskip("sweagent", reason="SWE-agent installs only from its source tree, not from PyPI")

import yaml
from sweagent import CONFIG_DIR
from sweagent.agent.agents import DefaultAgent, DefaultAgentConfig
from sweagent.agent.models import PredeterminedTestModel
from sweagent.agent.problem_statement import TextProblemStatement
from sweagent.environment.repo import LocalRepoConfig
from sweagent.environment.swe_env import SWEEnv

from sandboxes.adapters.swerex_deployment import SandboxDeployment


def _micro_repo(path) -> None:
    (path / "calc.py").write_text("def add(a, b):\n    return a - b\n")
    for cmd in (
        ["init", "-q"],
        ["add", "."],
        ["-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "i"],
    ):
        subprocess.run(["git", *cmd], cwd=path, check=True)


@pytest.mark.docker
def test_scripted_sweagent_episode(sbx_cfg, sbx_docker_client, tmp_path):
    repo = tmp_path / "calc"
    repo.mkdir()
    _micro_repo(repo)
    config = yaml.safe_load((CONFIG_DIR / "bash_only.yaml").read_text())["agent"]
    config["model"] = {"name": "instant_empty_submit"}  # replaced below by the scripted model
    agent = DefaultAgent.from_config(DefaultAgentConfig.model_validate(config))
    fix = "sed -i 's/a - b/a + b/' calc.py && python3 -c 'import calc; assert calc.add(2, 3) == 5' && echo fixed"
    agent.model = PredeterminedTestModel(  # type: ignore[assignment]
        [f"THOUGHT: fix the sign\n\n```bash\n{fix}\n```", "THOUGHT: done\n\n```bash\nsubmit\n```"]
    )
    deployment = SandboxDeployment(sandbox=sbx_cfg(limits={"memory": "512m"}).model_dump(), run_id="sweagent")
    env = SWEEnv(deployment=deployment, repo=LocalRepoConfig(path=repo), post_startup_commands=[])
    env.start()
    try:
        cid = deployment.sandbox.id
        assert sbx_docker_client.api.inspect_container(cid)["HostConfig"]["NetworkMode"] == "none"
        result = agent.run(
            env=env,
            problem_statement=TextProblemStatement(text="add() subtracts", id="calc-1"),
            output_dir=tmp_path / "out",
        )
    finally:
        env.close()
    assert result.info["exit_status"] == "submitted"
    assert "-    return a - b\n+    return a + b" in result.info["submission"]
    assert any("fixed" in step["observation"] for step in result.trajectory)  # the fix ran and passed
