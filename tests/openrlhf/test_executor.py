"""Our AgentExecutor on OpenRLHF's real MultiTurnAgentExecutor base class, against real Docker sandboxes.

`FakeVLLMEngine` is a named fake for OpenRLHF's RolloutRayActor (vLLM needs a GPU): the same
`await generate(prompt_token_ids, sampling_params)` → RequestOutput-shaped call, answered by a local transformers
model (HFLocalPolicy over a tiny random Qwen2) or the scripted gold policy. `FakeVLLMSamplingParams` carries the
fields OpenRLHF's samples generator sets on vllm.SamplingParams. The responses go through upstream's own sample
processing (`orl_process_response`), so ranges and rewards are checked as OpenRLHF consumes them."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from types import SimpleNamespace

import pytest
from openrlhf.utils.agent import MultiTurnAgentExecutor

from swe_rl.policy.base import SamplingParams
from swe_rl.train.openrlhf.aem_seam import FILTER_KEY, MASKED_KEY, VALID_KEY
from swe_rl.train.openrlhf.config import AgentConfig
from swe_rl.train.openrlhf.data import task_to_row
from swe_rl.train.openrlhf.executor import AgentExecutor, trajectory_to_response

MAX_LEN = 6000


@dataclass
class FakeVLLMSamplingParams:
    temperature: float = 1.0
    top_p: float = 1.0
    top_k: int = -1
    max_tokens: int | None = None
    min_tokens: int = 1
    skip_special_tokens: bool = False
    logprobs: int | None = 1
    stop_token_ids: list[int] = field(default_factory=list)
    seed: int | None = None


class FakeVLLMEngine:
    def __init__(self, policy):
        self.policy = policy
        self.calls: list[FakeVLLMSamplingParams] = []

    async def generate(self, prompt_token_ids, sampling_params, multi_modal_data=None):
        self.calls.append(sampling_params)
        c = await self.policy.generate(
            list(prompt_token_ids),
            SamplingParams(
                temperature=sampling_params.temperature,
                top_p=sampling_params.top_p,
                max_new_tokens=sampling_params.max_tokens,
                stop_token_ids=tuple(sampling_params.stop_token_ids),
                seed=sampling_params.seed,
            ),
        )
        lps = [{t: SimpleNamespace(logprob=lp)} for t, lp in zip(c.token_ids, c.logprobs, strict=True)]
        out = SimpleNamespace(token_ids=c.token_ids, text=c.text, finish_reason=c.finish_reason, logprobs=lps)
        return SimpleNamespace(outputs=[out])


def _check_sample(resp, exp, tokenizer):
    ids = resp["observation_tokens"]
    assert exp.sequences[0].tolist() == ids[:MAX_LEN]
    mask = [0] * len(ids)
    for s, e in resp["action_ranges"]:
        assert 0 < s < e <= len(ids)
        mask[s:e] = [1] * (e - s)
    assert exp.action_mask[0].tolist() == [bool(m) for m in mask[1:]]
    assert exp.rollout_log_probs.shape == exp.action_mask.shape
    assert all(lp <= 0 for lp, m in zip(exp.rollout_log_probs[0].tolist(), mask[1:], strict=True) if m)
    for key in (VALID_KEY, FILTER_KEY, "swe_rl_turns", "swe_rl_policy_tokens", "swe_rl_resolved"):
        assert exp.info[key].shape == (1,), key
    assert exp.info["swe_rl_policy_tokens"].item() == sum(mask)


@pytest.mark.docker
async def test_multi_turn_episode_with_local_transformers_model(
    orl_micro_task, orl_process_response, tiny_tokenizer
):
    from swe_rl.policy.hf import HFLocalPolicy
    from swe_rl.policy.tiny import build_tiny_model

    engine = FakeVLLMEngine(HFLocalPolicy(build_tiny_model(tiny_tokenizer, arch="qwen2"), tiny_tokenizer))
    ex = AgentExecutor(AgentConfig(max_steps=5, loop={"max_new_tokens": 12, "max_format_errors": 3}))
    assert isinstance(ex, MultiTurnAgentExecutor)
    row = task_to_row(orl_micro_task)
    resp = await ex.execute(
        row["prompt"], row["label"], FakeVLLMSamplingParams(), MAX_LEN, tiny_tokenizer, engine
    )
    # a random model never emits a valid call: three turns end in format_errors, an empty patch scores 0 (valid)
    assert len(resp["action_ranges"]) == 3 and len(engine.calls) == 3
    assert all(c.max_tokens == 12 and c.logprobs == 0 for c in engine.calls)  # per-turn cap, sampled-token lp
    assert resp["reward"] == 0.0 and resp["extra_logs"][VALID_KEY] == 1.0
    assert resp["extra_logs"]["swe_rl_turns"] == 3.0 and resp["extra_logs"][FILTER_KEY] == 0.0
    exp = orl_process_response(resp, MAX_LEN)
    _check_sample(resp, exp, tiny_tokenizer)
    assert exp.rewards.tolist() == [0.0] and exp.truncated.tolist() == [False]


@pytest.mark.docker
async def test_gold_episode_is_graded_in_docker(orl_micro_task, orl_process_response, tiny_tokenizer):
    from swe_rl.policy.scripted import ScriptedGoldPolicy

    engine = FakeVLLMEngine(ScriptedGoldPolicy(orl_micro_task, tiny_tokenizer))
    ex = AgentExecutor(AgentConfig(max_steps=20))
    row = task_to_row(orl_micro_task)
    params = FakeVLLMSamplingParams(logprobs=None)
    resp = await ex.execute(row["prompt"], row["label"], params, 20000, tiny_tokenizer, engine)
    assert resp["extra_logs"][VALID_KEY] == 1.0, resp["extra_logs"]
    assert resp["reward"] == 1.0 and resp["extra_logs"]["swe_rl_resolved"] == 1.0
    assert resp["extra_logs"]["swe_rl_submitted"] == 1.0
    assert resp["rollout_log_probs"] is None and len(resp["action_ranges"]) == len(engine.calls) >= 3
    # IS correction off: OpenRLHF's engines return raw logprobs then, so none are requested (never carried)
    assert all(c.logprobs is None for c in engine.calls)
    exp = orl_process_response(resp, 20000)
    assert exp.rewards.tolist() == [1.0] and exp.scores.tolist() == [1.0]


@pytest.mark.docker
async def test_generated_tasks_in_the_built_in_trainers_slots(orl_process_response, tiny_tokenizer):
    """agent.slots: episodes of generated micro tasks run in k reused sandboxes and are graded there by real
    tests (the built-in trainer's SandboxSlots / CachedGrader): the expert's fix resolves, the flawed expert's
    (the off-by-one constant) does not, and 2 slots serve 4 episodes and their gradings."""
    from swe_rl.policy.scripted import ReplayPolicy
    from swe_rl.tasks.generator import generate_tasks
    from swe_rl.train.env import demo_agent_config
    from swe_rl.train.expert import expert_replies
    from swe_rl.train.sft import prompts_dir

    ex = AgentExecutor(AgentConfig(max_steps=4, slots=2))
    slots = ex.sandbox_factory.__self__
    assert slots.k == 2 and type(ex.reward_fn.reward_fn).__name__ == "CachedGrader"  # inside the dedup
    agent = demo_agent_config(prompts_dir())
    tasks = generate_tasks(2, "train", 0)
    runs = [(t, flawed) for t in tasks for flawed in (False, True)]
    resps = await asyncio.gather(*(
        ex.execute(task_to_row(t)["prompt"], task_to_row(t)["label"], FakeVLLMSamplingParams(logprobs=None),
                   MAX_LEN, tiny_tokenizer, FakeVLLMEngine(ReplayPolicy(tiny_tokenizer, expert_replies(t, agent, f))))
        for t, f in runs
    ))  # fmt: skip
    try:
        assert [r["reward"] for r in resps] == [1.0, 0.0, 1.0, 0.0], [r["extra_logs"] for r in resps]
        assert all(r["extra_logs"][VALID_KEY] == 1.0 for r in resps)
        assert slots.stats["leases"] == 8 and len(slots._all) == 2  # 4 episodes + 4 gradings in 2 containers
        orl_process_response(resps[0], MAX_LEN)
    finally:
        await slots.aclose()


async def test_infrastructure_failure_is_a_zero_advantage_sample(orl_process_response, tiny_tokenizer):
    from swe_rl.tasks.task import Task

    class BrokenSandboxFactory:  # stands for a Docker engine that refuses to start containers
        def __call__(self, task):
            raise ConnectionError("docker engine unreachable")

    ex = AgentExecutor(AgentConfig(), sandbox_factory=BrokenSandboxFactory(), reward_fn=None)
    row = task_to_row(Task(instance_id="x__y-1", image="swe-rl/none:x"))
    engine = FakeVLLMEngine(policy=None)
    resps = await asyncio.gather(
        ex.execute(row["prompt"], row["label"], FakeVLLMSamplingParams(), MAX_LEN, tiny_tokenizer, engine),
        ex.execute(row["prompt"], "not a task", FakeVLLMSamplingParams(), MAX_LEN, tiny_tokenizer, engine),
    )
    for resp in resps:
        assert resp["reward"] == 0.0 and resp["extra_logs"][VALID_KEY] == 0.0
        assert resp["action_ranges"] == [(1, 2)]  # a one-token dummy action: the advantage step zeroes it
        exp = orl_process_response(resp, MAX_LEN)
        assert exp.action_mask.tolist() == [[True]] and exp.info[VALID_KEY].tolist() == [0.0]
    assert engine.calls == []


async def test_an_engine_whose_samples_all_fail_stops_the_run_with_the_failure(tiny_tokenizer):
    # every sample an infrastructure error (no engine for sandboxes): zero-advantage samples for ever, before
    from swe_rl.tasks.task import Task
    from swe_rl.train.openrlhf.executor import EngineFailures

    class BrokenSandboxFactory:
        def __call__(self, task):
            raise ConnectionError("docker engine unreachable")

    ex = AgentExecutor(
        AgentConfig(max_failed_in_a_row=3), sandbox_factory=BrokenSandboxFactory(), reward_fn=None
    )
    row = task_to_row(Task(instance_id="x__y-1", image="swe-rl/none:x"))
    engine = FakeVLLMEngine(policy=None)
    args = (FakeVLLMSamplingParams(), MAX_LEN, tiny_tokenizer, engine)
    first = await ex.execute(row["prompt"], row["label"], *args)
    second = await ex.execute(row["prompt"], "not a task", *args)  # fails in execute itself (no such task)
    assert first["extra_logs"][VALID_KEY] == second["extra_logs"][VALID_KEY] == 0.0
    with pytest.raises(EngineFailures) as err:
        await ex.execute(row["prompt"], row["label"], *args)
    msg = str(err.value)
    assert "the last 3 samples of this vLLM engine" in msg and "agent.max_failed_in_a_row: 3" in msg, msg
    assert "episode_error 3" in msg and "ConnectionError: docker engine unreachable" in msg, msg


@pytest.mark.docker
async def test_a_sample_that_ran_resets_the_engines_failure_count(orl_micro_task, tiny_tokenizer):
    from swe_rl.policy.hf import HFLocalPolicy
    from swe_rl.policy.tiny import build_tiny_model
    from swe_rl.rollout.context import task_sandbox_factory

    real = task_sandbox_factory({"backend": "docker"})
    calls = []

    def flaky(task):  # the engine refuses every other container
        calls.append(task.instance_id)
        if len(calls) % 2:
            raise ConnectionError("docker engine unreachable")
        return real(task)

    engine = FakeVLLMEngine(HFLocalPolicy(build_tiny_model(tiny_tokenizer, arch="qwen2"), tiny_tokenizer))
    cfg = AgentConfig(max_steps=1, max_failed_in_a_row=2, loop={"max_new_tokens": 4, "max_format_errors": 1})
    ex = AgentExecutor(cfg, sandbox_factory=flaky, reward_fn=None)
    row = task_to_row(orl_micro_task)
    valid = []
    for _ in range(5):  # fail, ran, fail, ran, fail: never 2 failures in a row
        resp = await ex.execute(row["prompt"], row["label"], FakeVLLMSamplingParams(), MAX_LEN, tiny_tokenizer,
                                engine)  # fmt: skip
        valid.append(resp["extra_logs"]["swe_rl_turns"] > 0)
    assert valid == [False, True, False, True, False] and len(calls) == 5


def test_rollout_side_modules_import_no_gpu_stack():
    """What the vLLM engine actors load (agent_func.py → executor) and the seam modules import none of DeepSpeed,
    vLLM, flash-attn or peft: no code of ours runs in every Ray worker before Ray sets CUDA_VISIBLE_DEVICES."""
    import subprocess
    import sys

    code = (
        "import sys, swe_rl.train.openrlhf.agent_func, swe_rl.train.openrlhf.aem_seam, "
        "swe_rl.train.openrlhf.valid_groups, swe_rl.train.openrlhf.entropy_forward\n"
        "print(sorted({m.split('.')[0] for m in sys.modules} & {'deepspeed', 'vllm', 'flash_attn', 'peft'}))"
    )
    res = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert res.returncode == 0, res.stderr[-2000:]
    assert res.stdout.strip().splitlines()[-1] == "[]"


@pytest.mark.parametrize(
    ("rule", "exit_status", "reward", "masked"),
    [
        ("zero", "format_errors", 0.0, 0.0),  # a resolving patch left behind by a format error earns nothing
        ("zero", "max_steps", 0.0, 0.0),
        ("mask", "format_errors", 0.0, 1.0),
        ("grade", "format_errors", 1.0, 0.0),  # legacy: the patch graded as is
        ("zero", "submitted", 1.0, 0.0),
        ("mask", "submitted", 1.0, 0.0),
    ],
)
def test_reward_spec_for_episodes_that_did_not_submit(tiny_tokenizer, rule, exit_status, reward, masked):
    from swe_rl.agent.trajectory import Trajectory

    traj = Trajectory(
        task_id="t",
        token_ids=[1, 2, 3, 4],
        loss_mask=[0, 1, 1, 0],
        logprobs=[0.0, -0.5, -0.2, 0.0],
        exit_status=exit_status,
        reward=1.0,
    )
    resp = trajectory_to_response(traj, "t", "{}", tiny_tokenizer, want_logprobs=True, unsubmitted=rule)
    assert resp["reward"] == reward and resp["scores"] == reward
    assert resp["extra_logs"][MASKED_KEY] == masked and resp["extra_logs"][VALID_KEY] == 1.0
    assert AgentConfig(unsubmitted=rule).unsubmitted == rule


@pytest.mark.docker
async def test_a_groups_identical_patches_are_graded_once(orl_src, orl_micro_task, tiny_tokenizer):
    """Upstream's RolloutRayActor.generate_responses (run verbatim) sends one prompt's n samples to one executor
    at once; the scripted gold policy makes them end with the same patch: one grading, n-1 shared, every sample
    rewarded, and the shared ones say so in their extra logs (per step: the fraction saved)."""
    import ast

    from swe_rl.policy.scripted import ScriptedGoldPolicy

    fn = orl_src.find_def("trainer/ray/vllm_engine.py", "RolloutRayActor", "generate_responses")
    ns: dict = {"asyncio": asyncio}
    exec(compile(ast.Module(body=[fn], type_ignores=[]), "vllm_engine.py", "exec"), ns)
    gold = ScriptedGoldPolicy(orl_micro_task, tiny_tokenizer)

    class PerEpisodeGold:  # the scripted replies by turn, read from the prompt: concurrent episodes interleave
        async def generate(self, prompt_ids, sampling):
            gold.calls = tiny_tokenizer.decode(prompt_ids).count("<|im_start|>assistant") - 1
            return await gold.generate(prompt_ids, sampling)

    ex = AgentExecutor(AgentConfig(max_steps=20))
    engine = FakeVLLMEngine(PerEpisodeGold())
    actor = SimpleNamespace(executor=ex, generate=engine.generate)  # upstream passes the actor as llm_engine
    row = task_to_row(orl_micro_task)
    params = FakeVLLMSamplingParams(logprobs=None)
    resps = await ns["generate_responses"](
        actor, row["prompt"], row["label"], params, 20000, tiny_tokenizer, 3
    )
    assert [r["reward"] for r in resps] == [1.0, 1.0, 1.0], [r["extra_logs"] for r in resps]
    shared = [r["extra_logs"]["swe_rl_grading_shared"] for r in resps]
    assert sorted(shared) == [0.0, 1.0, 1.0] and ex.reward_fn.graded == 1 and ex.reward_fn.saved == 2
    assert sum(r["extra_logs"]["swe_rl_grading_s"] > 0 for r in resps) == 1


@pytest.mark.docker
async def test_the_gold_relative_limit_reaches_the_executors_grader(orl_micro_task):
    """`agent.grade_timeout_gold_factor` from the config OpenRLHF's executor is built with to the limit its grader
    gives a validated row's test run (through the row's label, as `swe-rl openrlhf-data` writes it): factor x
    gold's own test time, at least 60 s; without the factor, the official 1800 s."""
    from swe_rl.grading import docker_factory, validate_tasks
    from swe_rl.tasks.validation import validation_of
    from swe_rl.train.openrlhf.data import task_from_label

    (checked,) = await validate_tasks([orl_micro_task], docker_factory(run_id="test-limit"))
    gold_s = validation_of(checked)["gold_test_s"]
    task = task_from_label(task_to_row(checked)["label"])
    assert validation_of(task)["gold_test_s"] == gold_s  # the label carries what the limit is made from
    for factor, limit in ((10.0, max(60.0, 10.0 * gold_s)), (None, 1800.0)):
        ex = AgentExecutor(AgentConfig(grade_timeout_gold_factor=factor))
        result = await ex.reward_fn(task, checked.patch)
        assert result.reward == 1.0 and result.tests["test_limit_s"] == pytest.approx(limit), (
            factor,
            result.tests,
        )
