"""Incremental chat templating with ChatML, Qwen2.5 and Qwen3 templates (incl. think blocks), and in episodes."""

from __future__ import annotations

import copy
from pathlib import Path

import pytest

from swe_rl.agent.chat import ChatFormat, encode
from swe_rl.agent.loop import run_episode
from swe_rl.agent.parsing import format_action
from swe_rl.policy.scripted import ReplayPolicy

TEMPLATES = Path(__file__).parent / "templates"


@pytest.fixture(scope="module")
def agent_tokenizers(tiny_tokenizer):
    out = {"chatml": tiny_tokenizer}
    for name in ("qwen25", "qwen3"):
        tok = copy.deepcopy(tiny_tokenizer)
        tok.chat_template = (TEMPLATES / f"{name}.jinja").read_text()
        out[name] = tok
    return out


def episode(
    tok, obs_role: str, replies: list[str], observations: list[str], **kw
) -> tuple[list[int], list[dict]]:
    """Build the token stream the loop builds: prompt, then (reply + <|im_end|>, observation delta) per turn."""
    chat = ChatFormat(tok, obs_role=obs_role, template_kwargs=kw)
    _, ids = chat.prompt("SYS", "TASK")
    msgs = [{"role": "system", "content": "SYS"}, {"role": "user", "content": "TASK"}]
    for i, reply in enumerate(replies):
        ids += [*encode(tok, reply), chat.turn_end_id]
        msgs.append({"role": "assistant", "content": reply})
        if i < len(observations):
            ids += chat.observation(observations[i])[1]
            msgs.append({"role": obs_role, "content": observations[i]})
    return ids, msgs


@pytest.mark.parametrize("template", ["chatml", "qwen25"])
@pytest.mark.parametrize("obs_role", ["user", "tool"])
def test_non_rewriting_templates_match_full_render(agent_tokenizers, template, obs_role):
    tok = agent_tokenizers[template]
    ids, msgs = episode(tok, obs_role, ["a1 <function=x></function>", "a2", "a3"], ["o1\nline", "o2"])
    full = tok.apply_chat_template(msgs, tokenize=False)
    assert tok.decode(ids, skip_special_tokens=False) + "\n" == full


@pytest.mark.parametrize(
    "obs_role, kw, expected",
    [
        ("user", {}, "\n<|im_start|>user\nOBS<|im_end|>\n<|im_start|>assistant\n"),
        ("tool", {}, "\n<|im_start|>user\n<tool_response>\nOBS\n</tool_response><|im_end|>\n<|im_start|>assistant\n"),
        ("user", {"enable_thinking": False}, "\n<|im_start|>user\nOBS<|im_end|>\n<|im_start|>assistant\n<think>\n\n</think>\n\n"),
    ],
)  # fmt: skip
def test_qwen3_observation_delta(agent_tokenizers, obs_role, kw, expected):
    chat = ChatFormat(agent_tokenizers["qwen3"], obs_role=obs_role, template_kwargs=kw)
    assert chat.observation_text("OBS") == expected


def test_qwen3_think_blocks_are_kept_in_the_token_stream(agent_tokenizers):
    tok = agent_tokenizers["qwen3"]
    replies = ["<think>\nplan A\n</think>\n\nact1", "<think>\nplan B\n</think>\n\nact2"]
    ids, msgs = episode(tok, "user", replies, ["o1"])  # observations as user turns (DeepSWE XML mode)
    stream = tok.decode(ids, skip_special_tokens=False)
    assert "plan A" in stream and "plan B" in stream
    # a full re-render drops the earlier turn's reasoning: re-tokenizing history would train on other tokens
    full = tok.apply_chat_template(msgs, tokenize=False)
    assert "plan A" not in full and stream + "\n" != full


def test_turn_end_must_be_one_token(tiny_tokenizer):
    with pytest.raises(ValueError, match="not a single token"):
        ChatFormat(tiny_tokenizer, turn_end_token="</end of turn>")


@pytest.mark.parametrize("template", ["qwen25", "qwen3"])
async def test_episode_with_qwen_templates_and_think(
    template, agent_tokenizers, agent_repo, agent_sandbox, agent_cfg_for, agent_check
):
    tok = agent_tokenizers[template]
    _, task = agent_repo
    cfg = agent_cfg_for(agent_sandbox, action_format="hermes", max_steps=4)
    view = format_action("file_editor", {"command": "view", "path": cfg.repo_dir + "/calc.py"}, "hermes")
    think = "<think>\nThe call <function=submit></function> is not it yet.\n</think>\n\n"
    replies = [think + view, think + format_action("submit", {}, "hermes")]
    traj = await run_episode(task, agent_sandbox, ReplayPolicy(tok, replies), tok, cfg)
    assert traj.exit_status == "submitted" and traj.metrics["format_errors"] == 0
    agent_check(traj, tok)
    assert "<tool_response>" in traj.messages[3]["text"]
