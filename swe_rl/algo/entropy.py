"""Token entropy H = −Σ_v p_v log p_v = logsumexp(z) − Σ_v p_v z_v, computed in chunks of tokens.

Only a (chunk × vocab) slice of fp32 logits/probabilities exists at a time, so the full (T × vocab) tensor is
never materialized in fp32 (and, from hidden states, never at all). Inputs may be bf16; every chunk is upcast
to fp32 before the softmax. The backward pass (EPO needs this gradient) is hand-written and recomputes each chunk
instead of keeping its (chunk × vocab) intermediates alive: dH/dz = −p ⊙ (log p + H).
"""

from __future__ import annotations

import functools
import os
from typing import Any

import torch
import torch.nn.functional as F
from torch import Tensor

DEFAULT_CHUNK = 512
_LOWEST = torch.finfo(torch.float32).min


def entropy_and_logsumexp(logits: Tensor, temperature: float = 1.0) -> tuple[Tensor, Tensor]:
    """The one definition of exact token entropy in swe-rl: (N, V) logits of any float dtype -> (H (N,), logsumexp
    (N,)), fp32, of softmax(logits / temperature). Every entropy the trainers use comes from here (the built-in
    trainer's `token_logprobs_and_entropy`, OpenRLHF's actor through `token_entropy`, the hidden-state variant);
    tests/openrlhf/test_entropy_routing.py replaces this module attribute and checks that both trainers' values move.

    Two (N, V) fp32 buffers at most, five passes over them in eager mode (torch.compile fuses them into about
    two): the shifted logits z' = (z - max z) / T and e = exp(z'); then with s = sum e, H = log s - <e, z'> / s and
    logsumexp = max / T + log s, so a token's log-prob is z_t / T - logsumexp from the same pass. Not
    differentiable by itself: the autograd Functions below wrap it with hand-written backwards."""
    top = logits.amax(dim=-1, keepdim=True).float()  # (N, 1) max z; max(z / T) = max(z) / T for T > 0
    z = torch.sub(logits, top)  # (N, V) fp32, our own buffer (bf16 - fp32 promotes)
    if temperature != 1.0:
        z.div_(temperature)
    # A masked logit (-inf) has p = 0 and adds 0 to H; left as -inf, e*z' would be 0*(-inf) = NaN. Clamped to the
    # lowest finite float it still has e = 0, and e*z' = 0. (A row masked entirely has no distribution: NaN.)
    z.clamp_(min=_LOWEST)
    e = torch.exp(z)
    s = e.sum(-1)
    dot = torch.linalg.vecdot(e, z)  # (N,) sum_v e_v z'_v without an (N, V) product in memory
    log_s = torch.log(s)
    return log_s - dot / s, log_s + top.squeeze(-1) / temperature


def entropy_from_logits(logits: Tensor, temperature: float = 1.0) -> Tensor:
    """(N, V) logits -> (N,) fp32 entropy in nats at the given sampling temperature (`entropy_and_logsumexp`'s)."""
    return _kernel(logits, temperature)[0]


def _kernel(logits: Tensor, temperature: float) -> tuple[Tensor, Tensor]:
    """`entropy_and_logsumexp`, looked up at call time (so the routing test's replacement reaches every caller),
    compiled by torch.compile when SWE_RL_ENTROPY_COMPILE=1 (default off: measured in bench/entropy.py)."""
    fn = entropy_and_logsumexp
    if _compile_on() and fn.__module__ == __name__:
        fn = _compiled(fn)
    # fp32 even inside the trainer's bf16 autocast (optim.amp), which would run torch.linalg.vecdot in bf16
    with torch.autocast(device_type=logits.device.type, enabled=False):
        return fn(logits, temperature)


def _logsumexp(logits: Tensor, temperature: float) -> Tensor:
    """(N, V) -> (N,) fp32 logsumexp(logits / T): the log-probs' normalizer when no entropy is asked for (compiled
    under the same flag, so "with" and "without entropy" compare like with like)."""
    return (_compiled(_plain_logsumexp) if _compile_on() else _plain_logsumexp)(logits, temperature)


def _plain_logsumexp(logits: Tensor, temperature: float) -> Tensor:
    return torch.logsumexp(_scaled(logits, temperature), dim=-1)


def _compile_on() -> bool:
    """SWE_RL_ENTROPY_COMPILE=1: torch.compile the kernels (default off; bench/entropy.py and bench/step_cost.py
    measure both ways)."""
    return os.environ.get("SWE_RL_ENTROPY_COMPILE", "0") == "1"


@functools.cache
def _compiled(fn: Any) -> Any:
    """torch.compile of the kernel (imports torch._dynamo: seconds, so only when asked for); dynamic shapes, as the
    last chunk and the temperature vary."""
    return torch.compile(fn, dynamic=True)


def _entropy_grad(z: Tensor, h: Tensor, g: Tensor, temperature: float) -> Tensor:
    """dL/dlogits for one chunk: dH/dz = −p ⊙ (log p + H), times the upstream g (N,) and 1/temperature
    (a masked logit, p = 0, gets 0, as in the forward)."""
    logp = torch.log_softmax(z, dim=-1).clamp_(min=_LOWEST)
    return -(logp.exp() * (logp + h[:, None])) * (g[:, None] / temperature)


def _scaled(logits: Tensor, temperature: float) -> Tensor:
    z = logits.float()
    return z / temperature if temperature != 1.0 else z


class _ChunkedLogitsEntropy(torch.autograd.Function):
    """Entropy of (N, V) logits; forward and backward both walk the tokens in chunks, and nothing of size
    (chunk × V) is saved for backward (it is recomputed), so the fp32 softmax never exists in full."""

    @staticmethod
    def forward(ctx: Any, logits: Tensor, chunk: int, temperature: float) -> Tensor:
        out = torch.cat(
            [entropy_from_logits(logits[i : i + chunk], temperature) for i in range(0, len(logits), chunk)]
        )
        ctx.save_for_backward(logits, out)
        ctx.chunk, ctx.temperature = chunk, temperature
        return out

    @staticmethod
    def backward(ctx: Any, grad_out: Tensor) -> tuple[Tensor, None, None]:
        logits, out = ctx.saved_tensors
        grad = torch.empty_like(logits)
        for i in range(0, len(logits), ctx.chunk):
            sl = slice(i, i + ctx.chunk)
            z = _scaled(logits[sl], ctx.temperature)
            grad[sl] = _entropy_grad(z, out[sl], grad_out[sl].float(), ctx.temperature).to(grad.dtype)
        return grad, None, None


class _ChunkedHiddenEntropy(torch.autograd.Function):
    """Entropy of softmax(hidden @ W^T + b) for (N, D) hidden states; logits exist one chunk at a time in both
    passes (recomputed in backward), so neither the (N × V) logits nor their softmax are ever materialized."""

    @staticmethod
    def forward(
        ctx: Any, hidden: Tensor, weight: Tensor, bias: Tensor | None, chunk: int, temp: float
    ) -> Tensor:
        parts = [
            entropy_from_logits(F.linear(hidden[i : i + chunk], weight, bias), temp)
            for i in range(0, len(hidden), chunk)
        ]
        out = torch.cat(parts)
        ctx.save_for_backward(hidden, weight, bias, out)
        ctx.chunk, ctx.temperature = chunk, temp
        return out

    @staticmethod
    def backward(
        ctx: Any, grad_out: Tensor
    ) -> tuple[Tensor | None, Tensor | None, Tensor | None, None, None]:
        hidden, weight, bias, out = ctx.saved_tensors
        need_h, need_w, need_b = ctx.needs_input_grad[:3]
        gh = torch.zeros_like(hidden, dtype=torch.float32) if need_h else None
        gw = torch.zeros_like(weight, dtype=torch.float32) if need_w else None
        gb = torch.zeros_like(bias, dtype=torch.float32) if need_b and bias is not None else None
        w32 = weight.float()
        for i in range(0, len(hidden), ctx.chunk):
            sl = slice(i, i + ctx.chunk)
            z = _scaled(F.linear(hidden[sl], weight, bias), ctx.temperature)
            dz = _entropy_grad(z, out[sl], grad_out[sl].float(), ctx.temperature)  # (n, V) fp32
            if gh is not None:
                gh[sl] = dz @ w32
            if gw is not None:
                gw += dz.T @ hidden[sl].float()
            if gb is not None:
                gb += dz.sum(0)
        cast = lambda g, like: None if g is None else g.to(like.dtype)  # noqa: E731
        return cast(gh, hidden), cast(gw, weight), cast(gb, bias) if bias is not None else None, None, None


class _ChunkedLogpEntropy(torch.autograd.Function):
    """Token log-probs log p(t) = z_t/T - logsumexp(z/T) and (optionally) entropy of (N, V) logits, both from one
    `_kernel` pass per chunk of tokens; the backward recomputes each chunk's softmax (nothing (chunk x V) is saved):
    d logp/dz = onehot(t) - p, dH/dz = -p * (log p + H), each times 1/T."""

    @staticmethod
    def forward(ctx: Any, logits: Tensor, targets: Tensor, chunk: int, temp: float, with_h: bool) -> Any:
        lp, h, lse = (torch.empty(len(logits), device=logits.device) for _ in range(3))
        for i in range(0, len(logits), chunk):
            sl = slice(i, i + chunk)
            z = logits[sl]
            if with_h:
                h[sl], lse[sl] = _kernel(z, temp)
            else:  # the log-probs alone: the baseline the entropy's cost is measured against
                lse[sl] = _logsumexp(z, temp)
            lp[sl] = z.gather(-1, targets[sl, None]).squeeze(-1).float() / temp - lse[sl]
        ctx.save_for_backward(logits, targets, h, lse)
        ctx.chunk, ctx.temperature, ctx.with_h = chunk, temp, with_h
        ctx.set_materialize_grads(False)
        return lp, h

    @staticmethod
    def backward(
        ctx: Any, g_lp: Tensor | None, g_h: Tensor | None
    ) -> tuple[Tensor | None, None, None, None, None]:
        logits, targets, h, lse = ctx.saved_tensors
        if not ctx.with_h:
            g_h = None
        if g_lp is None and g_h is None:
            return None, None, None, None, None
        grad = torch.empty_like(logits)
        for i in range(0, len(logits), ctx.chunk):
            sl = slice(i, i + ctx.chunk)
            gl = None if g_lp is None else g_lp[sl].float()
            gh = None if g_h is None else g_h[sl].float()
            grad[sl] = _logp_entropy_grad(logits[sl], targets[sl], lse[sl], h[sl], gl, gh, ctx.temperature)
        return grad, None, None, None, None


def _logp_entropy_grad(
    logits: Tensor,
    targets: Tensor,
    lse: Tensor,
    h: Tensor,
    g_lp: Tensor | None,
    g_h: Tensor | None,
    temp: float,
) -> Tensor:
    """dL/dlogits of one chunk (n, V) fp32 from the upstream gradients of log p(t) and H (either may be None)."""
    logp = logits.to(torch.float32, copy=True)  # our own buffer (`_scaled` may return the input itself)
    if temp != 1.0:
        logp.div_(temp)
    logp.sub_(lse[:, None]).clamp_(min=_LOWEST)
    p = logp.exp()
    if g_h is not None:  # -p (log p + H) g_h; p first, so a masked logit's 0 * (lowest float) stays 0
        grad = logp.add_(h[:, None]).mul_(p).mul_(-g_h[:, None])
        if g_lp is not None:
            grad.sub_(p.mul_(g_lp[:, None]))
    else:
        assert g_lp is not None
        grad = p.mul_(-g_lp[:, None])
    if g_lp is not None:
        grad.scatter_add_(-1, targets[:, None], g_lp[:, None])
    return grad.div_(temp) if temp != 1.0 else grad


def token_logprobs_and_entropy(
    logits: Tensor,
    targets: Tensor,
    *,
    with_entropy: bool = True,
    chunk_size: int = DEFAULT_CHUNK,
    temperature: float = 1.0,
) -> tuple[Tensor, Tensor | None]:
    """(..., V) logits and (...) target token ids -> ((...) fp32 log p(target), (...) fp32 entropy or None), at the
    given temperature, `chunk_size` tokens at a time; differentiable in the logits (both outputs). The entropy and
    the log-probs share one logsumexp (`entropy_and_logsumexp`); only (chunk x V) fp32 buffers exist."""
    _check_chunk(chunk_size)
    lead, vocab = logits.shape[:-1], logits.shape[-1]
    if targets.shape != lead:
        raise ValueError(f"targets: expected shape {tuple(lead)} (the logits' without the vocabulary), got "
                         f"{tuple(targets.shape)}")  # fmt: skip
    flat = logits.reshape(-1, vocab)
    if flat.shape[0] == 0:
        empty = flat.new_zeros(lead, dtype=torch.float32)
        return empty, (empty if with_entropy else None)
    lp, h = _ChunkedLogpEntropy.apply(flat, targets.reshape(-1), chunk_size, temperature, with_entropy)
    return lp.reshape(lead), (h.reshape(lead) if with_entropy else None)


def _check_chunk(chunk_size: int) -> None:
    if chunk_size < 1:
        raise ValueError(f"entropy chunk_size: expected >= 1, got {chunk_size}")


def token_entropy(logits: Tensor, *, chunk_size: int = DEFAULT_CHUNK, temperature: float = 1.0) -> Tensor:
    """(..., V) logits -> (...) fp32 token entropy, `chunk_size` tokens at a time (differentiable)."""
    _check_chunk(chunk_size)
    lead, vocab = logits.shape[:-1], logits.shape[-1]
    flat = logits.reshape(-1, vocab)
    if flat.shape[0] == 0:
        return flat.new_zeros(lead, dtype=torch.float32)
    out: Tensor = _ChunkedLogitsEntropy.apply(flat, chunk_size, temperature)
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
    logits are produced chunk by chunk, so the (T × V) logits never exist (differentiable in all three)."""
    _check_chunk(chunk_size)
    if hidden.shape[-1] != weight.shape[-1]:
        raise ValueError(f"lm_head weight: expected (V, {hidden.shape[-1]}), got {tuple(weight.shape)}")
    lead = hidden.shape[:-1]
    flat = hidden.reshape(-1, hidden.shape[-1])
    if flat.shape[0] == 0:
        return flat.new_zeros(lead, dtype=torch.float32)
    out: Tensor = _ChunkedHiddenEntropy.apply(flat, weight, bias, chunk_size, temperature)
    return out.reshape(lead)
