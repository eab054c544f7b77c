"""AEM's span choice (issue 26): `entropy_span: response | action`. A turn with long free-form reasoning before a
short action gets a different α under the two spans; a turn without reasoning (all action) gets the same α."""

import pytest
import torch

from swe_rl.agent.trajectory import action_token_mask
from swe_rl.algo.config import AlgoConfig
from swe_rl.algo.pipeline import compute_advantages
from swe_rl.algo.spans import span_index, subspan_mean


def _cfg(span: str) -> AlgoConfig:
    return AlgoConfig.model_validate(
        {"modulator": {"kind": "aem", "aem": {"entropy_span": span}}, "reward": {"unsubmitted": "grade"}}
    )


def _batch(reasoning: bool) -> tuple[torch.Tensor, ...]:
    """4 rows of one group, one 6-token turn each after a 2-token prompt. With reasoning, the first 5 tokens of a
    turn are reasoning and only the last is the action; the reasoning entropy falls with the row, the action's
    rises, so the two spans order the rows oppositely. Without reasoning the whole turn is its action."""
    b, t = 4, 8
    mask = torch.zeros(b, t)
    mask[:, 2:] = 1
    ent = torch.zeros(b, t)
    starts = []
    for i in range(b):
        ent[i, 2:7] = 2.0 - 0.4 * i  # reasoning: 2.0, 1.6, 1.2, 0.8
        ent[i, 7] = 0.1 + 0.3 * i  # the decision: 0.1, 0.4, 0.7, 1.0
        starts.append([7] if reasoning else [])
    act = torch.tensor(
        [action_token_mask(mask[i].int().tolist(), starts[i]) for i in range(b)], dtype=torch.float32
    )
    return torch.tensor([1.0, 0.0, 1.0, 0.0]), torch.zeros(b, dtype=torch.long), mask, ent, act


def _alpha(span: str, reasoning: bool) -> torch.Tensor:
    rewards, groups, mask, ent, act = _batch(reasoning)
    res = compute_advantages(
        _cfg(span), rewards, groups, torch.ones(4, dtype=torch.bool), mask, ent, action_mask=act
    )
    assert res.span_alpha is not None
    return res.span_alpha


def test_long_reasoning_turn_gets_a_different_alpha_per_span():
    resp, action = _alpha("response", True), _alpha("action", True)
    # response span: H̄ = (5·reasoning + decision)/6 falls with the row → α rises; action span: α falls
    assert bool((resp[1:] > resp[:-1]).all()) and bool((action[1:] < action[:-1]).all())
    assert not torch.allclose(resp, action)


def test_turn_without_reasoning_gets_the_same_alpha():
    assert torch.equal(_alpha("response", False), _alpha("action", False))
    assert not torch.allclose(_alpha("response", False), torch.ones(4))  # AEM is active, not switched off


def test_action_span_needs_the_action_mask():
    rewards, groups, mask, ent, _ = _batch(True)
    with pytest.raises(
        ValueError, match=r"action_mask: required when modulator\.aem\.entropy_span is 'action'"
    ):
        compute_advantages(_cfg("action"), rewards, groups, torch.ones(4, dtype=torch.bool), mask, ent)


def test_subspan_mean_and_fallback():
    mask = torch.tensor([[0, 1, 1, 1, 0, 1, 1]], dtype=torch.float32)
    vals = torch.tensor([[9.0, 1.0, 2.0, 6.0, 9.0, 3.0, 5.0]])
    sub = torch.tensor([[0, 0, 1, 1, 0, 0, 0]], dtype=torch.float32)  # second turn: no marked token
    assert subspan_mean(vals, span_index(mask), sub).tolist() == pytest.approx([4.0, 4.0])


def test_action_token_mask():
    mask = [0, 1, 1, 1, 0, 0, 1, 1, 0]
    assert action_token_mask(mask, [3, 7]) == [0, 0, 0, 1, 0, 0, 0, 1, 0]
    assert action_token_mask(mask, []) == [0, 1, 1, 1, 0, 0, 1, 1, 0]  # no starts: every turn counts whole
    assert action_token_mask(mask, [4]) == mask  # a start outside every turn (an empty turn) is ignored
