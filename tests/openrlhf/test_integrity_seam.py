"""Issue 25, class 6, at the OpenRLHF seam: a sample the grader labels `suspicious` gets the recipe's reward policy
(agent.suspicious: zero / mask / keep) and every sample logs swe_rl_suspicious / swe_rl_harness_touched (OpenRLHF
averages extra_logs per step: the fractions). Same pattern as test_executor: trajectory_to_response as OpenRLHF's
sample processing consumes it, and one real episode through AgentExecutor.execute graded in Docker."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from swe_rl.agent.trajectory import Trajectory
from swe_rl.policy.base import SamplingParams
from swe_rl.train.openrlhf.aem_seam import MASKED_KEY, VALID_KEY
from swe_rl.train.openrlhf.config import AgentConfig
from swe_rl.train.openrlhf.data import task_to_row
from swe_rl.train.openrlhf.executor import AgentExecutor, trajectory_to_response


def _traj(suspicious: list[str], harness: list[str]) -> Trajectory:
    grading = {
        "failure": None,
        "tests": {"integrity": {"harness_restored": harness}},
        "suspicious": suspicious,
    }
    return Trajectory(
        task_id="t", token_ids=[1, 2, 3, 4], loss_mask=[0, 1, 1, 0], logprobs=[0.0, -0.5, -0.2, 0.0],
        exit_status="submitted", reward=1.0, metrics={"grading": grading},
    )  # fmt: skip


@pytest.mark.parametrize(
    ("policy", "reward", "masked"), [("zero", 0.0, 0.0), ("mask", 0.0, 1.0), ("keep", 1.0, 0.0)]
)
def test_reward_policy_for_suspicious_samples(tiny_tokenizer, orl_process_response, policy, reward, masked):
    resp = trajectory_to_response(
        _traj(["tripwire: x"], []), "t", "{}", tiny_tokenizer, True, suspicious=policy
    )
    assert resp["reward"] == reward and resp["extra_logs"][MASKED_KEY] == masked
    assert resp["extra_logs"]["swe_rl_suspicious"] == 1.0 and resp["extra_logs"][VALID_KEY] == 1.0
    assert orl_process_response(resp, 100).rewards.tolist() == [reward]
    clean = trajectory_to_response(
        _traj([], ["conftest.py"]), "t", "{}", tiny_tokenizer, True, suspicious=policy
    )
    assert clean["reward"] == 1.0 and clean["extra_logs"]["swe_rl_suspicious"] == 0.0
    assert clean["extra_logs"]["swe_rl_harness_touched"] == 1.0
    assert AgentConfig(suspicious=policy).suspicious == policy and AgentConfig().suspicious == "zero"


def test_a_timeout_the_patch_caused_is_a_zero_and_is_logged(tiny_tokenizer, orl_process_response):
    """swe_rl.grading.grader._patch_caused: reward 0, failure None, `tests["patch_caused"]`; OpenRLHF trains on it
    (not masked) and logs swe_rl_patch_caused."""
    traj = _traj([], [])
    traj.reward = 0.0
    traj.metrics["grading"]["tests"]["patch_caused"] = {"failure": "test_timeout", "why": "x"}
    resp = trajectory_to_response(traj, "t", "{}", tiny_tokenizer, True)
    assert (
        resp["reward"] == 0.0
        and resp["extra_logs"][MASKED_KEY] == 0.0
        and resp["extra_logs"][VALID_KEY] == 1.0
    )
    assert resp["extra_logs"]["swe_rl_patch_caused"] == 1.0
    assert orl_process_response(resp, 100).rewards.tolist() == [0.0]
    clean = trajectory_to_response(_traj([], []), "t", "{}", tiny_tokenizer, True)
    assert clean["extra_logs"]["swe_rl_patch_caused"] == 0.0


class FakeEngine:
    """A named fake for OpenRLHF's vLLM rollout actor (vLLM needs a GPU), as test_executor's FakeVLLMEngine:
    `await generate(prompt_token_ids, sampling_params)` -> RequestOutput-shaped, answered by our Policy."""

    def __init__(self, policy):
        self.policy = policy

    async def generate(self, prompt_token_ids, sampling_params, multi_modal_data=None):
        p = sampling_params
        c = await self.policy.generate(
            list(prompt_token_ids),
            SamplingParams(temperature=p.temperature, top_p=p.top_p, max_new_tokens=p.max_tokens,
                           stop_token_ids=tuple(p.stop_token_ids)),
        )  # fmt: skip
        out = SimpleNamespace(
            token_ids=c.token_ids, text=c.text, finish_reason=c.finish_reason, logprobs=None
        )
        return SimpleNamespace(outputs=[out])


PROBE = (
    "diff --git a/{pkg}/_probe.py b/{pkg}/_probe.py\nnew file mode 100644\n--- /dev/null\n+++ b/{pkg}/_probe.py\n"
    "@@ -0,0 +1,2 @@\n+import os\n+UNDER_TEST = 'PYTEST_CURRENT_TEST' in os.environ\n"
)


@pytest.mark.docker
async def test_a_resolving_but_suspicious_episode_earns_nothing(orl_micro_task, tiny_tokenizer):
    """The scripted policy submits the gold fix plus a test-detection probe: graded resolved, labelled by the
    tripwire, so the recipe's default policy (zero) gives it reward 0 and the sample logs swe_rl_suspicious."""
    from swe_rl.policy.scripted import ScriptedGoldPolicy

    pkg = orl_micro_task.repo.split("/")[-1]
    hacked = orl_micro_task.model_copy(update={"patch": orl_micro_task.patch + PROBE.format(pkg=pkg)})
    engine = FakeEngine(ScriptedGoldPolicy(hacked, tiny_tokenizer))
    row = task_to_row(orl_micro_task)
    params = SimpleNamespace(
        temperature=1.0,
        top_p=1.0,
        top_k=-1,
        max_tokens=None,
        min_tokens=1,
        skip_special_tokens=False,
        logprobs=None,
        stop_token_ids=[],
        seed=None,
    )  # the fields OpenRLHF's samples generator sets on vllm.SamplingParams
    resp = await AgentExecutor(AgentConfig(max_steps=20)).execute(
        row["prompt"], row["label"], params, 20000, tiny_tokenizer, engine
    )
    logs = resp["extra_logs"]
    assert logs["swe_rl_resolved"] == 1.0 and logs["swe_rl_suspicious"] == 1.0, logs
    assert resp["reward"] == 0.0 and logs[VALID_KEY] == 1.0
