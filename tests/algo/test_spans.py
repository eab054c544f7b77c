import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from swe_rl.algo.spans import broadcast, span_index, span_mean, span_sum


def test_span_ids_hand_example():
    m = torch.tensor([[0, 1, 1, 0, 1, 0], [1, 1, 0, 0, 0, 1], [0, 0, 0, 0, 0, 0]])
    idx = span_index(m)
    assert idx.ids.tolist() == [[-1, 0, 0, -1, 1, -1], [2, 2, -1, -1, -1, 3], [-1] * 6]
    assert idx.traj.tolist() == [0, 0, 1, 1]
    assert idx.turn.tolist() == [0, 1, 0, 1]
    assert idx.length.tolist() == [2, 1, 2, 1]
    v = torch.arange(18.0).view(3, 6)
    assert span_mean(v, idx).tolist() == [1.5, 4.0, 6.5, 11.0]
    out = broadcast(torch.tensor([10.0, 20.0, 30.0, 40.0]), idx, fill=-1.0)
    assert out[0].tolist() == [-1, 10, 10, -1, 20, -1]
    assert out[2].tolist() == [-1] * 6


@settings(max_examples=40, deadline=None)
@given(st.lists(st.lists(st.integers(0, 1), min_size=7, max_size=7), min_size=1, max_size=6), st.data())
def test_span_maps_match_naive(algo_naive_spans, rows, data):
    m = torch.tensor(rows)
    idx = span_index(m)
    ref = algo_naive_spans(m)
    assert idx.num_spans == len(ref)
    assert idx.traj.tolist() == [r[0] for r in ref]
    assert idx.turn.tolist() == [r[1] for r in ref]
    assert idx.length.tolist() == [r[3] - r[2] for r in ref]
    vals = torch.tensor(data.draw(st.lists(st.floats(-5, 5), min_size=m.numel(), max_size=m.numel()))).view(
        m.shape
    )
    sums = span_sum(vals, idx, torch.float64)
    for s, (b, _, a, e) in enumerate(ref):
        assert (idx.ids[b, a:e] == s).all()
        assert abs(sums[s].item() - vals[b, a:e].double().sum().item()) < 1e-9
    assert ((idx.ids >= 0) == (m != 0)).all()
    back = broadcast(span_mean(vals, idx), idx)
    assert (back[m == 0] == 0).all()
    # the no-grad fast path (run-wise fill) and the differentiable path (gather) agree exactly
    sv = torch.randn(idx.num_spans, dtype=torch.float64)
    assert torch.equal(broadcast(sv, idx, fill=-2.0), broadcast(sv.requires_grad_(), idx, fill=-2.0).detach())


def test_float_and_bool_masks_agree():
    m = torch.tensor([[0, 1, 1, 0, 1]])
    assert span_index(m.float()).ids.tolist() == span_index(m.bool()).ids.tolist()


def test_bad_shape_is_one_clear_error():
    import pytest

    with pytest.raises(ValueError, match="loss_mask"):
        span_index(torch.ones(3))


def test_nan_off_span_does_not_leak_and_gradients_flow():
    m = torch.tensor([[0, 1, 1, 0], [1, 0, 0, 1]])
    idx = span_index(m)
    v = torch.tensor(
        [[float("nan"), 1.0, 3.0, float("inf")], [2.0, float("nan"), 0.0, 5.0]], requires_grad=True
    )
    means = span_mean(v, idx)
    assert means.tolist() == [2.0, 2.0, 5.0]
    means.sum().backward()
    assert v.grad.tolist() == [[0.0, 0.5, 0.5, 0.0], [1.0, 0.0, 0.0, 1.0]]
    s = torch.tensor([1.0, 2.0, 3.0], requires_grad=True)
    (broadcast(s, idx) * torch.arange(8.0).view(2, 4)).sum().backward()
    assert s.grad.tolist() == [1.0 + 2.0, 4.0, 7.0]
