"""Per-turn records of a training step (objective.turn_records): each logged episode carries, per turn, its
tokens, mean old-policy entropy, AEM's α and the advantage it received, in the order of its turns (the viewer's
episode page shows them)."""

from __future__ import annotations

import json

import pytest
import torch

from swe_rl.algo.config import AlgoConfig
from swe_rl.algo.pipeline import compute_advantages
from swe_rl.experiments.toy import toy_sampler
from swe_rl.train.loop import train
from swe_rl.train.objective import step_advantages

AEM = {"modulator": {"kind": "aem", "aem": {"min_range": 0.0}}}


def _batch():
    # 4 rows, 2 groups; row 0 has three turns, row 1 two, row 2 one, row 3 is unscored (reward None -> invalid)
    mask = torch.zeros(4, 12)
    for r, spans in enumerate([[(0, 2), (4, 7), (9, 10)], [(1, 3), (5, 9)], [(2, 6)], [(0, 3), (6, 8)]]):
        for a, b in spans:
            mask[r, a:b] = 1
    ent = torch.rand(4, 12, generator=torch.Generator().manual_seed(3)) * 2 * mask
    rewards, valid = torch.tensor([1.0, 0.0, 0.0, 0.0]), torch.tensor([True, True, True, False])
    return mask, ent, rewards, torch.tensor([0, 0, 1, 1]), valid


def test_turn_records_match_the_modulator_span_by_span():
    mask, ent, rewards, groups, valid = _batch()
    algo = AlgoConfig.model_validate(AEM)
    exits = ["submitted"] * 4
    adv, final, _, turns = step_advantages(algo, rewards, groups, valid, mask, ent, exits)
    res = compute_advantages(algo, rewards, groups, valid, mask, ent, exits)
    assert [len(t) for t in turns] == [3, 2, 1, 2]
    alphas = iter(res.span_alpha.tolist())  # spans of the mask α was computed on, row-major
    for r, row in enumerate(turns):
        spans = torch.nonzero(torch.diff(torch.nn.functional.pad(mask[r], (1, 1))) != 0).view(-1).tolist()
        for k, rec in enumerate(row):
            a, b = spans[2 * k], spans[2 * k + 1]
            assert rec["tokens"] == b - a
            assert rec["entropy"] == pytest.approx(float(ent[r, a:b].mean()), abs=1e-6)
            if r == 3:  # unscored: no α (its row was masked before modulation), no advantage
                assert rec["alpha"] is None and rec["masked"] and rec["advantage"] == 0.0
                continue
            assert rec["alpha"] == pytest.approx(next(alphas), abs=1e-6) and not rec["masked"]
            assert rec["advantage"] == pytest.approx(float(adv[r, a:b].mean()), abs=1e-6)
    # α rescales the advantage turn by turn: two turns of row 0 with different entropy get different advantages
    assert len({round(t["advantage"], 6) for t in turns[0]}) > 1
    assert float(final[3].sum()) == 0


def test_without_aem_turns_have_no_alpha_and_one_advantage_per_row():
    mask, ent, rewards, groups, valid = _batch()
    algo = AlgoConfig.model_validate({})
    _, _, _, turns = step_advantages(algo, rewards, groups, valid, mask, ent, ["submitted"] * 4)
    assert all(t["alpha"] is None for row in turns for t in row)
    assert len({round(t["advantage"], 6) for t in turns[0]}) == 1


class RecordingToy:
    """The toy rollouter, keeping the trajectories of the last step (their masks give the turns to expect)."""

    def __init__(self, inner):
        self.inner, self.last = inner, []

    def rollout(self, tasks, n, seed):
        self.last = self.inner.rollout(tasks, n, seed)
        return self.last


def test_a_training_step_writes_each_logged_episode_turns(train_toy_setup):
    cfg, run, model, tok, roll, tasks = train_toy_setup(
        "turns", steps=1, log_trajectories=6, **{"rollout.tasks_per_step": 2, "rollout.n_samples": 4}
    )
    cfg.algo = AlgoConfig.model_validate(AEM)
    rec_roll = RecordingToy(roll)
    train(cfg, run, model, tok, rec_roll, tasks, sample_tasks=toy_sampler)
    recs = [json.loads(x) for x in (run.trajectories / "step_000001.jsonl").read_text().splitlines()]
    assert len(recs) == 6
    for rec, traj in zip(recs, rec_roll.last, strict=False):
        m = torch.tensor(traj.loss_mask)
        n_spans = int(((m[1:] == 1) & (m[:-1] == 0)).sum() + (m[0] == 1))
        assert len(rec["turns"]) == n_spans > 0, rec["turns"]
        assert sum(t["tokens"] for t in rec["turns"]) == int(m.sum())
        assert all(t["alpha"] is not None for t in rec["turns"]), rec["turns"]
        assert rec["patch"] == traj.patch
