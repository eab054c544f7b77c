import math

import pytest
import torch

from swe_rl.algo.losses import AGG_MODES, LOSS_TYPES, agg_loss, kl_penalty, policy_loss, ppo_token_loss


def test_ppo_clip_asymmetric_and_dual_clip_hand_values():
    ratios = torch.tensor([[0.5, 0.9, 1.1, 1.5, 0.5, 1.5, 10.0]])
    adv = torch.tensor([[1.0, 1.0, 1.0, 1.0, -1.0, -1.0, -1.0]])
    logp = ratios.log()
    loss, _, clipped = ppo_token_loss(
        logp, torch.zeros_like(logp), adv, clip_low=0.2, clip_high=0.28, dual_clip=None
    )
    # A>0: −min(ρ, clip(ρ)); A<0: max(ρ, clip(ρ)) with clip range [0.8, 1.28]
    assert loss[0].tolist() == pytest.approx([-0.5, -0.9, -1.1, -1.28, 0.8, 1.5, 10.0], abs=1e-5)
    assert clipped[0].tolist() == [False, False, False, True, True, False, False]
    dual, _, _ = ppo_token_loss(
        logp, torch.zeros_like(logp), adv, clip_low=0.2, clip_high=0.28, dual_clip=3.0
    )
    assert dual[0, -1].item() == pytest.approx(3.0)  # capped at −c·A
    assert dual[0, :-1].tolist() == pytest.approx(loss[0, :-1].tolist())
    with pytest.raises(ValueError, match="dual_clip"):
        ppo_token_loss(logp, logp, adv, clip_low=0.2, clip_high=0.2, dual_clip=0.5)


def test_aggregation_modes_and_fully_masked_sequences():
    loss = torch.tensor([[1.0, 2.0, 3.0, 4.0], [10.0, 20.0, 30.0, 40.0], [7.0, 7.0, 7.0, 7.0]])
    mask = torch.tensor([[1, 1, 0, 0], [1, 1, 1, 1], [0, 0, 0, 0]])
    assert agg_loss(loss, mask, "token-mean").item() == pytest.approx((3 + 100) / 6)
    assert agg_loss(loss, mask, "seq-mean-token-mean").item() == pytest.approx((1.5 + 25) / 2)
    assert agg_loss(loss, mask, "seq-mean-token-sum").item() == pytest.approx((3 + 100) / 2)
    assert agg_loss(loss, mask, "seq-mean-token-sum-norm").item() == pytest.approx(103 / 4)
    assert agg_loss(loss, mask, "seq-mean-token-sum-norm", norm_const=100.0).item() == pytest.approx(1.03)
    assert agg_loss(loss, mask, "token-mean", global_count=12).item() == pytest.approx(103 / 12)
    assert agg_loss(loss, torch.zeros_like(mask), "seq-mean-token-mean").item() == 0.0
    with pytest.raises(ValueError, match="agg mode"):
        agg_loss(loss, mask, "sum")


@pytest.mark.parametrize("loss_type", LOSS_TYPES)
@pytest.mark.parametrize("agg", AGG_MODES)
def test_masked_tokens_get_zero_gradient(loss_type, agg):
    torch.manual_seed(0)
    mask = torch.tensor([[0, 1, 1, 0, 1, 0], [0, 0, 0, 0, 0, 0], [1, 1, 1, 1, 1, 1]])
    logp = torch.randn(3, 6).clamp(max=-0.1)
    logp[mask == 0] = 1e4  # garbage on non-policy tokens (e.g. observation/padding)
    logp.requires_grad_(True)
    old = torch.randn(3, 6).clamp(max=-0.1)
    adv = torch.randn(3, 6)
    loss, metrics = policy_loss(loss_type, logp, old, adv, mask, agg=agg, dual_clip=3.0)
    loss.backward()
    assert torch.isfinite(loss) and math.isfinite(metrics["clipfrac"])
    assert (logp.grad[mask == 0] == 0).all()
    assert (logp.grad[mask == 1] != 0).any()


def test_gspo_sequence_ratio_and_token_form():
    torch.manual_seed(1)
    mask = torch.tensor([[1, 1, 1, 0], [1, 1, 0, 0]])
    old = torch.randn(2, 4)
    logp = (old + 0.05 * torch.randn(2, 4)).requires_grad_(True)
    adv = torch.tensor([[0.7, 0.7, 0.7, 0.7], [-1.2, -1.2, -1.2, -1.2]])
    seq, m_seq = policy_loss(
        "gspo", logp, old, adv, mask, clip_low=0.5, clip_high=0.5, agg="seq-mean-token-mean"
    )
    s = [math.exp(((logp - old) * mask)[i].sum().item() / mask[i].sum().item()) for i in range(2)]
    assert seq.item() == pytest.approx((-0.7 * s[0] + 1.2 * s[1]) / 2, abs=1e-5)
    assert m_seq["ratio_mean"] == pytest.approx((3 * s[0] + 2 * s[1]) / 5, abs=1e-5)
    (g_seq,) = torch.autograd.grad(seq, logp)
    tok, _ = policy_loss(
        "gspo_token", logp, old, adv, mask, clip_low=0.5, clip_high=0.5, agg="seq-mean-token-mean"
    )
    (g_tok,) = torch.autograd.grad(tok, logp)
    # with a constant advantage per sequence the token form has the same value and gradient
    assert tok.item() == pytest.approx(seq.item(), abs=1e-6)
    assert torch.allclose(g_seq, g_tok, atol=1e-6)


def test_kl_estimators():
    logp = torch.tensor([[-1.0, -2.0]])
    ref = torch.tensor([[-1.5, -2.0]])
    assert kl_penalty(logp, ref, "k1").tolist() == [[0.5, 0.0]]
    d = -0.5
    assert kl_penalty(logp, ref, "k3")[0].tolist() == pytest.approx([math.exp(d) - d - 1, 0.0])
    with pytest.raises(ValueError, match="kl estimator"):
        kl_penalty(logp, ref, "k2")
