"""Expert demonstrations for SFT: the generator's scripted solutions played through the real agent loop and tools.

`expert_trajectories` runs each task's scripted actions (view -> str_replace -> submit, rendered in the agent's
own action format) with a ReplayPolicy through rollout_one in sandbox slots, and keeps the graded transcripts.
`encode_transcript` turns a transcript into (token_ids, loss_mask) for any tokenizer exactly the way the agent
loop builds them (ChatFormat prompt, policy tokens + turn end, observation deltas), so SFT data can be made
with a provisional tokenizer and re-encoded with the trained one.
"""

from __future__ import annotations

import asyncio
from typing import Any

from swe_rl.agent.chat import ChatFormat, encode
from swe_rl.agent.config import AgentConfig
from swe_rl.agent.parsing import format_action
from swe_rl.agent.trajectory import Trajectory
from swe_rl.tasks.generator import expert_actions
from swe_rl.tasks.task import Task


def expert_replies(task: Task, agent_cfg: AgentConfig, flawed: bool = False) -> list[str]:
    return [
        format_action(name, params, agent_cfg.action_format)
        for name, params in expert_actions(task, agent_cfg.repo_dir, flawed=flawed)
    ]


class ExpertProvider:
    """PolicyProvider that answers each episode with its task's scripted replies (the flawed expert's for the
    task ids in `flawed`)."""

    def __init__(self, tokenizer: Any, agent_cfg: AgentConfig, flawed: frozenset[str] = frozenset()):
        self.tokenizer = tokenizer
        self.agent_cfg = agent_cfg
        self.flawed = flawed

    def policy_for(self, task: Task, sample_idx: int) -> Any:
        from swe_rl.policy.scripted import ReplayPolicy

        replies = expert_replies(task, self.agent_cfg, flawed=task.instance_id in self.flawed)
        return ReplayPolicy(self.tokenizer, replies)

    def set_state(self, state_dict: Any) -> None:
        raise TypeError("the expert has no weights")


async def expert_trajectories(
    tasks: list[Task],
    tokenizer: Any,
    agent_cfg: AgentConfig,
    slots: Any,
    flawed: frozenset[str] = frozenset(),
) -> list[Trajectory]:
    """One graded expert episode per task through rollout_one (real tools in the slots, real tests); tasks whose
    id is in `flawed` are played by the flawed expert."""
    from swe_rl.rollout.episode import EpisodeContext
    from swe_rl.train.env import CachedGrader

    ctx = EpisodeContext(policy=ExpertProvider(tokenizer, agent_cfg, flawed), sandbox_factory=slots.lease,
                         agent_cfg=agent_cfg, reward_fn=CachedGrader(slots))  # fmt: skip
    return list(await asyncio.gather(*(ctx.run(t, 0) for t in tasks)))


def transcript(traj: Trajectory) -> dict[str, Any]:
    """The tokenizer-free part of an episode: system, task text, then (assistant, observation) turns."""
    msgs = traj.messages
    turns = [{"role": m["role"], "content": m["content"]} for m in msgs[2:]]
    return {"task_id": traj.task_id, "system": msgs[0]["content"], "task": msgs[1]["content"], "turns": turns,
            "reward": traj.reward}  # fmt: skip


def encode_transcript(
    tr: dict[str, Any], tokenizer: Any, agent_cfg: AgentConfig
) -> tuple[list[int], list[int]]:
    """(token_ids, loss_mask) as run_episode would produce them with `tokenizer` (mask 1 = assistant tokens)."""
    chat = ChatFormat(tokenizer, agent_cfg.turn_end_token, agent_cfg.obs_role, agent_cfg.chat_template_kwargs)
    _, ids = chat.prompt(tr["system"], tr["task"])
    mask = [0] * len(ids)
    for turn in tr["turns"]:
        if turn["role"] == "assistant":
            toks = [*encode(tokenizer, turn["content"]), chat.turn_end_id]
            ids += toks
            mask += [1] * len(toks)
        else:
            _, obs = chat.observation(turn["content"])
            ids += obs
            mask += [0] * len(obs)
    return ids, mask


def corpus(transcripts: list[dict[str, Any]]) -> list[str]:
    """Texts for training the BPE tokenizer."""
    out = []
    for tr in transcripts:
        out += [tr["system"], tr["task"]] + [t["content"] for t in tr["turns"]]
    return out
