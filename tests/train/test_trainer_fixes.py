"""Issue 16's trainer fixes on the toy environment: the rollout temperature in every trainer forward, one
optimizer budget whatever the advantages, AEM diagnostics per step, and the off-policy correction in use."""

from __future__ import annotations

import json
import math

import pytest

from swe_rl.experiments.toy import ToyRollouter, toy_sampler
from swe_rl.train.loop import train

SMALL = {"rollout.tasks_per_step": 4, "rollout.n_samples": 4}  # 16 episodes: one step takes ~1-2 s


def _one_step(setup, name, roll=None, **overrides):
    cfg, run, model, tok, toy_roll, tasks = setup(name, steps=1, **{**SMALL, **overrides})
    roll = roll(model, tok) if roll is not None else toy_roll
    train(cfg, run, model, tok, roll, tasks, sample_tasks=toy_sampler)
    return run.read_metrics()[-1]


def test_trainer_log_probs_use_the_rollout_temperature(train_toy_setup):
    # Same weights at step 1: the trainer's old log-probs equal the sampler's only at the sampler's temperature.
    m = _one_step(
        train_toy_setup, "t05", lambda mod, tok: ToyRollouter(mod, tok, temperature=0.5),
        **{"rollout.temperature": 0.5},
    )  # fmt: skip
    assert m["rollout_lp_gap"] < 1e-4, m["rollout_lp_gap"]


def test_toy_environment_samples_at_the_configured_temperature(train_toy_setup):
    # what `swe-rl train` builds (run.build_env) must sample where the trainer scores: rollout.temperature
    from swe_rl.train.run import build_env

    cfg, _run, model, tok, _roll, _tasks = train_toy_setup("t05env", **{"data.source": "toy"})
    cfg.rollout.temperature = 0.5
    env = build_env(cfg, model, tok)
    assert env.rollouter.temperature == 0.5


class HalfSolvedToy(ToyRollouter):
    """The toy environment where the first half of the tasks of a step always succeed (all-equal groups, A = 0)."""

    def rollout(self, tasks, n, seed):
        trajs = super().rollout(tasks, n, seed)
        for i, t in enumerate(trajs):
            if i // n < len(tasks) // 2:
                t.reward, t.resolved = 1.0, True
        return trajs


def test_same_optimizer_budget_whatever_the_advantages(train_toy_setup):
    # 4 tasks x 4 samples = 16 rows, minibatch 4: 4 updates per epoch for every method. GRPO gives half the rows
    # A = 0 (all-equal groups); EMPG makes every row non-zero. Both must take the same steps with the same divisor.
    base = {"optim.minibatch": 4, "optim.micro_batch": 4, "optim.epochs": 2}
    grpo = _one_step(train_toy_setup, "grpo", HalfSolvedToy, **base)
    from swe_rl.algo.config import AlgoConfig

    empg = _one_step(
        train_toy_setup, "empg", HalfSolvedToy,
        **base, algo=AlgoConfig.model_validate({"modulator": {"kind": "empg"}}),
    )  # fmt: skip
    assert grpo["updates"] == empg["updates"] == 8
    assert grpo["active_rows"] == empg["active_rows"] == 16


class NoPolicyTokensToy(ToyRollouter):
    """Every episode's tokens are prompt (mask 0), as when a long real issue fills rollout.max_len: no minibatch has
    a policy token (found by two RL steps on real django/sphinx instances: the update crashed on an empty batch)."""

    def rollout(self, tasks, n, seed):
        trajs = super().rollout(tasks, n, seed)
        for t in trajs:
            t.loss_mask = [0] * len(t.token_ids)
            t.logprobs = [0.0] * len(t.token_ids)
            t.action_starts = []
        return trajs


def test_a_step_without_policy_tokens_keeps_its_budget_and_changes_nothing(train_toy_setup):
    cfg, run, model, tok, _roll, tasks = train_toy_setup("nopol", steps=1, **{**SMALL, "optim.minibatch": 4})
    before = [p.detach().clone() for p in model.parameters()]
    train(cfg, run, model, tok, NoPolicyTokensToy(model, tok), tasks, sample_tasks=toy_sampler)
    m = run.read_metrics()[-1]
    assert m["active_rows"] == 0 and m["updates"] == cfg.optim.epochs * 4, m
    assert all(bool((a == b).all()) for a, b in zip(before, model.parameters(), strict=True))


def test_aem_diagnostics_in_the_step_metrics(train_toy_setup):
    from swe_rl.algo.config import AlgoConfig

    algo = AlgoConfig.model_validate({"modulator": {"kind": "aem", "aem": {"min_range": 0.0}}})
    m = _one_step(train_toy_setup, "aem", algo=algo)
    for key in ("algo/aem/frac_groups_range_rule", "algo/aem/alpha_token_mean", "algo/aem/alpha_turn/turn0",
                "algo/aem/alpha_turn/turn1"):  # fmt: skip
        assert key in m and math.isfinite(m[key]), key
    assert m["algo/aem/frac_groups_range_rule"] < 1.0  # δ = 0 modulates every group with any spread


def test_off_policy_correction_acts_on_a_sampler_trainer_mismatch(train_toy_setup):
    from swe_rl.algo.config import AlgoConfig

    algo = AlgoConfig.model_validate({"off_policy": {"mode": "mask", "low": 0.9, "high": 1.1}})
    matched = _one_step(train_toy_setup, "is_ok", algo=algo)
    assert matched["is/changed_frac"] == 0.0 and matched["is/rho_mean"] == pytest.approx(1.0, abs=1e-4)
    # a sampler at T = 1.6 while the trainer assumes 1.0: many tokens leave the [0.9, 1.1] band and drop out
    off = _one_step(
        train_toy_setup, "is_off", lambda mod, tok: ToyRollouter(mod, tok, temperature=1.6), algo=algo
    )
    assert off["is/changed_frac"] > 0.05 and off["rollout_lp_gap"] > 0.01


class BrokenSandboxToy(ToyRollouter):
    """Every episode ends in an infrastructure error before its first token (what a sandbox that cannot reset its
    repo gives: the local backend run by a user who cannot write the host's /testbed), at the calls `fail` picks."""

    def __init__(self, *args, fail=lambda call: True, **kw):
        super().__init__(*args, **kw)
        self.calls, self.fail = 0, fail

    def rollout(self, tasks, n, seed):
        from swe_rl.rollout.episode import error_trajectory

        self.calls += 1
        if not self.fail(self.calls):
            return super().rollout(tasks, n, seed)
        err = "Traceback (most recent call last):\nsandboxes.base.SandboxError: repo reset failed: Permission denied"
        return [
            error_trajectory(t.instance_id, i, err, infra_failure="sandbox_error")
            for t in tasks
            for i in range(n)
        ]


def test_steps_whose_every_episode_failed_update_nothing_then_stop_the_run_with_the_failure(train_toy_setup):
    # Found by running the local backend as a non-root user: every episode failed its repo reset and the step
    # crashed in collate (IndexError: a batch of zero columns), with no word of the cause.
    from swe_rl.train.loop import UnscoredSteps

    cfg, run, model, tok, _roll, tasks = train_toy_setup(
        "broken", steps=6, save_every=1, log_trajectories=2, **SMALL, **{"rollout.max_unscored_steps": 2}
    )
    roll = BrokenSandboxToy(model, tok, fail=lambda call: call >= 2)
    with pytest.raises(UnscoredSteps) as err:
        train(cfg, run, model, tok, roll, tasks, sample_tasks=toy_sampler)
    msg = str(err.value)
    assert "rollout.max_unscored_steps" in msg and "2 RL steps in a row (steps 2-3)" in msg, msg
    assert "sandbox_error 16 of 16" in msg and "repo reset failed: Permission denied" in msg, msg
    rows = run.read_metrics()
    assert [r["step"] for r in rows] == [1, 2, 3]  # the failed steps are logged, nothing after them
    assert rows[1]["valid_frac"] == 0 and rows[1]["policy_tokens"] == 0 and rows[1]["exit/error"] == 16
    # the checkpoint of the last step that learned is the newest: a resumed run does the failed steps again
    from swe_rl.train.checkpoint import latest

    assert latest(run.checkpoints).name.endswith("1"), sorted(p.name for p in run.checkpoints.iterdir())
    rec = [json.loads(x) for x in (run.trajectories / "step_000003.jsonl").read_text().splitlines()]
    assert "Permission denied" in rec[0]["error"]


def test_one_unscored_step_under_the_limit_is_skipped_and_training_goes_on(train_toy_setup):
    cfg, run, model, tok, _roll, tasks = train_toy_setup("blip", steps=3, **SMALL)
    roll = BrokenSandboxToy(model, tok, fail=lambda call: call == 2)  # a transient outage
    before = [p.detach().clone() for p in model.parameters()]
    train(cfg, run, model, tok, roll, tasks, sample_tasks=toy_sampler)
    rows = run.read_metrics()
    assert [r["step"] for r in rows] == [1, 2, 3] and rows[1]["valid_frac"] == 0, rows
    assert rows[2]["valid_frac"] == 1 and rows[2]["policy_tokens"] > 0
    assert any(bool((a != b).any()) for a, b in zip(before, model.parameters(), strict=True))
