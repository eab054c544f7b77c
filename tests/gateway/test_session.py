"""Session recording without HTTP: incremental templating, boundary tokens, rewrites, retries, drift.

Completions are built from the tokenizer's own encoding of a reply plus `<|im_end|>` (what a policy that stops on
the turn end returns); the tokenizer and chat template are the real tiny ChatML ones.
"""

from __future__ import annotations

import pytest

from swe_rl.agent.chat import encode, render
from swe_rl.agent.trajectory import mask_runs
from swe_rl.gateway.session import Session
from swe_rl.policy.base import Completion


def _completion(tok, text: str, *, stop: bool = True, ids: list[int] | None = None) -> Completion:
    toks = (ids if ids is not None else encode(tok, text)) + (encode(tok, "<|im_end|>") if stop else [])
    return Completion(toks, [-0.5] * len(toks), text, "stop" if stop else "length", [1.0] * len(toks))


def _call(sess: Session, messages, completion: Completion):
    ids, mask, lps, plan = sess.prompt_for(messages)
    return sess.record(plan, (ids, mask, lps), completion)


SYS = {"role": "system", "content": "You are an agent."}
TASK = {"role": "user", "content": "Fix calc.py."}


def test_incremental_prompts_keep_the_separator_after_each_turn(tiny_tokenizer):
    tok = tiny_tokenizer
    sess = Session("s", tok)
    msgs = [SYS, TASK]
    replies = ["<function=execute_bash>ls</function>", "cat calc.py", "submit now"]
    for k, reply in enumerate(replies):
        call = _call(sess, msgs, _completion(tok, reply))
        assert call.reply == reply
        msgs = [*msgs, {"role": "assistant", "content": reply}, {"role": "user", "content": f"output {k}"}]
    first, second = sess.calls[0], sess.calls[1]
    # call 2's prompt = call 1's prompt + its completion tokens + only the new message's template delta
    n = len(first.prompt_ids) + len(first.completion.token_ids)
    assert second.prompt_ids[:n] == first.prompt_ids + first.completion.token_ids
    assert (
        tok.decode(second.prompt_ids[n:]) == "\n<|im_start|>user\noutput 0<|im_end|>\n<|im_start|>assistant\n"
    )

    a = sess.assemble("task-1", 3)
    t = a.trajectory
    assert a.reason is None and t is not None and t.task_id == "task-1" and t.sample_idx == 3
    runs = mask_runs(t.loss_mask)
    assert len(runs) == 3 and len(a.rows) == 3
    im_end = encode(tok, "<|im_end|>")[0]
    for (s, e), reply in zip(runs, replies, strict=True):
        assert tok.decode(t.token_ids[s:e]) == reply + "<|im_end|>"  # the span is exactly what was generated
        assert t.token_ids[e - 1] == im_end and all(lp == -0.5 for lp in t.logprobs[s:e])
    for s, _ in runs[1:]:  # every later turn starts right after "<|im_end|>\n<|im_start|>assistant\n"
        assert tok.decode(t.token_ids[:s]).endswith("output 0<|im_end|>\n<|im_start|>assistant\n".replace(
            "output 0", f"output {runs.index((s, _)) - 1}"))  # fmt: skip
    for _, e in runs[:-1]:  # the separator token after each assistant turn end is kept
        assert t.token_ids[e - 1] == im_end and tok.decode(t.token_ids[e : e + 1]) == "\n"
    # assistant messages carry their spans, the transcript equals the conversation the agent sent
    spans = [m["span"] for m in t.messages if m["role"] == "assistant"]
    assert [tuple(s) for s in spans] == runs
    assert [m["content"] for m in t.messages if m["role"] == "assistant"] == replies
    assert a.drift["text_match"] and a.drift["token_match"], a.drift
    assert tok.decode(t.token_ids) + "\n" == render(tok, [*msgs[:-1]], add_generation_prompt=False)
    assert t.entropy is not None and sum(t.entropy) == sum(t.loss_mask)


def test_reply_cut_by_max_tokens_is_closed_by_the_gateway_with_mask_0(tiny_tokenizer):
    tok = tiny_tokenizer
    sess = Session("s", tok)
    _call(sess, [SYS, TASK], _completion(tok, "half a repl", stop=False))
    msgs = [SYS, TASK, {"role": "assistant", "content": "half a repl"}, {"role": "user", "content": "go on"}]
    _call(sess, msgs, _completion(tok, "done"))
    a = sess.assemble()
    t = a.trajectory
    assert a.reason is None and t.metrics["gateway"]["closed_by_gateway"] == 1
    (_, e0), _ = mask_runs(t.loss_mask)
    assert t.token_ids[e0] == encode(tok, "<|im_end|>")[0] and t.loss_mask[e0] == 0  # inserted, not trained
    assert a.drift["text_match"] and a.drift["token_match"]


def test_rewritten_history_falls_back_to_per_call_rows_and_says_why(tiny_tokenizer):
    tok = tiny_tokenizer
    sess = Session("s", tok)
    _call(sess, [SYS, TASK], _completion(tok, "bad format"))
    # mini-swe-agent drops a reply it cannot parse and sends its format-error note instead
    _call(sess, [SYS, TASK, {"role": "user", "content": "Please give one action."}], _completion(tok, "ls"))
    a = sess.assemble("t")
    assert a.trajectory is None and "history rewritten" in a.reason and "reply" in a.reason
    assert len(a.rows) == 2 and a.chain is not None and a.chain.metrics["gateway"]["segments"] == 2
    for row, call in zip(a.rows, sess.calls, strict=True):
        assert row.token_ids == call.prompt_ids + call.completion.token_ids
        assert mask_runs(row.loss_mask) == [(len(call.prompt_ids), len(row.token_ids))]


def test_retry_of_the_same_messages_drops_the_discarded_reply(tiny_tokenizer):
    tok = tiny_tokenizer
    sess = Session("s", tok)
    _call(sess, [SYS, TASK], _completion(tok, "first try"))
    _call(sess, [SYS, TASK], _completion(tok, "second try"))  # the agent retried (e.g. a client timeout)
    msgs = [SYS, TASK, {"role": "assistant", "content": "second try"}, {"role": "user", "content": "ok"}]
    _call(sess, msgs, _completion(tok, "end"))
    a = sess.assemble()
    assert a.reason is None and a.trajectory.metrics["gateway"]["off_chain_calls"] == 1
    text = tok.decode(a.trajectory.token_ids)
    assert "first try" not in text and "second try" in text and len(mask_runs(a.trajectory.loss_mask)) == 2


def test_drift_check_reports_a_stream_that_retokenizes_differently(tiny_tokenizer):
    tok = tiny_tokenizer
    sess = Session("s", tok)
    reply = "hello world hello world"
    per_char = [i for ch in reply for i in encode(tok, ch)]  # a valid, non-canonical encoding of the text
    assert per_char != encode(tok, reply)
    _call(sess, [SYS, TASK], _completion(tok, reply, ids=per_char))
    d = sess.assemble().drift
    assert d["text_match"] and not d["token_match"]
    assert d["first_token_diff"] is not None and d["recorded_tokens"] > d["rerendered_tokens"]


@pytest.mark.parametrize(
    "content", [[{"type": "text", "text": "Fix "}, {"type": "text", "text": "calc.py."}]]
)
def test_content_parts_are_the_same_message_as_text(tiny_tokenizer, content):
    sess = Session("s", tiny_tokenizer)
    _call(sess, [SYS, TASK], _completion(tiny_tokenizer, "ok"))
    msgs = [SYS, {"role": "user", "content": content}, {"role": "assistant", "content": "ok"},
            {"role": "user", "content": "next"}]  # fmt: skip
    call = _call(sess, msgs, _completion(tiny_tokenizer, "done"))
    assert call.parent == 0


BASH_TOOL = {"type": "function", "function": {"name": "bash", "parameters": {"type": "object"}}}


def test_tool_calls_come_back_as_openai_tool_calls_and_chain(tiny_tokenizer):
    tok = tiny_tokenizer
    sess = Session("s", tok)
    raw = 'Listing.\n<tool_call>\n{"name": "bash", "arguments": {"command": "ls"}}\n</tool_call>'
    ids, mask, lps, plan = sess.prompt_for([SYS, TASK], [BASH_TOOL])
    call = sess.record(plan, (ids, mask, lps), _completion(tok, raw))
    assert call.reply == "Listing." and call.tool_calls[0]["function"] == {
        "name": "bash",
        "arguments": '{"command": "ls"}',
    }
    # the agent sends the message back the way OpenAI clients do (extra keys, content None) plus the tool result
    back = {"role": "assistant", "content": "Listing.", "refusal": None,
            "tool_calls": [dict(call.tool_calls[0], index=0)]}  # fmt: skip
    result = {"role": "tool", "tool_call_id": call.tool_calls[0]["id"], "content": "calc.py"}
    ids, mask, lps, plan = sess.prompt_for([SYS, TASK, back, result], [BASH_TOOL])
    assert plan["parent"] == 0
    sess.record(plan, (ids, mask, lps), _completion(tok, "done"))
    a = sess.assemble()
    (s, e), _ = mask_runs(a.trajectory.loss_mask)
    assert (
        a.reason is None and tok.decode(a.trajectory.token_ids[s:e]) == raw + "<|im_end|>"
    )  # generated text
    # other tool definitions: the prompt is not the same conversation any more
    ids, mask, lps, plan = sess.prompt_for([SYS, TASK, back, result], [])
    sess.record(plan, (ids, mask, lps), _completion(tok, "x"))
    assert "tool definitions changed" in sess.assemble().reason
