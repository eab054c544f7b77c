"""Trajectory.action_starts from the real agent loop (issue 26): where each turn's tool call begins, after any
reasoning, so that AEM's entropy_span=action can average over the call only."""

from __future__ import annotations

import pytest

from swe_rl.agent.loop import run_episode
from swe_rl.agent.parsing import format_action
from swe_rl.agent.trajectory import action_offset, action_token_mask, mask_runs
from swe_rl.policy.scripted import ReplayPolicy

pytestmark = pytest.mark.timeout(120)

THINK = "<think>\nThe failing test adds two numbers; calc.py must be where the bug lives, so look there.\n</think>\n"


@pytest.mark.parametrize("fmt", ["xml", "hermes"])
async def test_action_starts_mark_the_call_after_reasoning(
    fmt, agent_repo, agent_sandbox, agent_cfg_for, tiny_tokenizer, agent_check
):
    _, task = agent_repo
    cfg = agent_cfg_for(agent_sandbox, action_format=fmt)
    view = format_action("file_editor", {"command": "view", "path": "calc.py"}, fmt)
    replies = [THINK + view, format_action("submit", {}, fmt)]  # a reasoning turn, then a bare call
    traj = await run_episode(task, agent_sandbox, ReplayPolicy(tiny_tokenizer, replies), tiny_tokenizer, cfg)
    assert traj.exit_status == "submitted"
    agent_check(traj, tiny_tokenizer)
    runs = mask_runs(traj.loss_mask)
    assert len(runs) == 2 and len(traj.action_starts) == 2
    (s1, e1), (s2, _) = runs
    a1, a2 = traj.action_starts
    assert (
        s1 < a1 < e1 and a2 == s2
    )  # the first turn's action starts after its reasoning; the second is all call
    decode = lambda a, b: tiny_tokenizer.decode(traj.token_ids[a:b], skip_special_tokens=False)  # noqa: E731
    assert "</think>" in decode(s1, a1) and "<function=" not in decode(s1, a1).split("</think>")[1]
    assert (
        decode(a1, e1).lstrip().startswith(view.strip()[:3])
    )  # the call's opener, maybe with a merged newline
    act = action_token_mask(traj.loss_mask, traj.action_starts)
    assert sum(act[s1:e1]) == e1 - a1 and sum(act) < sum(traj.loss_mask)


def test_action_offset_binary_search_lands_on_the_opener(tiny_tokenizer):
    for reply in (THINK + "<function=submit>\n</function>", "no call here", "<tool_call>{}</tool_call>"):
        toks = tiny_tokenizer(reply, add_special_tokens=False)["input_ids"]
        fmt = "hermes" if "tool_call" in reply else "xml"
        k = action_offset(tiny_tokenizer, toks, reply, fmt)
        opener = {"xml": "<function=", "hermes": "<tool_call>"}[fmt]
        at = reply.rfind("</think>")
        at = reply.find(opener, at + 8 if at >= 0 else 0)
        if at <= 0:
            assert k == 0  # no call, or a call right at the start: the whole turn
            continue
        before = tiny_tokenizer.decode(toks[:k], skip_special_tokens=False)
        through = tiny_tokenizer.decode(toks[: k + 1], skip_special_tokens=False)
        assert len(before) <= at < len(through)  # token k is the one that reaches the opener
