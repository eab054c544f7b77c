"""The AEM seam on real OpenRLHF Experience objects with synthetic tensors, and with upstream's own estimator.

`fake_base_advantages` is a named fake for RemoteExperienceMaker.compute_advantages_and_returns (a ten-line
group_norm) for the α checks; the valid-member tests run upstream's method verbatim (`orl_estimator`) and
compare with swe_rl.algo's estimators."""

from __future__ import annotations

import math
import types
from functools import partial

import pytest
import torch

from swe_rl.algo.advantages import ESTIMATORS
from swe_rl.train.openrlhf.aem_seam import (
    FILTER_KEY,
    MASKED_KEY,
    VALID_KEY,
    EntropyMissingError,
    advantages_with_seam,
    modulate_experiences,
)
from swe_rl.train.openrlhf.config import AemConfig

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


def _batch(orl_experience, valid=None, filtered=None, seed=0, masked=None):
    g = torch.Generator().manual_seed(seed)
    exps = []
    for masks, index in ((MASKS, [5, 0, 2, 7]), (MASKS2, [1, 3, 4, 6])):
        info = {}
        if valid is not None:
            info[VALID_KEY] = [valid.get(i, 1.0) for i in index]
        if filtered is not None:
            info[FILTER_KEY] = [filtered.get(i, 0.0) for i in index]
        if masked is not None:
            info[MASKED_KEY] = [masked.get(i, 0.0) for i in index]
        exp = orl_experience(masks, index, [REWARDS[i] for i in index], **info)
        ent = torch.rand(exp.action_mask.shape, generator=g) * 3.0 * exp.action_mask
        exp.action_log_probs = -torch.rand(exp.action_mask.shape, generator=g) * exp.action_mask
        exp._ent = ent  # kept for the reference computation below
        exps.append(exp)
    return exps


def _ents(exps):
    """The exact (B, A) entropy per experience, as our policy forward delivers it to the seam."""
    return [e._ent for e in exps]


def _args(n=N, estimator="group_norm"):
    return types.SimpleNamespace(
        rollout=types.SimpleNamespace(n_samples_per_prompt=n), algo=types.SimpleNamespace(estimator=estimator)
    )


def fake_base_advantages(self, experiences):
    """Named fake of the upstream method (see module docstring): group_norm per prompt group."""
    n = self.strategy.args.rollout.n_samples_per_prompt
    seen = {i: float(r) for e in experiences for i, r in zip(e.index, e.rewards, strict=True)}
    r = torch.tensor([seen[i] for i in range(len(seen))]).reshape(-1, n)
    a = ((r - r.mean(-1, keepdim=True)) / (r.std(-1, keepdim=True) + 1e-9)).reshape(-1)
    for e in experiences:
        e.advantages = a[e.index][:, None] * e.action_mask.float()
    return experiences


def _fake_maker(n=N):
    return types.SimpleNamespace(strategy=types.SimpleNamespace(args=_args(n)))


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
    exps = fake_base_advantages(_fake_maker(), _batch(orl_experience))
    base = [e.advantages.clone() for e in exps]
    diag = modulate_experiences(exps, N, AemConfig(), _ents(exps))
    _check_scaled(exps, base, _reference_alpha(exps, {}))
    assert diag["num_spans"] == sum(len(_spans(r)) for r in MASKS + MASKS2)
    assert 0.0 < diag["alpha_min"] < 1.0 < diag["alpha_max"]
    for e in exps:  # per-sample diagnostics: what OpenRLHF's actor logs (sample-weighted) to wandb
        for key in ("aem_alpha_mean", "aem_alpha_min", "aem_alpha_max", "aem_num_spans", "aem_alpha_std"):
            assert e.info[key].shape == (e.action_mask.shape[0],), key


def test_invalid_and_compact_filtered_samples_are_zeroed_and_left_out(orl_experience):
    valid, filtered = {2: 0.0}, {6: 1.0}
    cfg = AemConfig(compact_filter=True)
    exps = _batch(orl_experience, valid=valid, filtered=filtered)
    for e in exps:  # filtered sample 6 has reward 0 already; give it 1 to see the pre-step zero it
        e.rewards = torch.where(torch.tensor(e.index) == 6, torch.ones_like(e.rewards), e.rewards)
    maker = _fake_maker()
    out = advantages_with_seam(
        partial(fake_base_advantages, maker), exps, maker.strategy.args, cfg, _ents(exps)
    )
    # reference base: group_norm over valid members (sample 2 left out) with the filtered reward zeroed first
    r = torch.tensor([0.0 if i == 6 else REWARDS[i] for i in range(8)])
    ref = ESTIMATORS["grpo"](r, torch.arange(8) // N, torch.arange(8) != 2, eps=1e-9)
    base = [ref[e.index][:, None] * e.action_mask.float() for e in out]
    _check_scaled(out, base, _reference_alpha(out, {2: False, 6: False}), zeroed={2, 6})
    zeroed = {i: float(z) for e in out for i, z in zip(e.index, e.info["swe_rl_adv_zeroed"], strict=True)}
    assert zeroed == {i: float(i in (2, 6)) for i in range(8)}


def test_flat_entropy_group_keeps_alpha_one(orl_experience):
    exps = fake_base_advantages(_fake_maker(), _batch(orl_experience))
    flat = [torch.full(e.action_mask.shape, 0.7) * e.action_mask for e in exps]
    base = [e.advantages.clone() for e in exps]
    diag = modulate_experiences(exps, N, AemConfig(), flat)
    for e, b0 in zip(exps, base, strict=True):
        torch.testing.assert_close(e.advantages, b0)
    assert diag["frac_groups_range_rule"] == 1.0


def test_exact_entropy_missing_fails_loudly_and_surprisal_works_without(orl_experience):
    exps = fake_base_advantages(_fake_maker(), _batch(orl_experience))
    with pytest.raises(EntropyMissingError, match="install_swe_rl_classes"):
        modulate_experiences(exps, N, AemConfig(entropy_source="exact"))
    base = [e.advantages.clone() for e in exps]
    for e in exps:  # the reference uses −log π(a) as the token "entropy"
        e._ent = -e.action_log_probs * e.action_mask
    modulate_experiences(exps, N, AemConfig(entropy_source="surprisal"))
    _check_scaled(exps, base, _reference_alpha(exps, {}))


def _upstream_args(orl_parse, estimator):
    return orl_parse(
        ["--actor.model_name_or_path", "m", "--rollout.n_samples_per_prompt", "8", "--algo.kl.init_coef", "0",
         "--algo.advantage.estimator", estimator, "--train.agent_func_path", "/x/agent.py"]
    )  # fmt: skip


def _groups_batch(orl_experience, rewards, valid):
    """16 samples (2 prompts x 8) in micro-batches of 5 / 6 / 5 in shuffled order, each with 2 action spans."""
    order = [3, 12, 0, 9, 15, 6, 1, 14, 8, 2, 11, 5, 13, 7, 10, 4]
    exps, start = [], 0
    for size in (5, 6, 5):
        idx = order[start : start + size]
        masks = [[0, 1, 1, 0, 0, 1, 1, 1] for _ in idx]
        exp = orl_experience(masks, idx, [rewards[i] for i in idx], **{VALID_KEY: [valid[i] for i in idx]})
        exp.kl = torch.zeros(exp.action_mask.shape)  # as make_experience leaves it without a reference model
        exps.append(exp)
        start += size
    return exps


@pytest.mark.parametrize(
    ("estimator", "ours"), [("group_norm", "grpo"), ("rloo", "rloo"), ("dr_grpo", "dr_grpo")]
)
def test_upstream_estimator_with_seam_matches_swe_rl_algo(
    orl_experience, orl_estimator, orl_parse, estimator, ours
):
    # prompt 0: 7 solved + 1 sandbox failure; prompt 1: mixed, with one failure and a filtered-looking 0
    rewards = [1.0] * 7 + [0.0] + [1.0, 0.0, 1.0, 0.0, 0.0, 1.0, 0.0, 1.0]
    valid = [1.0] * 7 + [0.0] + [1.0] * 6 + [0.0, 1.0]
    args = _upstream_args(orl_parse, estimator)
    maker = orl_estimator(args)
    exps = _groups_batch(orl_experience, rewards, valid)
    out = advantages_with_seam(maker.compute_advantages_and_returns, exps, args, AemConfig(enabled=False))
    want = ESTIMATORS[ours](torch.tensor(rewards), torch.arange(16) // 8, torch.tensor(valid) > 0, eps=1e-9)
    for e in out:
        got = e.advantages * e.action_mask  # upstream's returns also fill masked positions before an action
        torch.testing.assert_close(got, want[e.index][:, None] * e.action_mask, rtol=1e-6, atol=1e-6)
    if estimator == "group_norm":  # the example: without the fix each solved episode got +0.354
        assert all(
            float(e.advantages[b].abs().max()) == 0 for e in out for b, i in enumerate(e.index) if i < 8
        )


def test_all_valid_batch_takes_upstreams_call_unchanged(orl_experience, orl_estimator, orl_parse):
    args = _upstream_args(orl_parse, "group_norm")
    rewards = [1.0, 0.0] * 8
    plain = orl_estimator(args).compute_advantages_and_returns(
        _groups_batch(orl_experience, rewards, [1.0] * 16)
    )
    seam = advantages_with_seam(
        orl_estimator(args).compute_advantages_and_returns,
        _groups_batch(orl_experience, rewards, [1.0] * 16),
        args,
        AemConfig(enabled=False),
    )
    for a, b in zip(plain, seam, strict=True):
        torch.testing.assert_close(a.advantages, b.advantages)
        torch.testing.assert_close(a.info["group_reward_std"], b.info["group_reward_std"])


def test_dynamic_filter_sees_the_valid_mean():
    from swe_rl.train.openrlhf.valid_groups import impute_invalid_scores

    def resp(score, ok):
        return {"scores": score, "reward": score, "extra_logs": {VALID_KEY: float(ok)}}

    solved = impute_invalid_scores([resp(1.0, True)] * 7 + [resp(0.0, False)], floor=0.0)
    assert [r["scores"] for r in solved] == [1.0] * 8 and solved[7]["reward"] == 0.0
    mixed = impute_invalid_scores([resp(1.0, True), resp(0.0, True), resp(0.0, False)], floor=0.0)
    assert [r["scores"] for r in mixed] == [1.0, 0.0, 0.5]
    broken = impute_invalid_scores([resp(0.0, False)] * 2, floor=0.0)
    assert [r["scores"] for r in broken] == [0.0, 0.0]  # the range floor: upstream's filter rejects the group


def test_reward_spec_masked_samples_stay_in_the_baseline_with_zero_advantage(orl_experience):
    """unsubmitted: mask — the executor sends reward 0 and swe_rl_masked = 1: the sample counts as a 0 in its
    group's baseline (unlike an infra failure) but gets no gradient, with or without compact filtering."""
    exps = _batch(orl_experience, masked={3: 1.0})
    maker = _fake_maker()
    out = advantages_with_seam(
        partial(fake_base_advantages, maker), exps, maker.strategy.args, AemConfig(), _ents(exps)
    )
    r = torch.tensor([REWARDS[i] for i in range(8)])
    ref = ESTIMATORS["grpo"](r, torch.arange(8) // N, torch.ones(8, dtype=torch.bool), eps=1e-9)
    base = [ref[e.index][:, None] * e.action_mask.float() for e in out]
    _check_scaled(out, base, _reference_alpha(out, {3: False}), zeroed={3})


def test_dropped_samples_keep_one_token_so_no_micro_batch_is_empty(orl_experience):
    # After a lost node every sample of a micro-batch can be an infrastructure failure; upstream's ppo_train divides
    # the micro-batch's metrics by its action-token count (ZeroDivisionError in make rehearsal-cluster).
    from openrlhf.utils.loss_utils import _optimizer_step_loss_norm

    valid = {i: 0.0 for i in range(4)}  # samples 0-3 lost
    exps = _batch(orl_experience, valid=valid)
    before = {i: e.action_mask[b].clone() for e in exps for b, i in enumerate(e.index)}
    maker = _fake_maker()
    out = advantages_with_seam(
        partial(fake_base_advantages, maker), exps, maker.strategy.args, AemConfig(), _ents(exps)
    )
    for e in out:
        for b, i in enumerate(e.index):
            m = e.action_mask[b]
            if i in valid:
                last = int(before[i].nonzero().max())
                assert m.nonzero().view(-1).tolist() == [last], (i, m)
                assert torch.all(e.advantages[b] == 0)
            else:
                assert torch.equal(m, before[i])
    lost = [e.action_mask[b : b + 1] for e in out for b, i in enumerate(e.index) if i in valid]
    norm = _optimizer_step_loss_norm(lost, None, 1, 1)  # upstream's divisor for a step of lost samples only
    assert float(norm["batch_num_tokens"]) == len(lost) and float(norm["global_batch_size"]) == len(lost)
