"""The exact-entropy old-log-prob forward (patch.make_policy_forward) around upstream's own `Actor.forward`
(defined verbatim from its source by `orl_actor_cls`) with a tiny random Qwen2 model on CPU. The
`policy_actor` namespace stands in for the Ray `PolicyModelActor` (its module imports vLLM and DeepSpeed)."""

from __future__ import annotations

import types

import torch

from swe_rl.train.openrlhf.aem_seam import ENTROPY_ATTR
from swe_rl.train.openrlhf.config import AemConfig
from swe_rl.train.openrlhf.patch import make_policy_forward


def test_forward_attaches_exact_chunked_entropy(orl_actor_cls, tiny_tokenizer):
    from swe_rl.policy.tiny import build_tiny_model

    model = build_tiny_model(tiny_tokenizer, arch="qwen2")
    actor = orl_actor_cls.__new__(orl_actor_cls)
    torch.nn.Module.__init__(actor)
    actor.model, actor.temperature, actor.packing_samples = model, 0.7, False
    policy_actor = types.SimpleNamespace(actor=actor, strategy=types.SimpleNamespace(ring_attn_group=None))

    g = torch.Generator().manual_seed(0)
    seqs = torch.randint(3, len(tiny_tokenizer), (2, 24), generator=g)
    attn = torch.ones_like(seqs)
    attn[1, -5:] = 0  # right padding, as OpenRLHF's zero_pad_sequences makes
    amask = torch.zeros(2, 23, dtype=torch.bool)
    amask[:, 6:11] = True
    amask[:, 14:18] = True

    out = make_policy_forward(AemConfig(entropy_chunk=5))(policy_actor, seqs, amask, attn)
    ref_logp = actor(seqs, amask, attn)  # upstream's plain old-log-prob forward
    torch.testing.assert_close(out, ref_logp)
    ent = getattr(out, ENTROPY_ATTR)
    assert ent.shape == amask.shape
    with torch.no_grad():  # reference: entropy of softmax(logits / T) at each next-token position, masked
        pos = attn.long().cumsum(-1) - 1
        logits = model(seqs, attention_mask=attn, position_ids=pos.clamp(min=0)).logits.float() / 0.7
        p = torch.softmax(logits, -1)
        want = (-(p * torch.log_softmax(logits, -1)).sum(-1))[:, :-1] * amask
    torch.testing.assert_close(ent, want, rtol=1e-4, atol=1e-4)
    assert ent[amask].min() > 0 and torch.all(ent[~amask] == 0)
    assert getattr(type(actor).forward.__globals__["compute_entropy"], "_swe_rl_chunked", False)
