"""The exact-entropy old-log-prob forward (entropy_forward.exact_forward) around upstream's own `Actor.forward`
(defined verbatim from its source by `orl_actor_cls`) with a tiny random Qwen2 model on CPU, in this process.
`policy_actor` stands in for the PolicyModelActor; test_actors.py runs the same forward inside real Ray actors."""

from __future__ import annotations

import types

import torch

from swe_rl.train.openrlhf.entropy_forward import ExactForward, chunked_entropy, exact_forward


def test_forward_returns_exact_chunked_entropy(orl_actor_cls, tiny_tokenizer):
    from swe_rl.policy.tiny import build_tiny_model

    model = build_tiny_model(tiny_tokenizer, arch="qwen2")
    actor = orl_actor_cls(model, temperature=0.7)
    actor.packing_samples = False  # upstream sets it only when it loads a model from a path
    policy_actor = types.SimpleNamespace(actor=actor, strategy=types.SimpleNamespace(ring_attn_group=None))

    g = torch.Generator().manual_seed(0)
    seqs = torch.randint(3, len(tiny_tokenizer), (2, 24), generator=g)
    attn = torch.ones_like(seqs)
    attn[1, -5:] = 0  # right padding, as OpenRLHF's zero_pad_sequences makes
    amask = torch.zeros(2, 23, dtype=torch.bool)
    amask[:, 6:11] = True
    amask[:, 14:18] = True

    upstream_entropy = actor.forward.__globals__["compute_entropy"]
    out = exact_forward(policy_actor, seqs, amask, attn, chunk=5)
    assert isinstance(out, ExactForward)
    assert actor.forward.__globals__["compute_entropy"] is upstream_entropy, "the swap must end with the call"
    torch.testing.assert_close(
        out.log_probs, actor(seqs, amask, attn)
    )  # upstream's plain old-log-prob forward
    assert out.entropy.shape == amask.shape
    with torch.no_grad():  # reference: entropy of softmax(logits / T) at each next-token position, masked
        pos = attn.long().cumsum(-1) - 1
        logits = model(seqs, attention_mask=attn, position_ids=pos.clamp(min=0)).logits.float() / 0.7
        p = torch.softmax(logits, -1)
        want = (-(p * torch.log_softmax(logits, -1)).sum(-1))[:, :-1] * amask
    torch.testing.assert_close(out.entropy, want, rtol=1e-4, atol=1e-4)
    assert out.entropy[amask].min() > 0 and torch.all(out.entropy[~amask] == 0)


def test_chunked_entropy_is_swapped_only_during_the_call():
    def upstream_compute_entropy(logits):  # verbatim body of openrlhf.models.utils.compute_entropy
        pd = torch.nn.functional.softmax(logits, dim=-1)
        return torch.logsumexp(logits, dim=-1) - torch.sum(pd * logits, dim=-1)

    ns = {"compute_entropy": upstream_compute_entropy}
    logits = torch.randn(2, 7, 50) * 4
    with chunked_entropy(ns, chunk=3):
        assert ns["compute_entropy"] is not upstream_compute_entropy
        torch.testing.assert_close(
            ns["compute_entropy"](logits), upstream_compute_entropy(logits), rtol=1e-5, atol=1e-5
        )
    assert ns["compute_entropy"] is upstream_compute_entropy
