"""Hermes prompts use the chat template's own tools block (`tools=`) when the template has one (issue 23 defect 6)."""

from __future__ import annotations

from swe_rl.agent.chat import ChatFormat
from swe_rl.agent.config import AgentConfig
from swe_rl.agent.prompts import Prompts


def test_hermes_tools_go_to_the_real_qwen_template(qwen25_tokenizer_dir):
    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(qwen25_tokenizer_dir)
    prompts = Prompts.load(AgentConfig(action_format="hermes"))
    system, kw = prompts.for_template(tok, {})
    assert "<tools>" not in system and [t["function"]["name"] for t in kw["tools"]] == [
        "file_editor", "search", "execute_bash", "submit"]  # fmt: skip
    text, _ = ChatFormat(tok, template_kwargs=kw).prompt(system, "Fix it.")
    assert text.count("<tools>\n") == 1 and '"name": "execute_bash"' in text  # the template's block, once
    assert "The function signatures are within" not in text  # not our paraphrase
    assert text.index("You are a programming agent") < text.index(
        "<tools>"
    )  # our system text, then the tools


def test_hermes_tools_fall_back_to_our_block_when_the_template_has_none(tiny_tokenizer):
    prompts = Prompts.load(AgentConfig(action_format="hermes", profile="deepswe"))
    system, kw = prompts.for_template(tiny_tokenizer, {"x": 1})
    assert "tools" not in kw and kw == {"x": 1}
    assert system.count("<tools>\n") == 1 and '"name": "execute_bash"' in system and '"cmd"' in system
    xml_system, _ = Prompts.load(AgentConfig()).for_template(tiny_tokenizer, {})
    assert "<tools>" not in xml_system and "BEGIN FUNCTION" in xml_system  # xml: the plain-text function list
