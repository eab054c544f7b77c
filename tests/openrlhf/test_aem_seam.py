"""The AEM seam on real OpenRLHF Experience objects with synthetic tensors.

`fake_base_advantages` is a named fake for RemoteExperienceMaker.compute_advantages_and_returns, whose module
imports vLLM/flash-attn/DeepSpeed and cannot load here: like group_norm it writes one advantage per sample on
its action tokens, and it records the rewards it saw (to check compact filtering runs before it)."""

from __future__ import annotations

import math
import types

import pytest
import torch

from swe_rl.train.openrlhf.aem_seam import (
    ENTROPY_ATTR,
    FILTER_KEY,
    VALID_KEY,
    EntropyMissingError,
    modulate_experiences,
    wrap_compute_advantages,
)
from swe_rl.train.openrlhf.config import AemConfig
from swe_rl.train.openrlhf.patch import install_chunked_entropy, patch_experience_maker

N = 4  # samples per prompt
# Two prompts x 4 samples, split over two micro-batch experiences in shuffled prompt order (as OpenRLHF does).
MASKS = [
    [0, 1, 1, 0, 1, 1, 1, 0],  # index 5: spans (1,2) (4..6)
    [1, 1, 0, 0, 1, 0, 0, 0],  # index 0
    [0, 0, 1, 1, 1, 0, 1, 1],  # index 2
    [1, 0, 1, 0, 1, 0, 1, 0],  # index 7
]
MASKS2 = [
    [1, 1, 1, 0, 0, 1, 1, 0, 0, 0],  # index 1
    [0, 1, 1, 1, 1, 0, 0, 0, 1, 1],  # index 3
    [1, 1, 0, 1, 1, 0, 1, 1, 0, 0],  # index 4
    [0, 0, 1, 1, 1, 1, 1, 1, 1, 0],  # index 6
]
REWARDS = {0: 1.0, 1: 0.0, 2: 1.0, 3: 0.0, 4: 1.0, 5: 1.0, 6: 0.0, 7: 0.0}


def _spans(row: list[int]) -> list[tuple[int, int]]:
    out, start = [], None
    for i, m in enumerate([*row, 0]):
        if m and start is None:
            start = i
        elif not m and start is not None:
            out.append((start, i))
            start = None
    return out


def _batch(orl_experience, valid=None, filtered=None, exact=True, seed=0):
    g = torch.Generator().manual_seed(seed)
    exps = []
    for masks, index in ((MASKS, [5, 0, 2, 7]), (MASKS2, [1, 3, 4, 6])):
        info = {}
        if valid is not None:
            info[VALID_KEY] = [valid.get(i, 1.0) for i in index]
        if filtered is not None:
            info[FILTER_KEY] = [filtered.get(i, 0.0) for i in index]
        exp = orl_experience(masks, index, [REWARDS[i] for i in index], **info)
        ent = torch.rand(exp.action_mask.shape, generator=g) * 3.0 * exp.action_mask
        exp.action_log_probs = -torch.rand(exp.action_mask.shape, generator=g) * exp.action_mask
        if exact:
            setattr(exp.action_log_probs, ENTROPY_ATTR, ent)
        exp._ent = ent  # kept for the reference computation below
        exps.append(exp)
    return exps


def fake_base_advantages(self, experiences):
    """Named fake of the upstream method (see module docstring): group_norm per prompt group."""
    self.seen_rewards = {i: float(r) for e in experiences for i, r in zip(e.index, e.rewards, strict=True)}
    r = torch.tensor([self.seen_rewards[i] for i in range(len(self.seen_rewards))]).reshape(-1, N)
    a = ((r - r.mean(-1, keepdim=True)) / (r.std(-1, keepdim=True) + 1e-9)).reshape(-1)
    for e in experiences:
        e.advantages = a[e.index][:, None] * e.action_mask.float()
    return experiences


def _reference_alpha(exps, keep, lam=1.0, min_range=0.1):
    """Independent per-group α: {(index, span_start): α} from plain Python over the span mean entropies."""
    spans = {}
    for e in exps:
        for b, i in enumerate(e.index):
            if keep.get(i, True):
                for s, t in _spans(e.action_mask[b].int().tolist()):
                    spans[(i, s)] = float(e._ent[b, s:t].mean())
    alpha = {}
    for grp in {i // N for i, _ in spans}:
        members = {k: h for k, h in spans.items() if k[0] // N == grp}
        lo, hi = min(members.values()), max(members.values())
        if hi - lo < min_range:
            alpha |= dict.fromkeys(members, 1.0)
            continue
        w = {k: math.exp(-lam * (h - lo) / (hi - lo)) for k, h in members.items()}
        mean_w = sum(w.values()) / len(w)
        alpha |= {k: v / mean_w for k, v in w.items()}
    return alpha


def _check_scaled(exps, base, alpha, zeroed=()):
    for e, b0 in zip(exps, base, strict=True):
        for b, i in enumerate(e.index):
            if i in zeroed:
                assert torch.all(e.advantages[b] == 0), f"sample {i}: expected zero advantage"
                continue
            for s, t in _spans(e.action_mask[b].int().tolist()):
                want = b0[b, s:t] * alpha[(i, s)]
                torch.testing.assert_close(e.advantages[b, s:t], want, rtol=1e-5, atol=1e-6)
            assert torch.all(e.advantages[b][~e.action_mask[b]] == 0)


def test_alpha_applied_per_span_with_group_statistics(orl_experience):
    exps = fake_base_advantages(types.SimpleNamespace(), _batch(orl_experience))
    base = [e.advantages.clone() for e in exps]
    diag = modulate_experiences(exps, N, AemConfig())
    _check_scaled(exps, base, _reference_alpha(exps, {}))
    assert diag["num_spans"] == sum(len(_spans(r)) for r in MASKS + MASKS2)
    assert 0.0 < diag["alpha_min"] < 1.0 < diag["alpha_max"]
    for e in exps:  # per-sample diagnostics: what OpenRLHF's actor logs (sample-weighted) to wandb
        for key in ("aem_alpha_mean", "aem_alpha_min", "aem_alpha_max", "aem_num_spans", "aem_alpha_std"):
            assert e.info[key].shape == (e.action_mask.shape[0],), key
        assert not hasattr(e.action_log_probs, ENTROPY_ATTR), (
            "entropy must not travel on to the trainer ranks"
        )


def test_invalid_and_compact_filtered_samples_are_zeroed_and_left_out(orl_experience):
    valid, filtered = {2: 0.0}, {6: 1.0}
    cfg = AemConfig(compact_filter=True)
    maker = types.SimpleNamespace(
        strategy=types.SimpleNamespace(
            args=types.SimpleNamespace(rollout=types.SimpleNamespace(n_samples_per_prompt=N))
        )
    )
    wrapped = wrap_compute_advantages(fake_base_advantages, cfg)
    exps = _batch(orl_experience, valid=valid, filtered=filtered)
    for e in exps:  # filtered sample 6 has reward 0 already; give it 1 to see the pre-step zero it
        e.rewards = torch.where(torch.tensor(e.index) == 6, torch.ones_like(e.rewards), e.rewards)
    base = [e.advantages for e in fake_base_advantages(types.SimpleNamespace(), _batch(orl_experience))]
    out = wrapped(maker, exps)
    assert maker.seen_rewards[6] == 0.0, "compact filtering must zero the reward before the base estimator"
    _check_scaled(out, base, _reference_alpha(out, {2: False, 6: False}), zeroed={2, 6})
    zeroed = {i: float(z) for e in out for i, z in zip(e.index, e.info["swe_rl_adv_zeroed"], strict=True)}
    assert zeroed == {i: float(i in (2, 6)) for i in range(8)}


def test_flat_entropy_group_keeps_alpha_one(orl_experience):
    exps = fake_base_advantages(types.SimpleNamespace(), _batch(orl_experience))
    for e in exps:
        flat = torch.full(e.action_mask.shape, 0.7) * e.action_mask
        setattr(e.action_log_probs, ENTROPY_ATTR, flat)
    base = [e.advantages.clone() for e in exps]
    diag = modulate_experiences(exps, N, AemConfig())
    for e, b0 in zip(exps, base, strict=True):
        torch.testing.assert_close(e.advantages, b0)
    assert diag["frac_groups_range_rule"] == 1.0


def test_exact_entropy_missing_fails_loudly_and_surprisal_works_without(orl_experience):
    exps = fake_base_advantages(types.SimpleNamespace(), _batch(orl_experience, exact=False))
    with pytest.raises(EntropyMissingError, match="RAY_ENABLE_ZERO_COPY_TORCH_TENSORS"):
        modulate_experiences(exps, N, AemConfig(entropy_source="exact"))
    base = [e.advantages.clone() for e in exps]
    for e in exps:  # the reference uses −log π(a) as the token "entropy"
        e._ent = -e.action_log_probs * e.action_mask
    modulate_experiences(exps, N, AemConfig(entropy_source="surprisal"))
    _check_scaled(exps, base, _reference_alpha(exps, {}))


def test_patch_is_idempotent_on_a_class():
    class FakeExperienceMaker:  # named fake: the upstream class cannot be imported on CPU
        compute_advantages_and_returns = fake_base_advantages

    patch_experience_maker(FakeExperienceMaker, AemConfig())
    first = FakeExperienceMaker.compute_advantages_and_returns
    patch_experience_maker(FakeExperienceMaker, AemConfig())
    assert FakeExperienceMaker.compute_advantages_and_returns is first
    assert first.__wrapped__ is fake_base_advantages


def test_chunked_entropy_swap_in_a_module():
    def upstream_compute_entropy(logits):  # verbatim body of openrlhf.models.utils.compute_entropy
        pd = torch.nn.functional.softmax(logits, dim=-1)
        return torch.logsumexp(logits, dim=-1) - torch.sum(pd * logits, dim=-1)

    mod = types.ModuleType("fake_openrlhf_models_actor")
    mod.compute_entropy = upstream_compute_entropy
    install_chunked_entropy(vars(mod), chunk_size=3)
    assert mod.compute_entropy is not upstream_compute_entropy
    logits = torch.randn(2, 7, 50) * 4
    torch.testing.assert_close(
        mod.compute_entropy(logits), upstream_compute_entropy(logits), rtol=1e-5, atol=1e-5
    )
    swapped = mod.compute_entropy
    install_chunked_entropy(vars(mod), chunk_size=3)
    assert mod.compute_entropy is swapped
