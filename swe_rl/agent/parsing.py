"""Action parsers: DeepSWE/R2E-Gym XML function calls and Qwen/Hermes JSON tool calls.

XML:    <function=NAME><parameter=KEY>VALUE</parameter>...</function>
Hermes: <tool_call>{"name": NAME, "arguments": {...}}</tool_call>   (Qwen3-Coder's XML body inside is accepted)
The first call counts; later ones are counted (`n_calls`) and ignored. A `<think>...</think>` block is skipped.
Parameter values are raw text up to `</parameter>` (so they may contain `<function=`); one newline right after
the opening tag and one right before the closing tag are dropped, indentation is kept. Anything wrong raises
`ParseError` with a message meant for the model (it becomes the observation).
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import Any, Literal

ActionFormat = Literal["xml", "hermes"]
_FUNC_OPEN = re.compile(r"<function=([^>\s]*)>")
_PARAM_OPEN = re.compile(r"<parameter=([^>\s]*)>")


class ParseError(ValueError):
    """The reply holds no valid function call; str(e) is the observation shown to the model."""


@dataclass(frozen=True)
class Action:
    name: str
    params: dict[str, Any] = field(default_factory=dict)
    thought: str = ""  # text before the call (reasoning)
    n_calls: int = 1  # how many calls the reply contained; only the first is executed


def strip_think(text: str) -> str:
    """Drop a leading reasoning block: everything up to the last `</think>` when one is present."""
    if "</think>" in text:
        return text.rsplit("</think>", 1)[1]
    return text


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
    body = strip_think(text)
    m = _FUNC_OPEN.search(body)
    if m is None:
        raise ParseError(
            "No function call found. Reply with exactly one call in the format "
            "<function=NAME><parameter=KEY>VALUE</parameter></function>."
        )
    name = m.group(1)
    if not name:
        raise ParseError("Malformed function call: <function=> has an empty name.")
    params, end = _parse_function_body(body, m.end(), name)
    n_calls = 1 + len(_FUNC_OPEN.findall(body, end))
    return Action(name=name, params=params, thought=body[: m.start()].strip(), n_calls=n_calls)


def _hermes_call(payload: str) -> tuple[str, dict[str, Any]]:
    payload = payload.strip()
    if payload.startswith("<function="):
        a = parse_xml(payload)
        return a.name, a.params
    try:
        obj = json.loads(payload)
    except json.JSONDecodeError as e:
        raise ParseError(f"The <tool_call> body is not valid JSON ({e.msg} at position {e.pos}).") from None
    if not isinstance(obj, dict) or not isinstance(obj.get("name"), str) or not obj["name"]:
        raise ParseError('The <tool_call> JSON must be an object like {"name": "...", "arguments": {...}}.')
    args = obj.get("arguments", obj.get("parameters", {}))
    if isinstance(args, str):  # some models emit the arguments as a JSON string
        try:
            args = json.loads(args) if args.strip() else {}
        except json.JSONDecodeError:
            raise ParseError("The tool call's `arguments` string is not valid JSON.") from None
    if not isinstance(args, dict):
        raise ParseError(f"The tool call's `arguments` must be a JSON object, got {type(args).__name__}.")
    return obj["name"], args


def parse_hermes(text: str) -> Action:
    body = strip_think(text)
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
