"""One definition of exact entropy for both trainers: the built-in trainer's old-policy forward
(swe_rl.train.batch.token_logprobs_entropy) and OpenRLHF's policy actor forward (entropy_forward.exact_forward
around upstream's own `Actor.forward`) both take their entropy from swe_rl.algo.entropy.entropy_and_logsumexp.

The test replaces that module attribute (the documented hook: every caller looks it up at call time) with the same
function plus a marker (+100 nats on H, +1 on the logsumexp) and checks that both trainers' returned entropies move
by the marker: a trainer that computed its own entropy (an inlined formula, upstream's compute_entropy, another
helper) would not move and fails here."""

from __future__ import annotations

import types

import torch

import swe_rl.algo.entropy as entropy_mod
from swe_rl.agent.trajectory import Trajectory
from swe_rl.train.batch import collate, token_logprobs_entropy
from swe_rl.train.openrlhf.entropy_forward import exact_forward

MARK_H, MARK_LSE = 100.0, 1.0


def _marked(monkeypatch) -> list[int]:
    real, calls = entropy_mod.entropy_and_logsumexp, []

    def marked(logits, temperature=1.0):
        calls.append(len(logits))
        h, lse = real(logits, temperature)
        return h + MARK_H, lse + MARK_LSE

    monkeypatch.setattr(entropy_mod, "entropy_and_logsumexp", marked)
    return calls


def test_builtin_trainer_takes_entropy_and_logprobs_from_the_one_definition(monkeypatch, tiny_tokenizer):
    from swe_rl.policy.tiny import build_tiny_model

    model = build_tiny_model(tiny_tokenizer, arch="qwen2").eval()
    g = torch.Generator().manual_seed(0)
    ids = torch.randint(3, len(tiny_tokenizer), (30,), generator=g).tolist()
    batch = collate([Trajectory(task_id="t", token_ids=ids, loss_mask=[0] * 5 + [1] * 25)], pad_id=0)
    with torch.no_grad():
        lp, ent = token_logprobs_entropy(model, batch, temperature=0.7, token_chunk=8)
        calls = _marked(monkeypatch)
        lp_m, ent_m = token_logprobs_entropy(model, batch, temperature=0.7, token_chunk=8)
    assert sum(calls) == 29 and len(calls) == 4  # every predicted position, in chunks of 8
    torch.testing.assert_close(ent_m[:, 1:], ent[:, 1:] + MARK_H)
    torch.testing.assert_close(lp_m[:, 1:], lp[:, 1:] - MARK_LSE)  # the log-probs share its logsumexp


def test_openrlhf_actor_forward_takes_entropy_from_the_one_definition(
    monkeypatch, orl_actor_cls, tiny_tokenizer
):
    from swe_rl.policy.tiny import build_tiny_model

    actor = orl_actor_cls(build_tiny_model(tiny_tokenizer, arch="qwen2"), temperature=0.7)
    actor.packing_samples = False
    policy = types.SimpleNamespace(actor=actor, strategy=types.SimpleNamespace(ring_attn_group=None))
    seqs = torch.randint(3, len(tiny_tokenizer), (2, 24), generator=torch.Generator().manual_seed(1))
    attn = torch.ones_like(seqs)
    amask = torch.zeros(2, 23, dtype=torch.bool)
    amask[:, 8:20] = True
    plain = exact_forward(policy, seqs, amask, attn, chunk=5)
    calls = _marked(monkeypatch)
    marked = exact_forward(policy, seqs, amask, attn, chunk=5)
    assert calls, "OpenRLHF's actor forward did not call swe_rl.algo.entropy.entropy_and_logsumexp"
    torch.testing.assert_close(marked.entropy[amask], plain.entropy[amask] + MARK_H)
    torch.testing.assert_close(marked.log_probs, plain.log_probs)  # upstream's log-probs, untouched
