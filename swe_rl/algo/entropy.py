"""Token entropy H = −Σ_v p_v log p_v = logsumexp(z) − Σ_v p_v z_v, computed in chunks of tokens.

Only a (chunk × vocab) slice of fp32 logits/probabilities exists at a time, so the full (T × vocab) tensor is
never materialized in fp32 (and, from hidden states, never at all). Inputs may be bf16; every chunk is upcast
to fp32 before the softmax. With gradient enabled each chunk runs under activation checkpointing, so the backward
pass recomputes the chunk instead of keeping its (chunk × vocab) intermediates alive (EPO needs this gradient).
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor
from torch.utils.checkpoint import checkpoint

DEFAULT_CHUNK = 1024


def entropy_from_logits(logits: Tensor, temperature: float = 1.0) -> Tensor:
    """(N, V) logits of any float dtype -> (N,) fp32 entropy in nats at the given sampling temperature."""
    z = logits.float()
    if temperature != 1.0:
        z = z / temperature
    lse = torch.logsumexp(z, dim=-1)
    p = torch.softmax(z, dim=-1)
    return lse - (p * z).sum(-1)


def _hidden_chunk_entropy(h: Tensor, weight: Tensor, bias: Tensor | None, temperature: float) -> Tensor:
    return entropy_from_logits(F.linear(h, weight, bias), temperature)


def _check_chunk(chunk_size: int) -> None:
    if chunk_size < 1:
        raise ValueError(f"entropy chunk_size: expected >= 1, got {chunk_size}")


def token_entropy(logits: Tensor, *, chunk_size: int = DEFAULT_CHUNK, temperature: float = 1.0) -> Tensor:
    """(..., V) logits -> (...) fp32 token entropy, `chunk_size` tokens at a time."""
    _check_chunk(chunk_size)
    lead, vocab = logits.shape[:-1], logits.shape[-1]
    flat = logits.reshape(-1, vocab)
    with_grad = torch.is_grad_enabled() and logits.requires_grad
    parts = []
    for start in range(0, flat.shape[0], chunk_size):
        chunk = flat[start : start + chunk_size]
        if with_grad:
            parts.append(checkpoint(entropy_from_logits, chunk, temperature, use_reentrant=False))
        else:
            parts.append(entropy_from_logits(chunk, temperature))
    out = torch.cat(parts) if parts else flat.new_zeros(0, dtype=torch.float32)
    return out.reshape(lead)


def token_entropy_from_hidden(
    hidden: Tensor,
    weight: Tensor,
    bias: Tensor | None = None,
    *,
    chunk_size: int = DEFAULT_CHUNK,
    temperature: float = 1.0,
) -> Tensor:
    """(..., D) final hidden states and the lm_head weight (V, D) [+ bias (V,)] -> (...) fp32 token entropy;
    logits are produced chunk by chunk, so the (T × V) logits never exist."""
    _check_chunk(chunk_size)
    if hidden.shape[-1] != weight.shape[-1]:
        raise ValueError(f"lm_head weight: expected (V, {hidden.shape[-1]}), got {tuple(weight.shape)}")
    lead = hidden.shape[:-1]
    flat = hidden.reshape(-1, hidden.shape[-1])
    with_grad = torch.is_grad_enabled() and (hidden.requires_grad or weight.requires_grad)
    parts = []
    for start in range(0, flat.shape[0], chunk_size):
        chunk = flat[start : start + chunk_size]
        if with_grad:
            parts.append(
                checkpoint(_hidden_chunk_entropy, chunk, weight, bias, temperature, use_reentrant=False)
            )
        else:
            parts.append(_hidden_chunk_entropy(chunk, weight, bias, temperature))
    out = torch.cat(parts) if parts else flat.new_zeros(0, dtype=torch.float32)
    return out.reshape(lead)
