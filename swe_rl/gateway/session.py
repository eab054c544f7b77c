"""One agent session's calls, recorded as tokens: incremental chat templating, assembly into a `Trajectory`, drift.

A chat request whose messages extend an earlier call's messages plus the reply the gateway returned for it gets
the prompt `earlier prompt + earlier completion tokens + template delta of only the new messages` (the delta cut
after the assistant's turn-end token, as swe_rl.agent.chat does for observations). Nothing already in the stream
is re-tokenized, so the separator after `<|im_end|>` is exactly what the template renders (verl 6501/6719 lost
it at every tool boundary). A request that extends no earlier call (the agent rewrote its history) starts a new
segment from a fresh rendering; then the session is not one trajectory and `assemble` says why.
"""

from __future__ import annotations

import json
import re
import threading
from dataclasses import dataclass, field
from typing import Any

from swe_rl.agent.chat import _SENTINEL, encode, render
from swe_rl.agent.parsing import split_reasoning
from swe_rl.agent.trajectory import Trajectory
from swe_rl.policy.base import Completion


def normalize(message: dict[str, Any]) -> dict[str, Any]:
    """The parts of a chat message that reach the template: role, text content (text parts joined), tool fields
    (tool calls reduced to id, name and arguments, so a client's extra keys do not count as a rewrite)."""
    content = message.get("content")
    if isinstance(content, list):  # OpenAI content parts
        content = "".join(p.get("text", "") for p in content if isinstance(p, dict))
    out: dict[str, Any] = {"role": str(message.get("role", "")), "content": content or ""}
    if message.get("tool_calls"):
        out["tool_calls"] = [
            {"id": tc.get("id"), "type": "function", "function": {
                "name": (tc.get("function") or {}).get("name"),
                "arguments": _arguments_object((tc.get("function") or {}).get("arguments"))}}
            for tc in message["tool_calls"]
        ]  # fmt: skip
    for key in ("tool_call_id", "name"):
        if message.get(key):
            out[key] = message[key]
    return out


def _arguments_object(args: Any) -> Any:
    """OpenAI sends `arguments` as a JSON string; the templates want the object (Qwen2.5 renders it with `tojson`,
    so a string would be encoded twice and every re-render would drift). Not a JSON object: kept as is."""
    if isinstance(args, str):
        try:
            obj = json.loads(args)
        except ValueError:
            return args
        return obj if isinstance(obj, dict) else args
    return args


_TOOL_CALL = re.compile(r"<tool_call>\s*(.*?)\s*</tool_call>", re.DOTALL)


def _reasoning_and_answer(text: str) -> tuple[str, str]:
    """(reasoning part, answer part) of a reply, as the agent's parser splits it (swe_rl.agent.parsing): a reply
    cut inside `<think>` is all reasoning (no answer, so no tool call, as rLLM treats it)."""
    r = split_reasoning(text)
    if r.unfinished:
        return text, ""
    return text[: len(text) - len(r.content)], r.content


def split_tool_calls(text: str, id_prefix: str) -> tuple[str, list[dict[str, Any]]]:
    """Hermes-style `<tool_call>{"name": ..., "arguments": {...}}</tool_call>` blocks of a reply -> (the text
    outside them, OpenAI tool calls). A block that is not such JSON stays in the text. Only the answer counts:
    a call drafted inside `<think>` (or in a think block cut short) is reasoning, never a tool call."""
    reasoning, text = _reasoning_and_answer(text)
    rest, calls = _split_answer(text, id_prefix)
    return (reasoning + rest if calls else reasoning + text), calls


def _split_answer(text: str, id_prefix: str) -> tuple[str, list[dict[str, Any]]]:
    calls: list[dict[str, Any]] = []

    def take(m: re.Match) -> str:
        try:
            obj = json.loads(m.group(1))
        except ValueError:
            return m.group(0)
        if not isinstance(obj, dict) or not isinstance(obj.get("name"), str):
            return m.group(0)
        args = obj.get("arguments", {})
        calls.append({"id": f"{id_prefix}_{len(calls)}", "type": "function",
                      "function": {"name": obj["name"], "arguments": args if isinstance(args, str) else json.dumps(args)}})  # fmt: skip
        return ""

    rest = _TOOL_CALL.sub(take, text)
    return (rest.strip() if calls else text), calls


@dataclass
class Call:
    """One policy call: its full prompt (with the stream's mask and logprobs so far) and its completion."""

    messages: list[dict[str, Any]]  # the request's messages, normalized
    prompt_ids: list[int]
    prompt_mask: list[int]  # 1 on earlier completions' tokens inside this prompt
    prompt_logprobs: list[float]
    completion: Completion
    reply: str  # the assistant content returned to the agent
    parent: int | None  # index of the call this one extends; None = a segment root (fresh rendering)
    retry: bool = False  # the same messages as an earlier call: that call's reply was discarded
    closed: bool = False  # the gateway appended the turn-end token after a reply cut by max_tokens
    tools: list[dict[str, Any]] | None = None  # the request's tool definitions (rendered by the template)
    tool_calls: list[dict[str, Any]] = field(
        default_factory=list
    )  # parsed from the reply when tools were offered
    template_kwargs: dict[str, Any] = field(default_factory=dict)  # the request's chat_template_kwargs

    @property
    def reply_message(self) -> dict[str, Any]:
        """The assistant message returned to the agent, normalized (what it must send back unchanged)."""
        msg: dict[str, Any] = {"role": "assistant", "content": self.reply}
        if self.tool_calls:
            msg["tool_calls"] = self.tool_calls
        return normalize(msg)


@dataclass
class Assembled:
    """A session as training data: one trajectory when its calls chain, else per-call rows and the reason."""

    trajectory: Trajectory | None  # the whole session (None when it does not chain)
    rows: list[Trajectory]  # per-call rows (prompt mask 0, completion mask 1); always filled
    reason: str | None  # why the session is not one trajectory (None when it is)
    drift: dict[str, Any] = field(default_factory=dict)  # re-rendered conversation vs the recorded stream
    chain: Trajectory | None = None  # the last call's chain (its segment) as one trajectory


class Session:
    """Calls of one agent session against one tokenizer/template; thread-safe (one lock per session)."""

    def __init__(self, session_id: str, tokenizer: Any, *, turn_end_token: str = "<|im_end|>",
                 template_kwargs: dict[str, Any] | None = None):  # fmt: skip
        self.id = session_id
        self.tokenizer = tokenizer
        self.turn_end_token = turn_end_token
        ids = encode(tokenizer, turn_end_token)
        if len(ids) != 1:
            raise ValueError(f"turn_end_token={turn_end_token!r} is not one token for this tokenizer ({ids})")
        self.turn_end_id = ids[0]
        self.kw = dict(template_kwargs or {})
        self.calls: list[Call] = []
        self.events: list[str] = []  # segment breaks and retries, in order
        self.text_calls: list[tuple[str | None, list[int], Completion]] = []  # /v1/completions calls
        self.lock = threading.Lock()

    # --- building prompts --------------------------------------------------------------------------------------
    def _kw(self, tools: list[dict[str, Any]] | None, kw: dict[str, Any] | None = None) -> dict[str, Any]:
        """Template kwargs of one call: the gateway's defaults, the request's chat_template_kwargs, the tools."""
        base = {**self.kw, **(kw or {})}
        return {**base, "tools": tools} if tools else base

    def delta_text(self, new: list[dict[str, Any]], tools: list[dict[str, Any]] | None = None,
                   kw: dict[str, Any] | None = None) -> str:  # fmt: skip
        """Template text after a finished assistant turn (after its turn-end token) for the messages `new`."""
        msgs = [{"role": "user", "content": "task"}, {"role": "assistant", "content": _SENTINEL}, *new]
        full = render(self.tokenizer, msgs, add_generation_prompt=True, **self._kw(tools, kw))
        marker = _SENTINEL + self.turn_end_token
        cut = full.find(marker)
        if cut < 0:
            raise ValueError(f"the chat template does not end an assistant turn with {self.turn_end_token!r}")
        return full[cut + len(marker) :]

    def _parent_of(
        self, msgs: list[dict[str, Any]], tools: Any, kw: dict[str, Any]
    ) -> tuple[int | None, str]:
        """(call this request extends, how): 'extends' = its messages + reply are a prefix of msgs, 'retry' =
        the same messages again (the reply was discarded), 'fresh' = neither (or other tools)."""
        for i in range(len(self.calls) - 1, -1, -1):
            c = self.calls[i]
            if c.tools != tools or c.template_kwargs != kw:
                continue
            seen = [*c.messages, c.reply_message]
            if len(msgs) > len(seen) and msgs[: len(seen)] == seen:
                return i, "extends"
            if msgs == c.messages:
                return i, "retry"
        return None, "fresh"

    def prompt_for(self, messages: list[dict[str, Any]], tools: list[dict[str, Any]] | None = None,
                   template_kwargs: dict[str, Any] | None = None
                   ) -> tuple[list[int], list[int], list[float], dict]:  # fmt: skip
        """(prompt ids, their mask, their logprobs, plan) for a chat request; plan is passed back to `record`.
        `template_kwargs`: the request's chat_template_kwargs (e.g. enable_thinking), over the gateway's."""
        msgs = [normalize(m) for m in messages]
        tools = tools or None
        kw = dict(template_kwargs or {})
        parent, how = self._parent_of(msgs, tools, kw)
        if how == "fresh":
            text = render(self.tokenizer, msgs, add_generation_prompt=True, **self._kw(tools, kw))
            ids = encode(self.tokenizer, text)
            if self.calls:
                self.events.append(f"call {len(self.calls)}: {self._mismatch(msgs, tools, kw)}")
            plan0 = {"msgs": msgs, "parent": None, "tools": tools, "kw": kw}
            return ids, [0] * len(ids), [0.0] * len(ids), plan0
        c = self.calls[parent]  # type: ignore[index]
        if how == "retry":
            self.events.append(f"call {len(self.calls)}: retry of call {parent} (its reply was discarded)")
            plan = {
                "msgs": msgs,
                "parent": c.parent,
                "retry": True,
                "tools": tools,
                "kw": kw,
            }  # the discarded call leaves the chain
            return list(c.prompt_ids), list(c.prompt_mask), list(c.prompt_logprobs), plan
        ids = c.prompt_ids + c.completion.token_ids
        mask = c.prompt_mask + [1] * len(c.completion.token_ids)
        lps = c.prompt_logprobs + list(c.completion.logprobs)
        closed = not c.completion.token_ids or c.completion.token_ids[-1] != self.turn_end_id
        if closed:  # a reply cut by max_tokens: close the turn for the template (not a policy token)
            ids, mask, lps = [*ids, self.turn_end_id], [*mask, 0], [*lps, 0.0]
        delta = encode(self.tokenizer, self.delta_text(msgs[len(c.messages) + 1 :], tools, kw))
        plan = {"msgs": msgs, "parent": parent, "closed_parent": closed, "tools": tools, "kw": kw}
        return ids + delta, mask + [0] * len(delta), lps + [0.0] * len(delta), plan

    def _mismatch(self, msgs: list[dict[str, Any]], tools: Any, kw: dict[str, Any]) -> str:
        last = self.calls[-1]
        if last.tools != tools:
            return "the tool definitions changed (new segment)"
        if last.template_kwargs != kw:
            return "chat_template_kwargs changed (new segment)"
        seen = [*last.messages, last.reply_message]
        for k, (a, b) in enumerate(zip(seen, msgs, strict=False)):
            if a != b:
                what = (
                    "the reply the gateway returned" if k == len(seen) - 1 else f"message {k} ({a['role']})"
                )
                return f"history rewritten: {what} differs from what the agent sent (new segment)"
        return f"history shortened: {len(msgs)} messages after {len(seen)} (new segment)"

    def record(
        self, plan: dict, prompt: tuple[list[int], list[int], list[float]], completion: Completion
    ) -> Call:
        ids, mask, lps = prompt
        toks = completion.token_ids
        # the stop token (turn end, or another special one a stop list named) is not part of the content
        special = {self.turn_end_id, *getattr(self.tokenizer, "all_special_ids", [])}
        stopped = bool(toks) and completion.finish_reason == "stop" and toks[-1] in special
        reply = self.tokenizer.decode(toks[:-1] if stopped else toks, skip_special_tokens=False)
        calls: list[dict[str, Any]] = []
        if plan.get("tools"):  # the agent offered tools: hand tool calls back as OpenAI tool_calls
            reply, calls = split_tool_calls(reply, f"call_{len(self.calls)}")
        call = Call(plan["msgs"], ids, mask, lps, completion, reply, plan["parent"], plan.get("retry", False),
                    tools=plan.get("tools"), tool_calls=calls, template_kwargs=plan.get("kw", {}))  # fmt: skip
        if plan.get("closed_parent"):
            self.calls[plan["parent"]].closed = True
        self.calls.append(call)
        return call

    # --- assembly ----------------------------------------------------------------------------------------------
    def chain(self, last: int) -> list[int]:
        """Indices of the calls whose completions make up call `last`'s stream, in order."""
        out: list[int] = []
        i: int | None = last
        while i is not None:
            out.append(i)
            i = self.calls[i].parent
        return out[::-1]

    def assemble(self, task_id: str = "", sample_idx: int = 0) -> Assembled:
        rows = [self._row(c, task_id, sample_idx) for c in self.calls]
        if not self.calls:
            return Assembled(None, rows, "the agent made no model call")
        chain = self.chain(len(self.calls) - 1)
        whole = self._trajectory(chain, task_id, sample_idx)
        roots = [i for i, c in enumerate(self.calls) if c.parent is None and not c.retry]
        reason = None
        if len(roots) > 1:
            reason = "; ".join(e for e in self.events if "new segment" in e) or "several segments"
        whole.metrics["gateway"] = {
            "session": self.id, "calls": len(self.calls), "chain_calls": len(chain), "segments": len(roots),
            "off_chain_calls": len(self.calls) - len(chain), "events": list(self.events),
            "closed_by_gateway": sum(self.calls[i].closed for i in chain), "assembled": reason is None,
        }  # fmt: skip
        drift = self.drift(chain)
        whole.metrics["gateway"]["drift"] = drift
        return Assembled(whole if reason is None else None, rows, reason, drift, whole)

    def _trajectory(self, chain: list[int], task_id: str, sample_idx: int) -> Trajectory:
        last = self.calls[chain[-1]]
        toks = last.completion.token_ids
        ids, mask = last.prompt_ids + toks, last.prompt_mask + [1] * len(toks)
        lps = last.prompt_logprobs + list(last.completion.logprobs)
        first = self.calls[chain[0]]
        messages: list[dict[str, Any]] = [dict(m) for m in last.messages]
        for i in chain[:-1]:  # call i's reply sits right after its request's messages
            c = self.calls[i]
            start = len(c.prompt_ids)
            messages[len(c.messages)]["span"] = [start, start + len(c.completion.token_ids)]
        end = len(last.prompt_ids) + len(toks)
        messages.append({**last.reply_message, "span": [len(last.prompt_ids), end],
                         "finish_reason": last.completion.finish_reason})  # fmt: skip
        ent = self._entropy(chain, len(ids))
        return Trajectory(task_id=task_id, sample_idx=sample_idx, prompt_len=len(first.prompt_ids),
                          token_ids=ids, loss_mask=mask, logprobs=lps, entropy=ent, messages=messages,
                          metrics={"steps": len(chain), "policy_tokens": sum(mask)})  # fmt: skip

    def _entropy(self, chain: list[int], length: int) -> list[float] | None:
        if any(self.calls[i].completion.token_entropy is None for i in chain):
            return None
        out = [0.0] * length
        for i in chain:
            c = self.calls[i]
            s = len(c.prompt_ids)
            out[s : s + len(c.completion.token_ids)] = list(c.completion.token_entropy or [])
        return out

    def _row(self, c: Call, task_id: str, sample_idx: int) -> Trajectory:
        toks = c.completion.token_ids
        return Trajectory(task_id=task_id, sample_idx=sample_idx, prompt_len=len(c.prompt_ids),
                          token_ids=c.prompt_ids + toks, loss_mask=[0] * len(c.prompt_ids) + [1] * len(toks),
                          logprobs=[0.0] * len(c.prompt_ids) + list(c.completion.logprobs),
                          messages=[*c.messages, c.reply_message])  # fmt: skip

    def drift(self, chain: list[int]) -> dict[str, Any]:
        """Re-render the chain's final conversation with the template in one go and compare with the stream."""
        last = self.calls[chain[-1]]
        stream = last.prompt_ids + last.completion.token_ids
        convo = [*last.messages, last.reply_message]
        text = render(
            self.tokenizer, convo, add_generation_prompt=False, **self._kw(last.tools, last.template_kwargs)
        )
        recorded = self.tokenizer.decode(stream, skip_special_tokens=False)
        tail = text[len(recorded) :] if text.startswith(recorded) else None
        rest = tail
        if tail is not None and last.completion.token_ids[-1:] != [
            self.turn_end_id
        ]:  # a final reply cut short
            rest = tail.removeprefix(self.turn_end_token)  # the template closes it; the stream does not
        rerendered = encode(self.tokenizer, text)
        first = next((k for k, (a, b) in enumerate(zip(stream, rerendered, strict=False)) if a != b), None)
        if first is None and len(rerendered) < len(stream):
            first = len(rerendered)
        return {
            "recorded_tokens": len(stream), "rerendered_tokens": len(rerendered),
            "text_match": rest is not None and not rest.strip(),  # the stream decodes to the rendered text
            "token_match": first is None,  # re-tokenizing that text gives the same ids
            "first_token_diff": first, "template_tail": tail,
        }  # fmt: skip
