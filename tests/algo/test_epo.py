import pytest
import torch

from swe_rl.algo.entropy import token_entropy_from_hidden
from swe_rl.algo.epo import (
    EntropyHistory,
    batch_token_mean,
    beta_k,
    epo_penalty,
    epo_regularizer,
    turn_traj_mean,
)
from swe_rl.algo.spans import span_index


def test_beta_k_values():
    assert beta_k(0, 150, 3.0) == pytest.approx(2.000, abs=5e-4)
    assert beta_k(25, 150, 3.0) == pytest.approx(1.368, abs=5e-4)
    assert beta_k(75, 150, 3.0) == pytest.approx(1.050, abs=5e-4)
    assert beta_k(150, 150, 3.0) == pytest.approx(1.0025, abs=5e-5)
    with pytest.raises(ValueError, match="total_steps"):
        beta_k(0, 1)


def test_penalty_worked_values():
    h = torch.tensor([0.2, 0.9, 1.3])
    assert epo_penalty(h, 0.5, 0.0, 2.0).tolist() == pytest.approx([0.0, 0.0, 0.3])
    assert epo_penalty(h, 0.5, 0.5, 1.5).tolist() == pytest.approx([0.05, 0.15, 0.55])


def test_turn_then_trajectory_then_batch_averaging():
    mask = torch.tensor([[1, 1, 0, 1, 0], [0, 1, 1, 1, 1], [0, 0, 0, 0, 0]])
    vals = torch.tensor([[1.0, 3.0, 99.0, 4.0, 99.0], [99.0, 2.0, 2.0, 2.0, 2.0], [5.0] * 5])
    # row 0: turns 2 and 4 → 3; row 1: one turn of 2 → 2; row 2 has no turn and is left out → (3 + 2)/2
    assert turn_traj_mean(vals, span_index(mask)).item() == pytest.approx(2.5)


def test_smoothing_gradient_nonzero_outside_corridor_only():
    torch.manual_seed(0)
    weight = torch.nn.Parameter(torch.randn(64, 8))  # a real lm_head; entropy from hidden states, chunked
    hidden = torch.randn(2, 6, 8)
    mask = torch.tensor([[0, 1, 1, 0, 1, 1], [1, 1, 1, 0, 0, 1]])
    idx = span_index(mask)
    h = token_entropy_from_hidden(hidden, weight, chunk_size=4)
    mean_h = h[mask.bool()].mean().item()
    penalty = epo_penalty(h, 0.3 * mean_h, 0.0, 2.0)  # reference far below: tokens leave the corridor
    assert (penalty[mask.bool()] > 0).any()
    (grad,) = torch.autograd.grad(turn_traj_mean(penalty, idx), weight)
    assert grad.abs().sum() > 0
    inside = epo_penalty(token_entropy_from_hidden(hidden, weight), 10 * mean_h, 0.0, 2.0)
    (grad_in,) = torch.autograd.grad(turn_traj_mean(inside, idx), weight)
    assert grad_in.abs().sum() == 0


def test_regularizer_assembly():
    mask = torch.tensor([[1, 1, 0, 1]])
    idx = span_index(mask)
    h = torch.tensor([[0.2, 1.3, 0.0, 0.9]], requires_grad=True)
    reg0, m0 = epo_regularizer(h, idx, None, step=0, total_steps=150)
    l_h = ((0.2 + 1.3) / 2 + 0.9) / 2
    assert reg0.item() == pytest.approx(-1e-3 * l_h) and m0["smooth"] == 0.0
    reg, m = epo_regularizer(h, idx, 0.5, step=75, total_steps=150, alpha=0.1)
    l_smooth = 0.1 * ((0.0 + 0.3) / 2 + 0.0) / 2
    assert m["smooth"] == pytest.approx(l_smooth)
    assert reg.item() == pytest.approx(-1e-3 * (l_h - beta_k(75, 150) * l_smooth))
    reg.backward()
    assert h.grad is not None and h.grad[0, 2] == 0  # off-span token


def test_history_checkpoint_round_trip():
    hist = EntropyHistory()
    assert hist.reference() is None
    for v in (0.6, 0.4, 0.8):
        hist.append(v)
    assert hist.reference() == pytest.approx(0.6)
    restored = EntropyHistory()
    restored.load_state_dict(hist.state_dict())
    assert restored.values == hist.values and restored.reference() == hist.reference()
    with pytest.raises(ValueError, match="epo history"):
        restored.load_state_dict({"values": "x"})
    with pytest.raises(ValueError, match="finite"):
        hist.append(float("nan"))
    ent = torch.tensor([[1.0, 2.0, 30.0]])
    assert batch_token_mean(ent, torch.tensor([[1, 1, 0]])) == pytest.approx(1.5)
