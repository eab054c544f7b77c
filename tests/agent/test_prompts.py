"""Hermes prompts use the chat template's own tools block (`tools=`) when the template has one (issue 23 defect 6)."""

from __future__ import annotations

from swe_rl.agent.chat import ChatFormat
from swe_rl.agent.config import AgentConfig
from swe_rl.agent.prompts import Prompts


def test_hermes_tools_go_to_the_real_qwen_template(qwen25_tokenizer):
    tok = qwen25_tokenizer
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


class RecordingReplay:
    """ReplayPolicy that keeps every prompt it was fed."""

    def __init__(self, tokenizer, replies):
        from swe_rl.policy.scripted import ReplayPolicy

        self.inner, self.prompts = ReplayPolicy(tokenizer, replies), []

    async def generate(self, prompt_ids, sampling):
        self.prompts.append(list(prompt_ids))
        return await self.inner.generate(prompt_ids, sampling)


async def test_rerender_history_feeds_what_a_chat_server_would(
    qwen3_tokenizer, agent_sandbox, agent_cfg_for, agent_repo
):
    from swe_rl.agent.loop import run_episode
    from swe_rl.agent.parsing import format_action

    tok = qwen3_tokenizer
    _, task = agent_repo
    think = "<think>\nsecret plan\n</think>\n\n"
    replies = [
        think + format_action("execute_bash", {"command": "echo hi"}, "xml"),
        format_action("submit", {}, "xml"),
    ]
    fed = {}
    for mode in ("stream", "rerender"):
        policy = RecordingReplay(tok, replies)
        traj = await run_episode(task, agent_sandbox, policy, tok, agent_cfg_for(agent_sandbox, history=mode))
        assert traj.exit_status == "submitted"
        fed[mode] = tok.decode(policy.prompts[1])
    assert "secret plan" in fed["stream"]  # our stream keeps the earlier reasoning (as rLLM trains)
    assert "secret plan" not in fed["rerender"] and "echo hi" in fed["rerender"]  # Qwen3's template drops it
    assert fed["rerender"].endswith("<|im_start|>assistant\n")
