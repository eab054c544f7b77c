"""Action parsers on well-formed, malformed, nested, truncated and multi-call replies (XML and Hermes JSON)."""

from __future__ import annotations

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from swe_rl.agent.parsing import (
    ParseError,
    format_action,
    parse_action,
    parse_hermes,
    parse_xml,
    split_reasoning,
)

XML_OK = """I will look at the file first.
<function=file_editor>
<parameter=command>view</parameter>
<parameter=path>
/testbed/calc.py
</parameter>
</function>"""


def test_xml_basic_with_thought_and_trimmed_values():
    a = parse_xml(XML_OK)
    assert a.name == "file_editor" and a.params == {"command": "view", "path": "/testbed/calc.py"}
    assert a.thought == "I will look at the file first." and a.n_calls == 1


def test_xml_keeps_indentation_and_inner_markup():
    text = "<function=file_editor><parameter=old_str>\n    return a - b\n</parameter><parameter=new_str>\n    s = '<function=x>'\n</parameter></function>"
    a = parse_xml(text)
    assert a.params["old_str"] == "    return a - b"
    assert a.params["new_str"] == "    s = '<function=x>'"  # markup inside a value is data


def test_xml_first_call_counts():
    text = "<function=search><parameter=search_term>add</parameter></function>\n<function=submit></function>"
    a = parse_xml(text)
    assert a.name == "search" and a.n_calls == 2


def test_xml_no_params_and_think_block_skipped():
    text = "<think>maybe <function=execute_bash> is wrong</think>\nDone.<function=submit>\n</function>"
    a = parse_xml(text)
    assert a.name == "submit" and a.params == {} and a.thought == "Done."


@pytest.mark.parametrize(
    "text, message",
    [
        ("just prose", "No function call found"),
        ("<function=execute_bash><parameter=command>ls", "not closed by </parameter>"),
        ("<function=execute_bash><parameter=command>ls</parameter>", "not closed by </function>"),
        ("<function=a><function=b></function></function>", "Nested function calls are not allowed"),
        ("<function=a> stray text </function>", "expected <parameter=...>"),
        ("<function=><parameter=x>1</parameter></function>", "empty name"),
        ("<function=a><parameter=>1</parameter></function>", "empty name"),
        ("<function=a><parameter=x>1</parameter><parameter=x>2</parameter></function>", "given twice"),
    ],
)
def test_xml_malformed(text, message):
    with pytest.raises(ParseError, match=message):
        parse_xml(text)


def test_hermes_basic_and_string_arguments():
    a = parse_hermes(
        'Run it.\n<tool_call>\n{"name": "execute_bash", "arguments": {"command": "ls -la"}}\n</tool_call>'
    )
    assert a.name == "execute_bash" and a.params == {"command": "ls -la"} and a.thought == "Run it."
    b = parse_hermes('<tool_call>{"name": "search", "arguments": "{\\"search_term\\": \\"x\\"}"}</tool_call>')
    assert b.params == {"search_term": "x"}


def test_hermes_nested_json_values_and_multi_call():
    args = {
        "command": "create",
        "path": "/t/a.json",
        "file_text": json.dumps({"a": {"b": [1, 2]}, "s": "</tool_call>?"}),
    }
    one = "<tool_call>" + json.dumps({"name": "file_editor", "arguments": args}) + "</tool_call>"
    # a value containing "</tool_call>" cuts the block: the JSON is then invalid -> a clear error, not a crash
    with pytest.raises(ParseError, match="not valid JSON"):
        parse_hermes(one)
    args["file_text"] = json.dumps({"a": {"b": [1, 2]}})
    two = "<tool_call>" + json.dumps({"name": "file_editor", "arguments": args}) + "</tool_call>"
    a = parse_hermes(two + '<tool_call>{"name": "submit", "arguments": {}}</tool_call>')
    assert a.params == args and a.n_calls == 2


def test_hermes_qwen3_coder_xml_body():
    a = parse_hermes("<tool_call>\n<function=submit>\n</function>\n</tool_call>")
    assert a.name == "submit"


@pytest.mark.parametrize(
    "text, message",
    [
        ("no call", "No tool call found"),
        ('<tool_call>{"name": "x", "arguments": {}}', "not closed"),
        ("<tool_call>{not json}</tool_call>", "not valid JSON"),
        ('<tool_call>["x"]</tool_call>', "must be an object"),
        ('<tool_call>{"arguments": {}}</tool_call>', "must be an object"),
        ('<tool_call>{"name": "x", "arguments": [1]}</tool_call>', "must be a JSON object"),
        ('<tool_call>{"name": "x", "arguments": "{bad"}</tool_call>', "string is not valid JSON"),
    ],
)
def test_hermes_malformed(text, message):
    with pytest.raises(ParseError, match=message):
        parse_hermes(text)


def test_parse_action_dispatch():
    assert parse_action(XML_OK, "xml").name == "file_editor"
    with pytest.raises(ParseError):
        parse_action(XML_OK, "hermes")


safe_text = st.text(st.characters(blacklist_characters="<>\x00", blacklist_categories=("Cs",)), max_size=40)


@settings(max_examples=60, deadline=None)
@given(
    name=st.sampled_from(["file_editor", "search", "execute_bash", "submit"]),
    params=st.dictionaries(st.from_regex(r"[a-z_]{1,10}", fullmatch=True), safe_text, max_size=4),
    fmt=st.sampled_from(["xml", "hermes"]),
)
def test_format_then_parse_roundtrip(name, params, fmt):
    a = parse_action(format_action(name, params, fmt, thought="why"), fmt)
    assert a.name == name and a.params == params and a.thought == "why"


# --- issue 23, defect 2: a reply cut inside <think> has no action; calls drafted in reasoning never run ------------
CUT_XML = (
    "<think>\nThe tests are dirty. I could reset the tree first:\n"
    "<function=execute_bash>\n<parameter=command>git stash</parameter>\n</function>\n"
    "or maybe <function=execute_bash><parameter=command>git checkout -- .</parameter></function> would"
)
CUT_HERMES = (
    "<think>\nFirst clean up:\n"
    '<tool_call>\n{"name": "execute_bash", "arguments": {"command": "git stash"}}\n</tool_call>\n'
    'then <tool_call>{"name": "execute_bash", "arguments": {"command": "git checkout -- ."}}</tool_call> and'
)


@pytest.mark.parametrize("text, fmt", [(CUT_XML, "xml"), (CUT_HERMES, "hermes")])
def test_reply_cut_inside_think_has_no_action(text, fmt):
    with pytest.raises(ParseError, match="ended inside <think>"):
        parse_action(text, fmt)
    r = split_reasoning(text)
    assert r.unfinished and r.content == "" and "git stash" in r.reasoning


@pytest.mark.parametrize("fmt", ["xml", "hermes"])
def test_drafted_call_in_reasoning_is_not_the_action(fmt):
    drafted = format_action("execute_bash", {"command": "rm -rf /testbed"}, fmt)
    real = format_action("search", {"search_term": "add"}, fmt)
    a = parse_action(f"<think>\nmaybe {drafted}? no.\n</think>\n\n{real}", fmt)
    assert a.name == "search" and a.n_calls == 1
    implicit = parse_action(
        f"maybe {drafted}? no.\n</think>\n\n{real}", fmt
    )  # `<think>` opened by the prompt
    assert implicit.name == "search"


# --- issue 23, defect 4: parsing as R2E-Gym / Qwen models need it -------------------------------------------------
def test_hermes_literal_newline_inside_a_json_string():
    text = '<tool_call>\n{"name": "execute_bash", "arguments": {"command": "cd /testbed\npytest -q"}}\n</tool_call>'
    assert parse_hermes(text).params == {"command": "cd /testbed\npytest -q"}
    quoted = '<tool_call>{"name": "s", "arguments": "{\\"search_term\\": \\"a\nb\\"}"}</tool_call>'
    assert parse_hermes(quoted).params == {"search_term": "a\nb"}


@pytest.mark.parametrize("fmt", ["xml", "hermes"])
@pytest.mark.parametrize("think", ["<think>\nplan\n</think>\n\n", ""])
def test_end_think_inside_an_argument_keeps_the_call(fmt, think):
    params = {"command": "create", "path": "/testbed/t.txt", "file_text": "a </think> b"}
    a = parse_action(think + format_action("file_editor", params, fmt), fmt)
    assert a.name == "file_editor" and a.params == params


def test_prose_mentioning_function_before_the_real_call():
    text = (
        "I will use <function=execute_bash> to list the files, then read them.\n"
        "<function=execute_bash>\n<parameter=command>ls</parameter>\n</function>"
    )
    a = parse_xml(text)
    assert a.name == "execute_bash" and a.params == {"command": "ls"} and a.n_calls == 1
    assert a.thought.startswith("I will use <function=execute_bash> to list")
    other = parse_xml(
        "`<function=search>` is slow; <function=execute_bash><parameter=command>ls</parameter></function>"
    )
    assert other.name == "execute_bash"


def test_spaces_around_the_equals_sign():
    a = parse_xml("<function = execute_bash>\n<parameter = command>ls</parameter>\n</function>")
    assert a.name == "execute_bash" and a.params == {"command": "ls"}
