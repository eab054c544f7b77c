"""The exact-entropy old-log-prob forward of our policy actor (actors.py), kept free of OpenRLHF's GPU stack.

`exact_forward(policy, ...)` is upstream's `PolicyModelActor.forward` with `return_entropy=True`: OpenRLHF's own
Actor computes the entropy in its packing- and ring-attention-aware path, with its `compute_entropy` swapped for
swe_rl.algo's chunked one during the call (`token_entropy`: the one exact-entropy definition the built-in trainer
uses too, tests/openrlhf/test_entropy_routing.py), so the (T × vocab) probabilities never exist at once. The result is
an explicit `ExactForward` pair (never an attribute on a tensor, which a copy or zero-copy transport drops).
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from dataclasses import dataclass
from functools import partial
from typing import Any

import torch
from torch import Tensor


@dataclass(frozen=True)
class ExactForward:
    """One micro-batch from our old-log-prob forward: upstream's (B, A) log-probs and the (B, A) token entropy
    of the same temperature-scaled policy (0 off the action mask)."""

    log_probs: Tensor
    entropy: Tensor


@contextlib.contextmanager
def chunked_entropy(namespace: dict[str, Any], chunk: int) -> Iterator[None]:
    """For the duration of one forward, `compute_entropy` in OpenRLHF's models/actor.py globals is swe_rl.algo's
    chunked token entropy (Actor.forward has already divided the logits by the temperature). The actor process
    runs one call at a time, and the training step's entropy (entropy_coef) keeps upstream's."""
    from swe_rl.algo.entropy import token_entropy

    if "compute_entropy" not in namespace:
        raise RuntimeError("OpenRLHF's Actor.forward no longer resolves `compute_entropy` from its module")
    upstream = namespace["compute_entropy"]
    namespace["compute_entropy"] = partial(token_entropy, chunk_size=chunk)
    try:
        yield
    finally:
        namespace["compute_entropy"] = upstream


def exact_forward(policy: Any, sequences, action_mask, attention_mask, chunk: int) -> ExactForward:
    """`policy`: the PolicyModelActor (its `.actor` is OpenRLHF's Actor, `.strategy` its DeepSpeed strategy)."""
    device = torch.cuda.current_device() if torch.cuda.is_available() else "cpu"
    actor = policy.actor
    actor.eval()
    with torch.no_grad(), chunked_entropy(type(actor).forward.__globals__, chunk):
        mask = action_mask.to(device)
        logp, output = actor(
            sequences.to(device),
            mask,
            attention_mask.to(device),
            return_output=True,
            return_entropy=True,
            ring_attn_group=policy.strategy.ring_attn_group,
        )
        entropy = output.entropy[:, -mask.shape[1] :] * mask  # (B, A), aligned like the log-probs
        del output
    actor.train()
    return ExactForward(logp.to("cpu"), entropy.float().to("cpu"))
