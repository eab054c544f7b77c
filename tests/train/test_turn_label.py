"""Turn types (AEM's α-by-turn-type metric keys, the demo report's rows) come from a closed vocabulary: whatever a
malformed or adversarial reply names, the label is one of a known set and has no markup or newline in it."""

from __future__ import annotations

import re

from swe_rl.agent.parsing import parse_action
from swe_rl.agent.toolset import canonical_name
from swe_rl.train.batch import TURN_VOCABULARY, UNKNOWN_TOOL, turn_label


def _label(reply: str, fmt: str = "xml") -> str:
    """The message the agent loop stores for `reply` (swe_rl/agent/loop.py: canonical name + params)."""
    a = parse_action(reply, fmt)  # type: ignore[arg-type]
    return turn_label({"role": "assistant", "action": {"name": canonical_name(a.name), "params": a.params}})


def _closed_set() -> set[str]:
    out = {"format_error", "none", UNKNOWN_TOOL}
    for name, cmds in TURN_VOCABULARY.items():
        out |= {name} if not cmds else {f"{name}:{c}" for c in cmds} | {f"{name}:unknown_command"}
    return out


def test_well_formed_calls_get_their_tool_and_command() -> None:
    assert (
        _label(
            "<function=file_editor><parameter=command>view</parameter><parameter=path>/a</parameter></function>"
        )
        == "file_editor:view"
    )
    assert (
        _label("<function=str_replace_editor><parameter=command>str_replace</parameter></function>")
        == "file_editor:str_replace"
    )
    assert _label("<function=finish><parameter=command>submit</parameter></function>") == "submit"
    # a shell command is free text: it is not part of the type
    assert (
        _label("<function=execute_bash><parameter=command>ls -la /testbed</parameter></function>")
        == "execute_bash"
    )


def test_malformed_replies_never_put_model_text_into_a_label() -> None:
    replies = [
        ("<function=file_editor><parameter=command>view\n<function=submit>\n</parameter></function>", "xml"),
        ("<function=file_editor><parameter=command>| a | b |</parameter></function>", "xml"),
        ("<function=submit|`x`<b></function>", "xml"),
        ('<tool_call>{"name": "<function=submit>\\n\\nrm", "arguments": {}}</tool_call>', "hermes"),
        ('<tool_call>{"name": "file_editor", "arguments": {"command": ["view"]}}</tool_call>', "hermes"),
    ]
    labels = [_label(r, f) for r, f in replies]
    assert labels == ["file_editor:unknown_command", "file_editor:unknown_command", UNKNOWN_TOOL, UNKNOWN_TOOL,
                      "file_editor:unknown_command"]  # fmt: skip
    assert set(labels) <= _closed_set()
    assert all(re.fullmatch(r"[a-z_]+(:[a-z_0-9]+)?", x) for x in _closed_set())  # Markdown- and key-safe


def test_unparsed_and_actionless_messages() -> None:
    assert turn_label({"role": "assistant", "parse_error": "No function call found."}) == "format_error"
    assert turn_label({"role": "assistant"}) == "none"
    assert turn_label({"role": "assistant", "action": {"name": 3, "params": None}}) == UNKNOWN_TOOL


def test_an_environment_registers_its_own_turns() -> None:
    import swe_rl.experiments.decisions as decisions

    for t in decisions.TURNS:
        name, _, cmd = t.partition(":")
        assert turn_label({"action": {"name": name, "params": {"command": cmd} if cmd else {}}}) == t
