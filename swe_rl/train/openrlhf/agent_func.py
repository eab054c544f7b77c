"""The file passed as `--train.agent_func_path`: OpenRLHF 0.11.2 loads it by path in each vLLM rollout actor and
builds `AgentExecutor()` (swe_rl/train/openrlhf/executor.py), configured from SWE_RL_AGENT_CONFIG."""

from swe_rl.train.openrlhf.executor import AgentExecutor

__all__ = ["AgentExecutor"]
