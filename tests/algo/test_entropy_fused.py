"""The fused exact entropy (swe_rl.algo.entropy.token_logprobs_and_entropy: log-probs and entropy from one
logsumexp, fp32 per chunk of tokens) against what the built-in trainer computed before it (2026-12-06: a full
log_softmax per row chunk, then -(p * log p).sum), in fp32 on the CPU to 1e-5, values and gradients.
tests/gpu/test_gpu.py runs the same comparison on CUDA; tests/openrlhf/test_entropy_routing.py checks that both
trainers take their entropy from the one definition."""

from __future__ import annotations

import copy

import pytest
import torch

from swe_rl.agent.trajectory import Trajectory
from swe_rl.algo.entropy import entropy_and_logsumexp, token_logprobs_and_entropy
from swe_rl.train.batch import collate, token_logprobs_entropy


def todays_token_logprobs_entropy(model, batch, *, chunk=16, with_entropy=True, temperature=1.0):
    """swe_rl/train/batch.py's token_logprobs_entropy as it was before the fused entropy (the reference)."""
    hidden = model.get_decoder()(
        input_ids=batch.input_ids, attention_mask=batch.attention_mask
    ).last_hidden_state
    head = model.get_output_embeddings()
    lps, ents = [], []
    for s in range(0, batch.input_ids.shape[0], chunk):
        logits = head(hidden[s : s + chunk, :-1]).float() / temperature
        logp_all = torch.log_softmax(logits, dim=-1)
        lp = logp_all.gather(-1, batch.input_ids[s : s + chunk, 1:].unsqueeze(-1)).squeeze(-1)
        lps.append(torch.nn.functional.pad(lp, (1, 0)))
        if with_entropy:
            ents.append(torch.nn.functional.pad(-(logp_all.exp() * logp_all).sum(-1), (1, 0)))
    return torch.cat(lps), (torch.cat(ents) if with_entropy else None)


def _batch(tokenizer, n=3):
    g = torch.Generator().manual_seed(0)
    trajs = []
    for i in range(n):
        length = 20 + 7 * i
        ids = torch.randint(3, len(tokenizer), (length,), generator=g).tolist()
        mask = [0] * 6 + [1] * (length - 6)
        trajs.append(Trajectory(task_id=f"t{i}", sample_idx=0, token_ids=ids, loss_mask=mask, logprobs=[]))
    return collate(trajs, pad_id=0)


@pytest.mark.parametrize("temperature", [1.0, 0.7])
def test_builtin_trainer_equals_todays_values_and_gradients(tiny_tokenizer, tiny_model, temperature):
    model = copy.deepcopy(tiny_model).float().eval()  # the session's model stays as other tests left it
    batch = _batch(tiny_tokenizer)
    w = torch.randn(batch.input_ids.shape, generator=torch.Generator().manual_seed(1))
    results = []
    for fn in (token_logprobs_entropy, todays_token_logprobs_entropy):
        model.zero_grad(set_to_none=True)
        with torch.no_grad():
            old = fn(model, batch, chunk=2, temperature=temperature)
        lp, ent = fn(model, batch, chunk=2, temperature=temperature)
        ((lp * w).sum() + (ent * w.flip(0)).sum()).backward()
        grads = [p.grad.clone() for p in model.parameters() if p.grad is not None]
        results.append((old, lp.detach(), ent.detach(), grads))
    (old_new, lp_new, ent_new, g_new), (old_ref, lp_ref, ent_ref, g_ref) = results
    for a, b in ((old_new[0], old_ref[0]), (old_new[1], old_ref[1]), (lp_new, lp_ref), (ent_new, ent_ref)):
        assert a.dtype == torch.float32 and a.shape == batch.input_ids.shape
        torch.testing.assert_close(a, b, rtol=0, atol=1e-5)
    assert len(g_new) == len(g_ref) > 0
    for a, b in zip(g_new, g_ref, strict=True):
        torch.testing.assert_close(a, b, rtol=1e-4, atol=1e-5)


def test_without_entropy_gives_the_same_logprobs_and_no_entropy(tiny_tokenizer, tiny_model):
    batch = _batch(tiny_tokenizer)
    with torch.no_grad():
        lp, ent = token_logprobs_entropy(tiny_model, batch, chunk=2, with_entropy=False, token_chunk=5)
        ref, _ = todays_token_logprobs_entropy(tiny_model, batch, chunk=2, with_entropy=False)
    assert ent is None
    torch.testing.assert_close(lp, ref, rtol=0, atol=1e-5)


@pytest.mark.parametrize("chunk", [1, 7, 4096])
def test_fused_logprobs_and_entropy_from_bf16_and_masked_logits(chunk):
    g = torch.Generator().manual_seed(2)
    logits = (torch.randn(2, 19, 300, generator=g) * 5).bfloat16()
    logits[0, 3, 10:200] = float("-inf")  # a masked vocabulary slice: p = 0, no NaN
    targets = torch.randint(0, 10, (2, 19), generator=g)
    lp, h = token_logprobs_and_entropy(logits, targets, chunk_size=chunk, temperature=0.6)
    ref = torch.log_softmax(logits.double() / 0.6, -1)
    assert (lp.double() - ref.gather(-1, targets[..., None]).squeeze(-1)).abs().max() < 1e-5
    assert (h.double() - (-(ref.exp() * ref.nan_to_num(neginf=0.0)).sum(-1))).abs().max() < 1e-5
    assert bool(torch.isfinite(h).all())


def test_gradient_of_masked_logits_is_zero_and_finite():
    logits = (torch.randn(4, 50) * 3).masked_fill(torch.arange(50) > 40, float("-inf")).requires_grad_(True)
    lp, h = token_logprobs_and_entropy(logits, torch.tensor([0, 1, 2, 3]), chunk_size=3)
    (lp.sum() + 2.5 * h.sum()).backward()
    assert bool(torch.isfinite(logits.grad).all()) and bool((logits.grad[:, 41:] == 0).all())


def test_kernel_returns_entropy_and_logsumexp_and_leaves_its_input_alone():
    x = torch.randn(6, 77) * 4
    before = x.clone()
    h, lse = entropy_and_logsumexp(x, temperature=0.5)
    torch.testing.assert_close(lse, torch.logsumexp(x / 0.5, -1))
    torch.testing.assert_close(h.double(), torch.distributions.Categorical(logits=x.double() / 0.5).entropy(),
                               rtol=0, atol=1e-5)  # fmt: skip
    assert torch.equal(x, before)


def test_bad_targets_shape_names_the_argument():
    with pytest.raises(ValueError, match="targets: expected shape"):
        token_logprobs_and_entropy(torch.randn(2, 3, 5), torch.zeros(2, 4, dtype=torch.long))


def test_bf16_autocast_leaves_the_entropy_in_fp32():
    """The trainer runs its forwards under bf16 autocast (optim.amp): the kernel's reductions must stay fp32
    (torch.linalg.vecdot, for one, autocasts to bf16)."""
    g = torch.Generator().manual_seed(3)
    logits = torch.randn(64, 3000, generator=g) * 4
    targets = torch.randint(0, 3000, (64,), generator=g)
    want = token_logprobs_and_entropy(logits, targets, chunk_size=16)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        got = token_logprobs_and_entropy(logits, targets, chunk_size=16)
    for a, b in zip(got, want, strict=True):
        assert a.dtype == torch.float32
        torch.testing.assert_close(a, b, rtol=0, atol=1e-5)


def test_at_qwens_vocabulary_the_fused_entropy_is_within_1e_5_of_float64():
    """151,936 logits at T = 0.6: the fused fp32 kernel stays within 1e-5 of float64 (the former formula is itself
    ~2e-5 off here: summing p * log p over the whole row in fp32)."""
    g = torch.Generator().manual_seed(4)
    logits = torch.randn(16, 151936, generator=g) * 4
    targets = torch.randint(0, 151936, (16,), generator=g)
    lp, h = token_logprobs_and_entropy(logits, targets, temperature=0.6)
    ref = torch.log_softmax(logits.double() / 0.6, -1)
    assert (h.double() - (-(ref.exp() * ref).sum(-1))).abs().max() < 1e-5
    assert ((lp.double() - ref.gather(-1, targets[:, None]).squeeze(-1)).abs() / ref.abs().max()).max() < 1e-6
