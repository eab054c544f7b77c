import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from swe_rl.algo.empg import empg_advantages, next_step_index

ADV = torch.tensor([1.0, 1.0, 1.0, -1.0, -1.0])
H = torch.tensor([0.3, 0.9, 0.4, 1.2, 0.6])
TRAJ = torch.tensor([0, 0, 0, 1, 1])
TURN = torch.tensor([0, 1, 2, 0, 1])
FINAL = [1.0614, 0.4029, 0.8595, -0.8765, -1.4473]


def test_worked_vector_and_order_independence():
    assert empg_advantages(ADV, H, TRAJ, TURN).tolist() == pytest.approx(FINAL, abs=1e-4)
    perm = torch.tensor([3, 0, 4, 2, 1])
    out = empg_advantages(ADV[perm], H[perm], TRAJ[perm], TURN[perm])
    assert out.tolist() == pytest.approx([FINAL[i] for i in perm.tolist()], abs=1e-4)


def test_bonus_only_from_the_next_step_of_the_same_trajectory():
    # zeta = 0 removes the bonus: pure g·A, mean-centred
    no_bonus = empg_advantages(ADV, H, TRAJ, TURN, zeta=0.0)
    with_bonus = empg_advantages(ADV, H, TRAJ, TURN, zeta=0.1)
    diff = (with_bonus - no_bonus).tolist()
    f = [0.5134, 0.8948, 0.0, 0.7165, 0.0]  # exp(−H̃_{t+1}); 0 on each trajectory's last step
    mean_f = sum(f) / 5
    assert diff == pytest.approx([0.1 * (x - mean_f) for x in f], abs=1e-4)
    assert next_step_index(TRAJ, TURN, torch.ones(5, dtype=torch.bool)).tolist() == [1, 2, -1, 4, -1]


def test_invalid_steps_untouched_and_out_of_stats():
    valid = torch.tensor([True, True, True, True, True, False])
    adv = torch.cat([ADV, torch.tensor([0.0])])
    h = torch.cat([H, torch.tensor([50.0])])  # would dominate the batch min–max if it counted
    out = empg_advantages(
        adv, h, torch.cat([TRAJ, torch.tensor([1])]), torch.cat([TURN, torch.tensor([2])]), valid
    )
    assert out[:5].tolist() == pytest.approx(FINAL, abs=1e-4) and out[5].item() == 0.0


@settings(max_examples=40, deadline=None)
@given(
    st.lists(
        st.tuples(st.floats(-2, 2), st.floats(0, 3), st.integers(0, 4), st.booleans()),
        min_size=1,
        max_size=25,
    )
)
def test_zero_mean_over_valid_steps(rows):
    adv = torch.tensor([r[0] for r in rows])
    h = torch.tensor([r[1] for r in rows])
    traj = torch.tensor([r[2] for r in rows])
    turn = torch.arange(len(rows))
    valid = torch.tensor([r[3] for r in rows])
    out = empg_advantages(adv, h, traj, turn, valid)
    if valid.any():
        assert out[valid].double().mean().item() == pytest.approx(0.0, abs=1e-5)
    assert torch.equal(out[~valid], adv[~valid])
