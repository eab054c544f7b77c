"""Trajectories -> padded tensors, and the chunked log-prob / token-entropy forward pass.

Positions are aligned to tokens: `logp[:, j] = log p(token_j | tokens_<j)` for j >= 1 and 0 at j = 0, so the
trajectory's loss_mask (1 = policy token) applies to them directly. Observation tokens have mask 0 and therefore
get no gradient. Logits are produced `chunk` rows at a time from the final hidden states, so the full
(B, T, vocab) tensor never exists at once, and their fp32 softmax only `token_chunk` tokens at a time.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch
from torch import Tensor

from swe_rl.agent.trajectory import Trajectory, action_token_mask
from swe_rl.algo.entropy import DEFAULT_CHUNK, token_logprobs_and_entropy


@dataclass
class Batch:
    """A padded batch of B trajectories of max length T (right padding)."""

    input_ids: Tensor  # (B, T) int64, pad = pad_id
    attention_mask: Tensor  # (B, T) int64, 1 on real tokens
    loss_mask: Tensor  # (B, T) float32, 1 on policy tokens
    rollout_logprobs: Tensor  # (B, T) float32, sampler's logprob on policy tokens
    # (B, T) float32, 1 on each turn's action tokens (Trajectory.action_starts; the whole turn without one),
    # for AEM's entropy_span=action; None = the loss mask
    action_mask: Tensor | None = None

    def select(self, rows: Tensor) -> Batch:
        act = None if self.action_mask is None else self.action_mask[rows]
        return Batch(
            self.input_ids[rows],
            self.attention_mask[rows],
            self.loss_mask[rows],
            self.rollout_logprobs[rows],
            act,
        )

    def to(self, device: torch.device | str) -> Batch:
        """The same batch on `device` (itself when it is there already)."""
        if self.input_ids.device == torch.device(device):
            return self
        act = None if self.action_mask is None else self.action_mask.to(device)
        return Batch(
            self.input_ids.to(device),
            self.attention_mask.to(device),
            self.loss_mask.to(device),
            self.rollout_logprobs.to(device),
            act,
        )

    @property
    def size(self) -> int:
        return int(self.input_ids.shape[0])


def collate(trajs: list[Trajectory], pad_id: int, max_len: int | None = None) -> Batch:
    """Right-pad token lists into tensors; sequences longer than max_len are cut (their tail loses its mask)."""
    if not trajs:
        raise ValueError("collate: expected at least one trajectory")
    for t in trajs:
        if len(t.loss_mask) != len(t.token_ids):
            raise ValueError(
                f"trajectory {t.task_id}#{t.sample_idx}: loss_mask has {len(t.loss_mask)} entries "
                f"but token_ids has {len(t.token_ids)}"
            )
    length = max(len(t.token_ids) for t in trajs)
    if max_len is not None:
        length = min(length, max_len)
    # at least one column: a step whose every episode failed before its first token (an infrastructure error)
    # still makes a batch, of padding with no policy token
    length = max(length, 1)
    b = len(trajs)
    ids = torch.full((b, length), pad_id, dtype=torch.long)
    attn = torch.zeros((b, length), dtype=torch.long)
    mask = torch.zeros((b, length), dtype=torch.float32)
    lps = torch.zeros((b, length), dtype=torch.float32)
    act = torch.zeros((b, length), dtype=torch.float32)
    for i, t in enumerate(trajs):
        n = min(len(t.token_ids), length)
        ids[i, :n] = torch.tensor(t.token_ids[:n], dtype=torch.long)
        attn[i, :n] = 1
        mask[i, :n] = torch.tensor(t.loss_mask[:n], dtype=torch.float32)
        act[i, :n] = torch.tensor(action_token_mask(t.loss_mask, t.action_starts)[:n], dtype=torch.float32)
        if t.logprobs:
            lps[i, :n] = torch.tensor(t.logprobs[:n], dtype=torch.float32)
    mask[:, 0] = 0.0  # the first token has no prediction
    return Batch(ids, attn, mask, lps, act * mask)


def token_logprobs_entropy(
    model: Any,
    batch: Batch,
    *,
    chunk: int = 16,
    with_entropy: bool = True,
    temperature: float = 1.0,
    token_chunk: int = DEFAULT_CHUNK,
) -> tuple[Tensor, Tensor | None]:
    """(B, T) log p(token_j | <j) and (B, T) token entropy (None unless with_entropy), token-aligned.

    Runs the transformer body once, then the LM head `chunk` rows at a time; each (chunk, T, V) block of logits
    goes to swe_rl.algo's `token_logprobs_and_entropy` (the one exact-entropy definition, log-probs from the same
    logsumexp, fp32 `token_chunk` tokens at a time). Gradients flow when the caller has grad enabled (the PPO
    update); the old-policy pass calls this under torch.no_grad().
    """
    body = model.get_decoder() if hasattr(model, "get_decoder") else model.model
    hidden = body(
        input_ids=batch.input_ids, attention_mask=batch.attention_mask
    ).last_hidden_state  # (B, T, H)
    head = model.get_output_embeddings()
    b = batch.input_ids.shape[0]
    lp_rows: list[Tensor] = []
    ent_rows: list[Tensor] = []
    for s in range(0, b, chunk):
        logits = head(
            hidden[s : s + chunk, :-1]
        )  # (c, T-1, V) in the head's dtype: position j-1 predicts token j
        lp, ent = token_logprobs_and_entropy(
            logits, batch.input_ids[s : s + chunk, 1:], with_entropy=with_entropy, chunk_size=token_chunk,
            temperature=temperature,
        )  # fmt: skip
        lp_rows.append(torch.nn.functional.pad(lp, (1, 0)))
        if ent is not None:
            ent_rows.append(torch.nn.functional.pad(ent, (1, 0)))
        del logits
    logp = torch.cat(lp_rows, 0)
    entropy = torch.cat(ent_rows, 0) if with_entropy else None
    return logp, entropy


def minibatches(n: int, size: int, generator: torch.Generator) -> list[Tensor]:
    """Random partition of range(n) into index tensors of at most `size` rows."""
    perm = torch.randperm(n, generator=generator)
    return [perm[i : i + size] for i in range(0, n, size)]


# Turn types become metric keys and report rows, so they come from a closed vocabulary, never from raw model
# text: tool -> its enumerated commands (() when the command is free text, e.g. a shell line, and not part of
# the type). Built from every agent profile's tool specs; an environment with its own turns registers them.
TURN_VOCABULARY: dict[str, tuple[str, ...]] = {}
UNKNOWN_TOOL = "unknown_tool"


def register_turn_types(vocab: dict[str, tuple[str, ...]]) -> None:
    """Add tool names and their enumerated commands to the turn-type vocabulary (e.g. a toy environment's)."""
    for name, cmds in vocab.items():
        TURN_VOCABULARY[name] = tuple(dict.fromkeys((*TURN_VOCABULARY.get(name, ()), *cmds)))


def _agent_turn_types() -> dict[str, tuple[str, ...]]:
    from swe_rl.agent.profiles import PROFILES
    from swe_rl.agent.toolset import SUBMIT, canonical_name

    out: dict[str, tuple[str, ...]] = {SUBMIT: ()}
    for prof in PROFILES.values():
        for spec in prof.specs:
            name = canonical_name(spec.name)
            if name != SUBMIT:
                out[name] = next((p.enum for p in spec.params if p.name == "command"), ())
    return out


register_turn_types(_agent_turn_types())


def turn_label(message: dict[str, Any]) -> str:
    """Turn type of an assistant message, always from TURN_VOCABULARY: the tool and its enumerated command
    (`file_editor:view`), the tool alone (`execute_bash`, `submit`), `<tool>:unknown_command` or `unknown_tool`
    when the model named something outside it, `format_error` when the reply did not parse, `none` otherwise."""
    action = message.get("action")
    if not isinstance(action, dict):
        return "format_error" if "parse_error" in message else "none"
    name = action.get("name")
    if not isinstance(name, str) or name not in TURN_VOCABULARY:
        return UNKNOWN_TOOL
    cmds = TURN_VOCABULARY[name]
    if not cmds:
        return name
    cmd = (action.get("params") or {}).get("command")
    return f"{name}:{cmd}" if cmd in cmds else f"{name}:unknown_command"


def span_turn_types(trajs: list[Trajectory], loss_mask: Tensor) -> list[str]:
    """One label per span of `loss_mask` (B, T), row-major, as swe_rl.algo.spans numbers them: the turn type of
    the assistant message the span belongs to (`turn_label`), or `turn<k>` when a row's messages do not map
    onto its spans one to one (e.g. the toy environment has no messages)."""
    out: list[str] = []
    for row, t in zip(loss_mask.bool().tolist(), trajs, strict=True):
        runs = [j for j in range(len(row)) if row[j] and (j == 0 or not row[j - 1])]  # span starts
        turns = [m for m in t.messages if m.get("role") == "assistant" and m.get("span")]
        owner = []
        for start in runs:
            hit = [m for m in turns if m["span"][0] <= start < m["span"][1]]
            owner.append(turn_label(hit[0]) if len(hit) == 1 else None)
        if any(o is None for o in owner):
            owner = [f"turn{k}" for k in range(len(runs))]
        out.extend(str(o) for o in owner)
    return out
