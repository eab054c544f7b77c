"""AEM's span choice in the OpenRLHF seam (issue 26): the executor's action ranges go through upstream's own
sample processing (`orl_process_response`) and our `attach_action_part`, and the seam's α comes from the action
tokens only with `aem.entropy_span=action`. Real OpenRLHF Experience objects (`orl_experience`), as in
test_aem_seam.py."""

from __future__ import annotations

import pytest
import torch

from swe_rl.agent.trajectory import Trajectory
from swe_rl.train.openrlhf.aem_seam import ACTION_KEY, attach_action_part, modulate_experiences
from swe_rl.train.openrlhf.config import AemConfig
from swe_rl.train.openrlhf.executor import trajectory_to_response

N = 4


def test_action_part_rides_next_to_upstreams_action_mask(orl_process_response, tiny_tokenizer):
    # prompt 0-4, turn 1 = 5-14 with its call at 12, obs 15-17, turn 2 = 18-21 (all call)
    mask = [0] * 5 + [1] * 10 + [0] * 3 + [1] * 4
    traj = Trajectory(task_id="t", token_ids=list(range(1, 23)), loss_mask=mask, logprobs=[0.0] * 22,
                      action_starts=[12, 18], exit_status="submitted", reward=1.0)  # fmt: skip
    resp = trajectory_to_response(traj, "p", "l", tiny_tokenizer, want_logprobs=True)
    for max_len in (4096, 14):  # whole, and cut inside the first turn's call as upstream cuts
        exp = attach_action_part(orl_process_response(resp, max_len), resp, max_len)
        part, act = exp.info[ACTION_KEY], exp.action_mask
        assert part.shape == act.shape and part.dtype == torch.bool
        want = [0] * 11 + [1] * 3 + [0] * 3 + [1] * 4  # tokens 12-14 and 18-21, shifted by one as upstream
        assert part[0].tolist() == [bool(w) for w in want[: max_len - 1]]
        assert bool((act | ~part).all())  # the action part lies inside the action mask


def _experiences(orl_experience, reasoning: bool):
    """8 samples (2 prompts x 4), one 6-token turn each: 5 reasoning tokens whose entropy falls with the sample,
    then a call token whose entropy rises (with reasoning); without reasoning the whole turn is the call."""
    exps = []
    for index in ([0, 1, 2, 3], [4, 5, 6, 7]):
        exp = orl_experience([[0, 1, 1, 1, 1, 1, 1]] * 4, index, [1.0, 0.0, 1.0, 0.0])
        ent = torch.zeros(4, 7)
        for b, i in enumerate(index):
            ent[b, 1:6] = 2.0 - 0.4 * (i % N)
            ent[b, 6] = 0.1 + 0.3 * (i % N)
        part = torch.zeros(4, 7, dtype=torch.bool)
        part[:, 6 if reasoning else 1 :] = True
        exp.info[ACTION_KEY] = part
        exp.advantages = torch.tensor([1.0, -1.0, 1.0, -1.0])[:, None] * exp.action_mask.float()
        exps.append((exp, ent))
    return exps


def _alpha(orl_experience, span: str, reasoning: bool) -> torch.Tensor:
    pairs = _experiences(orl_experience, reasoning)
    exps = [e for e, _ in pairs]
    modulate_experiences(exps, N, AemConfig(entropy_span=span), [h for _, h in pairs])
    assert all(ACTION_KEY not in e.info for e in exps)  # popped: never reaches OpenRLHF's info logging
    return torch.cat([e.info["aem_alpha_mean"] for e in exps])


def test_long_reasoning_turn_gets_a_different_alpha_per_span(orl_experience):
    resp, action = _alpha(orl_experience, "response", True), _alpha(orl_experience, "action", True)
    assert bool((resp[1:4] > resp[0:3]).all()) and bool((action[1:4] < action[0:3]).all())
    assert not torch.allclose(resp, action)


def test_turn_without_reasoning_gets_the_same_alpha(orl_experience):
    resp, action = _alpha(orl_experience, "response", False), _alpha(orl_experience, "action", False)
    assert torch.equal(resp, action) and not torch.allclose(resp, torch.ones(8))


def test_action_span_without_action_parts_fails_naming_the_key(orl_experience):
    pairs = _experiences(orl_experience, True)
    for e, _ in pairs:
        del e.info[ACTION_KEY]
    with pytest.raises(ValueError, match=ACTION_KEY):
        modulate_experiences(
            [e for e, _ in pairs], N, AemConfig(entropy_span="action"), [h for _, h in pairs]
        )
