"""The gateway with the real Qwen2.5 / Qwen3 tokenizers and chat templates (issue 23 defect 3).

The policy behind the HTTP gateway replays fixed replies, tokenized by the real tokenizer: what is under test is
what the gateway does with them (tool calls, template kwargs, stops, the recorded stream and its drift check).
"""

from __future__ import annotations

import json
import urllib.error
import urllib.request

from swe_rl.agent.chat import encode
from swe_rl.gateway.session import Session
from swe_rl.policy.base import Completion

BASH_TOOL = {"type": "function", "function": {"name": "bash", "description": "Run a command.", "parameters": {
    "type": "object", "properties": {"command": {"type": "string"}}, "required": ["command"]}}}  # fmt: skip
SYS = {"role": "system", "content": "You are an agent."}
TASK = {"role": "user", "content": "Fix calc.py."}


def _completion(tok, text: str) -> Completion:
    toks = encode(tok, text) + encode(tok, "<|im_end|>")
    return Completion(toks, [-0.5] * len(toks), text, "stop", None)


def _call(sess: Session, messages, text: str, tools=None, kw=None):
    ids, mask, lps, plan = sess.prompt_for(messages, tools, kw)
    return sess.record(plan, (ids, mask, lps), _completion(sess.tokenizer, text))


def test_calls_drafted_inside_think_are_not_tool_calls(qwen3_tokenizer):
    sess = Session("s", qwen3_tokenizer)
    drafted = '<tool_call>\n{"name": "bash", "arguments": {"command": "rm -rf /testbed"}}\n</tool_call>'
    real = '<tool_call>\n{"name": "bash", "arguments": {"command": "ls"}}\n</tool_call>'
    call = _call(sess, [SYS, TASK], f"<think>\nMaybe {drafted}? No.\n</think>\n\n{real}", [BASH_TOOL])
    assert [c["function"]["arguments"] for c in call.tool_calls] == ['{"command": "ls"}']
    assert "rm -rf" in call.reply  # the reasoning stays in the content, not as a call
    cut = _call(Session("t", qwen3_tokenizer), [SYS, TASK], f"<think>\nFirst {drafted} then", [BASH_TOOL])
    assert cut.tool_calls == []  # a reply cut while reasoning has no action


def test_string_arguments_are_not_encoded_twice_when_qwen25_rerenders(qwen25_tokenizer):
    sess = Session("s", qwen25_tokenizer)
    raw = 'Listing.\n<tool_call>\n{"name": "bash", "arguments": {"command": "ls"}}\n</tool_call>'
    call = _call(sess, [SYS, TASK], raw, [BASH_TOOL])
    back = {
        "role": "assistant",
        "content": call.reply,
        "tool_calls": call.tool_calls,
    }  # arguments: a JSON string
    result = {"role": "tool", "tool_call_id": call.tool_calls[0]["id"], "content": "calc.py"}
    _call(sess, [SYS, TASK, back, result], "The file is calc.py.", [BASH_TOOL])
    a = sess.assemble()
    assert a.reason is None and a.trajectory is not None
    assert a.drift["text_match"] and a.drift["token_match"], a.drift  # no false drift


def test_request_chat_template_kwargs_stops_and_endoftext_over_http(qwen3_tokenizer):
    from swe_rl.gateway.cli import template_kwargs_option, vllm_overrides
    from swe_rl.gateway.server import Gateway
    from swe_rl.policy.scripted import ReplayPolicy

    eot = qwen3_tokenizer.convert_tokens_to_ids("<|endoftext|>")
    with Gateway(
        ReplayPolicy(qwen3_tokenizer, ["Done."]), qwen3_tokenizer, template_kwargs={"enable_thinking": True}
    ) as gw:

        def post(body: dict, sid: str) -> tuple[int, dict]:
            req = urllib.request.Request(f"{gw.session_url(sid)}/chat/completions", json.dumps(body).encode(),
                                         {"Content-Type": "application/json"})  # fmt: skip
            try:
                with urllib.request.urlopen(req, timeout=30) as r:
                    return r.status, json.loads(r.read())
            except urllib.error.HTTPError as e:
                return e.code, json.loads(e.read())

        off = {"messages": [SYS, TASK], "chat_template_kwargs": {"enable_thinking": False}}
        assert post(off, "off")[0] == 200 and post({"messages": [SYS, TASK]}, "on")[0] == 200
        prompt_off = qwen3_tokenizer.decode(gw.sessions["off"].calls[0].prompt_ids)
        prompt_on = qwen3_tokenizer.decode(gw.sessions["on"].calls[0].prompt_ids)
        assert prompt_off.endswith(
            "<|im_start|>assistant\n<think>\n\n</think>\n\n"
        )  # the request's kwargs win
        assert prompt_on.endswith("<|im_start|>assistant\n")  # the gateway default (thinking on)
        assert eot in gw._sampling({}, 10).stop_token_ids  # <|endoftext|> ends a reply too
        status, err = post({"messages": [SYS, TASK], "stop": ["\nObservation:"]}, "stop")
        assert (
            status == 400
            and "'\\nObservation:' is" in err["error"]["message"]
            and "tokens" in err["error"]["message"]
        )
        assert post({"messages": [SYS, TASK], "chat_template_kwargs": "x"}, "bad")[0] == 400
    assert template_kwargs_option('{"enable_thinking": false}') == {"enable_thinking": False}
    assert vllm_overrides(32768) == {"max_model_len": 32768}  # --backend vllm serves --max-context, not 2048
