"""The built-in trainer on the toy environment: it learns, it resumes exactly, it masks observations."""

from __future__ import annotations

import torch

from swe_rl.experiments.toy import toy_sampler
from swe_rl.train.batch import collate, token_logprobs_entropy
from swe_rl.train.checkpoint import TrainState, latest, load_checkpoint, save_checkpoint
from swe_rl.train.loop import lr_at, train
from swe_rl.train.objective import advantages, global_count, microbatch_loss


def _success(rollouter, tasks, seed: int = 12345) -> float:
    trajs = rollouter.rollout(tasks, 32, seed)
    return sum(t.reward for t in trajs) / len(trajs)


def test_toy_success_rises(train_toy_setup):
    cfg, run, model, tok, roll, tasks = train_toy_setup(steps=30)
    before = _success(roll, tasks)
    train(cfg, run, model, tok, roll, tasks, sample_tasks=toy_sampler)
    after = _success(roll, tasks)
    rows = run.read_metrics()
    assert len(rows) == 30
    assert after > before + 0.1, (before, after)
    assert {
        "reward_mean",
        "mixed_group_frac",
        "entropy_mean",
        "clipfrac",
        "approx_kl_old",
        "grad_norm",
    } <= set(rows[-1])
    assert rows[0]["mixed_group_frac"] > 0.5


def test_resume_is_exact(train_toy_setup):
    cfg, run, model, tok, roll, tasks = train_toy_setup(
        "straight", steps=4, save_every=2, **{"optim.epochs": 2, "optim.warmup": 3}
    )
    train(cfg, run, model, tok, roll, tasks, sample_tasks=toy_sampler)

    cfg2, run2, model2, tok2, roll2, tasks2 = train_toy_setup(
        "killed", steps=4, save_every=2, **{"optim.epochs": 2, "optim.warmup": 3}
    )
    train(
        cfg2, run2, model2, tok2, roll2, tasks2, sample_tasks=toy_sampler, stop_after=3
    )  # dies after step 3
    assert latest(run2.checkpoints).name == "step_000002"
    # A new process: fresh objects, weights and state come from the step-2 checkpoint.
    _, _, model3, _, roll3, _ = train_toy_setup(
        "killed", steps=4, save_every=2, **{"optim.epochs": 2, "optim.warmup": 3}
    )
    with torch.no_grad():
        for p in model3.parameters():
            p.add_(1.0)  # make sure the resumed weights really come from the checkpoint
    state = train(cfg2, run2, model3, tok2, roll3, tasks2, sample_tasks=toy_sampler, resume=True)
    assert state.step == 4
    for (name, a), b in zip(model.state_dict().items(), model3.state_dict().values(), strict=True):
        assert torch.equal(a, b), name
    straight = [r["reward_mean"] for r in run.read_metrics()]
    resumed = {r["step"]: r["reward_mean"] for r in run2.read_metrics()}  # step 3 logged twice: last wins
    assert [resumed[s] for s in (1, 2, 3, 4)] == straight


def test_observation_tokens_get_no_gradient(train_toy_setup):
    cfg, _run, model, tok, roll, tasks = train_toy_setup()
    trajs = roll.rollout(tasks[:2], 4, 7)
    for t in trajs:  # make sure both groups are mixed so advantages are non-zero
        t.reward = float(t.sample_idx % 2)
    batch = collate(trajs, tok.pad_token_id)
    with torch.no_grad():
        old_lp, ent = token_logprobs_entropy(model, batch)
    rewards = torch.tensor([t.reward for t in trajs])
    adv, mask, _ = advantages(cfg.algo, rewards, torch.arange(2).repeat_interleave(4), torch.ones(8, dtype=torch.bool),
                              batch.loss_mask, ent, ["submitted"] * 8)  # fmt: skip
    logp, _ = token_logprobs_entropy(model, batch)
    logp.retain_grad()
    loss, _ = microbatch_loss(cfg.algo, logp, old_lp, adv, mask, None, ref_lp=None, history=None, step=0,
                              count=global_count(cfg.algo, mask), fraction=1.0)  # fmt: skip
    model.zero_grad()
    loss.backward()
    obs = batch.loss_mask == 0
    assert obs.any() and (~obs).any()
    assert torch.all(logp.grad[obs] == 0)
    assert torch.any(logp.grad[~obs] != 0)
    # And the weights' gradient does not change when observation tokens are changed (same policy tokens).
    g1 = [p.grad.clone() for p in model.parameters() if p.grad is not None]
    assert any(g.abs().sum() > 0 for g in g1)


def test_checkpoint_round_trip(train_toy_setup, tmp_path):
    _cfg, _run, model, tok, _roll, _tasks = train_toy_setup()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    model(input_ids=torch.tensor([[1, 2, 3]])).logits.sum().backward()
    opt.step()
    state = TrainState(step=7, task_rng=(3, (1, 2), None), epo_history=[1.5, 1.25], extra={"k": 1})
    path = save_checkpoint(tmp_path / "ck", model, opt, state, tok)
    expected_rand = torch.rand(3)  # what the RNG gives right after the save

    _, _, model2, _, _, _ = train_toy_setup("other")
    opt2 = torch.optim.AdamW(model2.parameters(), lr=1e-3)
    torch.rand(5)  # move the RNG on; the load must restore it
    got = load_checkpoint(path, model2, opt2)
    assert torch.equal(torch.rand(3), expected_rand)
    assert (got.step, got.epo_history, got.extra) == (7, [1.5, 1.25], {"k": 1})
    assert tuple(got.task_rng[1]) == (1, 2)
    for a, b in zip(model.state_dict().values(), model2.state_dict().values(), strict=True):
        assert torch.equal(a, b)
    s1, s2 = opt.state_dict()["state"], opt2.state_dict()["state"]
    assert s1.keys() == s2.keys()
    for k in s1:
        assert torch.equal(s1[k]["exp_avg"], s2[k]["exp_avg"])


def test_lr_warmup_schedule(train_toy_setup):
    assert [lr_at(1.0, 4, s) for s in (1, 2, 4, 9)] == [0.25, 0.5, 1.0, 1.0]
    assert lr_at(3e-4, 0, 1) == 3e-4
    cfg, run, model, tok, roll, tasks = train_toy_setup(steps=3, **{"optim.warmup": 2})
    train(cfg, run, model, tok, roll, tasks, sample_tasks=toy_sampler)
    assert [r["lr"] for r in run.read_metrics()] == [cfg.optim.lr / 2, cfg.optim.lr, cfg.optim.lr]
    # the toy rollouter samples with the trainer's weights: sampler and trainer log-probs agree
    assert all(r["rollout_lp_gap"] < 1e-4 for r in run.read_metrics())


def test_negative_warmup_is_one_clear_error():
    import pytest

    from swe_rl.config import ConfigError, load_config
    from swe_rl.train.config import TrainConfig

    with pytest.raises(ConfigError, match=r"optim\.warmup"):
        load_config(TrainConfig, files=[], overrides=["optim.warmup=-2"])
