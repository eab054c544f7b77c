"""Action parsers: DeepSWE/R2E-Gym XML function calls and Qwen/Hermes JSON tool calls.

XML:    <function=NAME><parameter=KEY>VALUE</parameter>...</function>
Hermes: <tool_call>{"name": NAME, "arguments": {...}}</tool_call>   (Qwen3-Coder's XML body inside is accepted)
The first call counts; later ones are counted (`n_calls`) and ignored. Reasoning is never acted on
(`split_reasoning`): a reply that opens `<think>` ends its reasoning at the FIRST `</think>` (so `</think>` inside a
later argument is data), a reply that never closes it was cut while thinking and has no action (as rLLM treats it),
and a call drafted inside the reasoning is not run. Parameter values are raw text up to `</parameter>` (so they may
contain `<function=`); one newline right after the opening tag and one right before the closing tag are dropped,
indentation is kept. Where R2E-Gym's parser (DeepSWE's) finds a call we do too: `<function = NAME>` with spaces, and a
`<function=NAME>` mentioned in prose before the real call (the mention is part of the thought). Hermes JSON is read
with `strict=False` (a literal newline inside a string is accepted, as Qwen models emit them). Anything wrong raises
`ParseError` with a message meant for the model (it becomes the observation).
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import Any, Literal

ActionFormat = Literal["xml", "hermes"]
_FUNC_OPEN = re.compile(r"<function\s*=\s*([^>]*?)\s*>")
_PARAM_OPEN = re.compile(r"<parameter\s*=\s*([^>]*?)\s*>")
THINK_OPEN, THINK_CLOSE = "<think>", "</think>"


class ParseError(ValueError):
    """The reply holds no valid function call; str(e) is the observation shown to the model."""


@dataclass(frozen=True)
class Action:
    name: str
    params: dict[str, Any] = field(default_factory=dict)
    thought: str = ""  # text before the call (reasoning)
    n_calls: int = 1  # how many calls the reply contained; only the first is executed


@dataclass(frozen=True)
class Reasoning:
    """A reply split into its reasoning and the content after it (the only part ever acted on)."""

    reasoning: str
    content: str
    unfinished: bool  # `<think>` was opened and never closed: the reply was cut while reasoning


def split_reasoning(text: str) -> Reasoning:
    """Reasoning vs. content. Explicit: the reply starts with `<think>`; it ends at the first `</think>`, or never
    (unfinished). Implicit: no `<think>` but a `</think>` outside any call block (a template that opens `<think>` in
    the prompt); a `</think>` inside a call's argument (thinking off) is data. Gateways use `content` to build
    OpenAI `tool_calls`, and none at all when `unfinished`."""
    head = text.lstrip()
    if head.startswith(THINK_OPEN):
        end = head.find(THINK_CLOSE, len(THINK_OPEN))
        if end < 0:
            return Reasoning(head[len(THINK_OPEN) :], "", True)
        return Reasoning(head[len(THINK_OPEN) : end], head[end + len(THINK_CLOSE) :], False)
    if THINK_OPEN not in text and (end := text.find(THINK_CLOSE)) >= 0 and not _inside_call(text, end):
        return Reasoning(text[:end], text[end + len(THINK_CLOSE) :], False)
    return Reasoning("", text, False)


def _inside_call(text: str, pos: int) -> bool:
    before = text[:pos]
    xml = _FUNC_OPEN.search(before) is not None and "</function>" not in before[before.rfind("<function") :]
    return xml or before.rfind("<tool_call>") > before.rfind("</tool_call>")


def strip_think(text: str) -> str:
    """The content after the reasoning ('' when the reply was cut inside `<think>`)."""
    return split_reasoning(text).content


def _acting_body(text: str) -> str:
    r = split_reasoning(text)
    if r.unfinished:
        raise ParseError(
            "Your reply ended inside <think> (no </think>), so it has no action: nothing drafted in your reasoning "
            "is run. Close the reasoning with </think> and then make exactly one call."
        )
    return r.content


def _trim(value: str) -> str:
    if value.startswith("\n"):
        value = value[1:]
    if value.endswith("\n"):
        value = value[:-1]
    return value


def _parse_function_body(text: str, start: int, name: str) -> tuple[dict[str, Any], int]:
    """Parse parameters from text[start:] up to `</function>`; returns (params, index after the block)."""
    params: dict[str, Any] = {}
    pos = start
    while True:
        while pos < len(text) and text[pos].isspace():
            pos += 1
        if text.startswith("</function>", pos):
            return params, pos + len("</function>")
        m = _PARAM_OPEN.match(text, pos)
        if m is None:
            if pos >= len(text):
                raise ParseError(f"Truncated function call: <function={name}> is not closed by </function>.")
            snippet = text[pos : pos + 40].replace("\n", "\\n")
            raise ParseError(
                f"Malformed function call <function={name}>: expected <parameter=...> or </function>, "
                f"found {snippet!r}. Nested function calls are not allowed."
            )
        key = m.group(1)
        if not key:
            raise ParseError(f"Malformed function call <function={name}>: a parameter has an empty name.")
        end = text.find("</parameter>", m.end())
        if end < 0:
            raise ParseError(f"Truncated function call: <parameter={key}> is not closed by </parameter>.")
        if key in params:
            raise ParseError(f"Malformed function call <function={name}>: parameter {key!r} given twice.")
        params[key] = _trim(text[m.end() : end])
        pos = end + len("</parameter>")


def parse_xml(text: str) -> Action:
    body = _acting_body(text)
    m = _FUNC_OPEN.search(body)
    if m is None:
        raise ParseError(
            "No function call found. Reply with exactly one call in the format "
            "<function=NAME><parameter=KEY>VALUE</parameter></function>."
        )
    while True:
        name = m.group(1)
        nxt = _FUNC_OPEN.search(body, m.end())
        if nxt is not None and _is_mention(body, m.end(), nxt.start()):
            m = nxt  # `<function=x>` named in prose before the real call: part of the thought
            continue
        if not name:
            raise ParseError("Malformed function call: <function=> has an empty name.")
        params, end = _parse_function_body(body, m.end(), name)
        n_calls = 1 + len(_FUNC_OPEN.findall(body, end))
        return Action(name=name, params=params, thought=body[: m.start()].strip(), n_calls=n_calls)


def _is_mention(body: str, start: int, next_open: int) -> bool:
    """Text after an opener that is neither a parameter, a closing tag nor another opener: prose."""
    between = body[start:next_open]
    lead = between.lstrip()
    return bool(lead) and "</function>" not in between and not _PARAM_OPEN.match(lead)


def _hermes_call(payload: str) -> tuple[str, dict[str, Any]]:
    payload = payload.strip()
    if payload.startswith("<function="):
        a = parse_xml(payload)
        return a.name, a.params
    try:
        obj = json.loads(payload, strict=False)  # literal newlines/tabs inside strings, as models write them
    except json.JSONDecodeError as e:
        raise ParseError(f"The <tool_call> body is not valid JSON ({e.msg} at position {e.pos}).") from None
    if not isinstance(obj, dict) or not isinstance(obj.get("name"), str) or not obj["name"]:
        raise ParseError('The <tool_call> JSON must be an object like {"name": "...", "arguments": {...}}.')
    args = obj.get("arguments", obj.get("parameters", {}))
    if isinstance(args, str):  # some models emit the arguments as a JSON string
        try:
            args = json.loads(args, strict=False) if args.strip() else {}
        except json.JSONDecodeError:
            raise ParseError("The tool call's `arguments` string is not valid JSON.") from None
    if not isinstance(args, dict):
        raise ParseError(f"The tool call's `arguments` must be a JSON object, got {type(args).__name__}.")
    return obj["name"], args


def parse_hermes(text: str) -> Action:
    body = _acting_body(text)
    start = body.find("<tool_call>")
    if start < 0:
        raise ParseError(
            'No tool call found. Reply with exactly one <tool_call>{"name": ..., "arguments": {...}}</tool_call>.'
        )
    end = body.find("</tool_call>", start)
    if end < 0:
        raise ParseError("Truncated tool call: <tool_call> is not closed by </tool_call>.")
    name, params = _hermes_call(body[start + len("<tool_call>") : end])
    n_calls = 1 + body.count("<tool_call>", end)
    return Action(name=name, params=params, thought=body[:start].strip(), n_calls=n_calls)


PARSERS = {"xml": parse_xml, "hermes": parse_hermes}


def parse_action(text: str, fmt: ActionFormat) -> Action:
    return PARSERS[fmt](text)


def format_action(name: str, params: dict[str, Any], fmt: ActionFormat, thought: str = "") -> str:
    """The inverse of the parser: the text a well-behaved model would emit (used by the scripted policy)."""
    prefix = f"{thought}\n" if thought else ""
    if fmt == "hermes":
        return prefix + "<tool_call>\n" + json.dumps({"name": name, "arguments": params}) + "\n</tool_call>"
    inner = "".join(f"<parameter={k}>\n{v}\n</parameter>\n" for k, v in params.items())
    return prefix + f"<function={name}>\n{inner}</function>"
