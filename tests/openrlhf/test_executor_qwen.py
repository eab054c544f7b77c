"""Our OpenRLHF AgentExecutor with the real Qwen2.5 / Qwen3 tokenizers and chat templates (issue 23).

The engine is test_executor's `FakeVLLMEngine` (a named fake for OpenRLHF's RolloutRayActor, whose vLLM needs a
GPU), answered by the scripted gold policy (replies tokenized by the real tokenizer) or by HFLocalPolicy over a tiny
random Qwen2 with the real 151,936-row vocabulary. The episodes run in real Docker sandboxes and the responses go
through upstream's own `_process_response_into_experience`. What is checked against the template: the prompt is the
template's rendering, every action range is one assistant turn right after the template's generation prompt and
closed by <|im_end|>, everything between ranges is an observation delta the template renders, the AEM action
span starts at the call (after any reasoning), and the action mask OpenRLHF builds is those ranges.
"""

from __future__ import annotations

import pytest

from swe_rl.agent.chat import ChatFormat, encode, render
from swe_rl.agent.config import AgentConfig as LoopConfig
from swe_rl.agent.prompts import Prompts
from swe_rl.train.openrlhf.aem_seam import ACTION_RANGES_KEY, VALID_KEY
from swe_rl.train.openrlhf.config import AgentConfig
from swe_rl.train.openrlhf.data import task_to_row
from swe_rl.train.openrlhf.executor import AgentExecutor
from tests.openrlhf.test_executor import FakeVLLMEngine, FakeVLLMSamplingParams

MAX_LEN = 20000
OPENERS = {"xml": "<function=", "hermes": "<tool_call>"}


def _check_against_template(resp, exp, tok, loop: dict, task) -> None:
    ids = resp["observation_tokens"]
    ranges = resp["action_ranges"]
    cfg = LoopConfig(**loop)
    gen_prompt = "<|im_start|>assistant\n"
    if cfg.chat_template_kwargs.get("enable_thinking") is False:
        gen_prompt += "<think>\n\n</think>\n\n"
    im_end = tok.convert_tokens_to_ids("<|im_end|>")
    # the prompt: the template's rendering of system + task, tokenized as such
    system, kw = Prompts.load(cfg).for_template(tok, cfg.chat_template_kwargs)
    first = ranges[0][0]
    prompt_text = tok.decode(ids[:first], skip_special_tokens=False)
    task_text = prompt_text.split("<|im_start|>user\n", 1)[1].rsplit("<|im_end|>", 1)[0]
    assert task.problem_statement in task_text
    msgs = [{"role": "system", "content": system}, {"role": "user", "content": task_text}]
    assert ids[:first] == encode(tok, render(tok, msgs, add_generation_prompt=True, **kw))
    # every range: one assistant turn after the generation prompt, closed by <|im_end|>: trained when the policy
    # emitted it, else appended by the loop (one token, outside the range)
    fmt = ChatFormat(tok, obs_role=cfg.obs_role, template_kwargs=kw)
    for k, (s, e) in enumerate(ranges):
        assert tok.decode(ids[:s], skip_special_tokens=False).endswith(gen_prompt)
        assert im_end not in ids[s : e - 1]
        end = e if ids[e - 1] == im_end else e + 1
        assert ids[end - 1] == im_end
        if k + 1 < len(ranges):  # between turns: exactly the observation delta the template renders
            delta = tok.decode(ids[end : ranges[k + 1][0]], skip_special_tokens=False)
            content = delta.split("<|im_start|>user\n", 1)[1].rsplit("<|im_end|>", 1)[0]
            if cfg.obs_role == "tool":
                content = content.removeprefix("<tool_response>\n").removesuffix("\n</tool_response>")
            assert ids[end : ranges[k + 1][0]] == fmt.observation(content)[1]
    # AEM's action span: each starts where the turn's call begins (after </think>), ends with the turn
    spans = resp[ACTION_RANGES_KEY]
    assert len(spans) == len(ranges)
    for (s, e), (a, b) in zip(ranges, spans, strict=True):
        assert s <= a < b == e
        reply = tok.decode(ids[s:e], skip_special_tokens=False)
        if OPENERS[cfg.action_format] in reply.rsplit("</think>", 1)[-1]:
            head = tok.decode(ids[s:a], skip_special_tokens=False)
            tail = tok.decode(ids[a:e], skip_special_tokens=False)
            assert OPENERS[cfg.action_format] not in head.rsplit("</think>", 1)[-1]
            assert OPENERS[cfg.action_format] in tail[: len(OPENERS[cfg.action_format]) + 2]
    # what OpenRLHF trains: the action mask is the ranges, shifted by one (logits predict the next token)
    mask = [0] * len(ids)
    for s, e in ranges:
        mask[s:e] = [1] * (e - s)
    assert exp.sequences[0].tolist() == ids and exp.action_mask[0].tolist() == [bool(m) for m in mask[1:]]
    assert exp.info["swe_rl_policy_tokens"].item() == sum(mask)


@pytest.mark.docker
@pytest.mark.parametrize(
    ("flavor", "loop"),
    [
        ("qwen3", {"action_format": "xml", "chat_template_kwargs": {"enable_thinking": False}}),
        ("qwen3", {"action_format": "hermes", "chat_template_kwargs": {"enable_thinking": True}}),
        ("qwen2.5", {"action_format": "hermes"}),
    ],
)
async def test_gold_episode_with_the_real_tokenizer(
    orl_micro_task, orl_process_response, qwen25_tokenizer, qwen3_tokenizer, flavor, loop
):
    from swe_rl.policy.scripted import ScriptedGoldPolicy

    tok = qwen3_tokenizer if flavor == "qwen3" else qwen25_tokenizer
    gold = ScriptedGoldPolicy(orl_micro_task, tok, action_format=loop["action_format"])
    engine = FakeVLLMEngine(gold)
    ex = AgentExecutor(AgentConfig(max_steps=20, loop=loop))
    row = task_to_row(orl_micro_task)
    resp = await ex.execute(row["prompt"], row["label"], FakeVLLMSamplingParams(), MAX_LEN, tok, engine)
    assert resp["extra_logs"][VALID_KEY] == 1.0 and resp["reward"] == 1.0, resp["extra_logs"]
    assert len(resp["action_ranges"]) == len(engine.calls) >= 3
    exp = orl_process_response(resp, MAX_LEN)
    _check_against_template(resp, exp, tok, loop, orl_micro_task)
    assert exp.rewards.tolist() == [1.0]


@pytest.mark.docker
async def test_random_qwen_model_episode_has_logprobs(
    orl_micro_task, orl_process_response, qwen25_tokenizer, qwen25_tiny_model_dir
):
    from transformers import AutoModelForCausalLM

    from swe_rl.policy.hf import HFLocalPolicy

    model = AutoModelForCausalLM.from_pretrained(qwen25_tiny_model_dir).eval()
    engine = FakeVLLMEngine(HFLocalPolicy(model, qwen25_tokenizer))
    loop = {"action_format": "xml", "max_new_tokens": 8, "max_format_errors": 2}
    ex = AgentExecutor(AgentConfig(max_steps=5, loop=loop))
    row = task_to_row(orl_micro_task)
    resp = await ex.execute(
        row["prompt"], row["label"], FakeVLLMSamplingParams(), MAX_LEN, qwen25_tokenizer, engine
    )
    assert resp["extra_logs"][VALID_KEY] == 1.0 and resp["extra_logs"]["swe_rl_turns"] == 2.0
    exp = orl_process_response(resp, MAX_LEN)
    _check_against_template(resp, exp, qwen25_tokenizer, loop, orl_micro_task)
    lps = [
        lp for lp, m in zip(exp.rollout_log_probs[0].tolist(), exp.action_mask[0].tolist(), strict=True) if m
    ]
    # a random model over 151,936 rows: sampled logprobs near -log(V) = -11.9 (the loop-closed <|im_end|> is not
    # an action token)
    assert len(lps) <= 2 * 8 and sum(x < -5 for x in lps) >= len(lps) - 2
