import pytest
import torch

from swe_rl.algo.advantages import rloo
from swe_rl.algo.aem import aem_coefficients
from swe_rl.algo.config import AlgoConfig
from swe_rl.algo.epo import EntropyHistory, batch_token_mean
from swe_rl.algo.pipeline import compute_advantages, compute_policy_loss
from swe_rl.algo.spans import span_index, span_mean
from swe_rl.config import ConfigError, load_config

SUB = ["submitted"] * 8  # every episode submitted (the reward spec's default needs the exit statuses)


def batch(seed=0, b=8, t=40):
    g = torch.Generator().manual_seed(seed)
    mask = (torch.rand(b, t, generator=g) > 0.4).int()
    ent = torch.rand(b, t, generator=g) * 2
    rewards = torch.tensor([1.0, 0.0, 1.0, float("nan"), 1.0, 1.0, 0.0, 1.0])
    groups = torch.tensor([0, 0, 0, 0, 1, 1, 1, 1])
    valid = ~rewards.isnan()
    return rewards, groups, valid, mask, ent


def test_config_from_yaml_and_overrides(tmp_path):
    f = tmp_path / "algo.yaml"
    f.write_text("estimator:\n  name: rloo\nmodulator:\n  kind: aem\n")
    cfg = load_config(
        AlgoConfig, files=[f], overrides=["modulator.aem.lam=0.5", "loss.agg=seq-mean-token-sum"]
    )
    assert (
        cfg.estimator.name == "rloo" and cfg.modulator.aem.lam == 0.5 and cfg.loss.agg == "seq-mean-token-sum"
    )
    with pytest.raises(ConfigError, match="modulator"):
        load_config(AlgoConfig, overrides=["modulator.kind=entropy"])
    with pytest.raises(ConfigError):
        load_config(AlgoConfig, overrides=["epo.kappa_low=3", "epo.kappa_high=2"])
    with pytest.raises(ConfigError, match="gspo_token"):
        load_config(AlgoConfig, overrides=["modulator.kind=aem", "loss.type=gspo"])


def test_plain_broadcast_and_invalid_rows_masked():
    r, g, v, mask, _ent = batch()
    cfg = AlgoConfig()
    res = compute_advantages(cfg, r, g, v, mask, None, SUB)
    assert (res.loss_mask[3] == 0).all() and torch.equal(res.loss_mask[v], mask[v])
    from swe_rl.algo.advantages import grpo

    expected = grpo(r, g, v)[:, None] * res.loss_mask
    assert torch.allclose(res.token_advantages, expected)
    assert res.keep.all() and res.diagnostics["adv/valid_frac"] == pytest.approx(7 / 8)


def test_aem_path_equals_manual_composition_and_filters():
    r, g, v, mask, ent = batch()
    cfg = AlgoConfig.model_validate(
        {"estimator": {"name": "rloo"}, "modulator": {"kind": "aem"}, "compact_filtering": {"enabled": True}}
    )
    reasons = ["submitted"] * 7 + ["context_limit"]
    res = compute_advantages(cfg, r, g, v, mask, ent, reasons)
    assert (res.loss_mask[7] == 0).all() and (res.token_advantages[7] == 0).all()
    # manual: compact-filtered row 7 enters the baseline with reward 0 and leaves the AEM stats (it has no spans)
    r2 = r.clone()
    r2[7] = 0.0
    v2 = v.clone()
    base = rloo(r2, g, v2)
    idx = span_index(res.loss_mask)
    alpha = aem_coefficients(span_mean(ent, idx), idx.group(g))
    ids = idx.ids
    for s in range(idx.num_spans):
        b = int(idx.traj[s])
        assert torch.allclose(res.token_advantages[ids == s], base[b] * alpha[s])
    assert res.diagnostics["aem/alpha_mean"] == pytest.approx(1.0, abs=1e-6)
    with pytest.raises(ValueError, match="exit_reasons"):
        compute_advantages(cfg, r, g, v, mask, ent)
    with pytest.raises(ValueError, match="token_entropy"):
        compute_advantages(cfg, r, g, v, mask, None, reasons)


def test_dynamic_filter_and_empg():
    r, g, v, mask, ent = batch()
    r[4:] = 1.0  # group 1 all solved
    cfg = AlgoConfig.model_validate({"modulator": {"kind": "empg"}, "dynamic_filtering": {"enabled": True}})
    res = compute_advantages(cfg, r, g, v, mask, ent, SUB)
    assert res.keep.tolist() == [True] * 4 + [False] * 4
    kept = res.token_advantages[:4][res.loss_mask[:4] != 0]
    assert kept.abs().sum() > 0


def test_policy_loss_with_kl_entropy_and_epo():
    r, g, v, mask, ent = batch()
    cfg = AlgoConfig.model_validate(
        {"epo": {"enabled": True, "total_steps": 10}, "loss": {"kl_coef": 0.01, "entropy_coef": 0.001}}
    )
    res = compute_advantages(cfg, r, g, v, mask, ent, SUB)
    logp = (torch.randn(8, 40) * 0.1 - 1).requires_grad_(True)
    cur_ent = (ent * 1.5).requires_grad_(True)
    hist = EntropyHistory()
    hist.append(batch_token_mean(ent, res.loss_mask))
    loss, m = compute_policy_loss(
        cfg, logp, logp.detach() + 0.01, res.token_advantages, res.loss_mask,
        ref_logp=logp.detach() - 0.02, token_entropy=cur_ent, epo_history=hist, step=3,
    )  # fmt: skip
    loss.backward()
    assert {"kl_ref", "entropy", "epo/beta", "epo/smooth"} <= set(m)
    assert m["epo/smooth"] > 0  # 1.5× the history mean pushes some tokens over κ_r·H̄_W
    assert (cur_ent.grad[res.loss_mask == 0] == 0).all() and (logp.grad[res.loss_mask == 0] == 0).all()
    with pytest.raises(ValueError, match="ref_logp"):
        compute_policy_loss(cfg, logp, logp, res.token_advantages, res.loss_mask, token_entropy=cur_ent)


@pytest.mark.parametrize("kind", ["none", "aem", "empg"])
@pytest.mark.parametrize("shape", [(3, 5), (1, 1), (0, 4)])
def test_degenerate_batches(kind, shape):
    mask = torch.zeros(shape, dtype=torch.int64) if shape != (1, 1) else torch.ones(shape)
    b = shape[0]
    cfg = AlgoConfig.model_validate({"modulator": {"kind": kind}, "epo": {"enabled": True}})
    ent = torch.rand(shape, requires_grad=True)
    res = compute_advantages(
        cfg, torch.ones(b), torch.zeros(b, dtype=torch.long), torch.ones(b, dtype=torch.bool), mask, ent,
        ["submitted"] * b,
    )  # fmt: skip
    assert res.token_advantages.shape == shape and not res.token_advantages.requires_grad
    logp = torch.randn(shape, requires_grad=True)
    loss, _ = compute_policy_loss(
        cfg,
        logp,
        logp.detach(),
        res.token_advantages,
        res.loss_mask,
        token_entropy=ent,
        epo_history=EntropyHistory([0.3]),
    )
    loss.backward()
    assert torch.isfinite(loss)


def test_group_ids_from_task_ids():
    from swe_rl.algo.pipeline import group_ids_from

    assert group_ids_from(["b", "a", "b", "c", "a"]).tolist() == [0, 1, 0, 2, 1]
    assert group_ids_from([]).tolist() == []
