"""The in-process multi-decision environment (swe_rl.experiments.decisions): splits, grading, start, trainer wiring."""

from __future__ import annotations

import random
from pathlib import Path

import pytest
import torch

from swe_rl.algo.config import AlgoConfig
from swe_rl.experiments import decisions as D
from swe_rl.policy.tiny import build_tiny_model, build_tokenizer
from swe_rl.runs import RunDir
from swe_rl.train.config import TrainConfig


@pytest.fixture(scope="module")
def tok():
    return build_tokenizer(vocab_size=1024)


@pytest.fixture(scope="module")
def start_dir(tmp_path_factory):
    """One fitted start (60 SFT steps: ~15% of episodes succeed, so groups are mixed) shared by the tests."""
    out = tmp_path_factory.mktemp("dec")
    return out, _cfg(out, decisions={"sft_steps": 60})


def _cfg(tmp_path: Path, **data) -> TrainConfig:
    return TrainConfig.model_validate({
        "out_dir": str(tmp_path), "name": "dec", "steps": 2, "save_every": 0, "log_trajectories": 0,
        "model": {"size": "tiny", "threads": 1},
        "data": {"source": "decisions", "n_train": 500, **data},
        "rollout": {"tasks_per_step": 4, "n_samples": 4},
        "optim": {"lr": 1e-3, "minibatch": 16, "micro_batch": 16},
        "eval": {"every": 0, "n_tasks": 20, "sampled": 2, "split": "validation"},
    })  # fmt: skip


def test_splits_are_disjoint_deterministic_and_checked():
    ids = {
        s: {t.problem_statement + str(t.metadata["c"]) for t in D.decision_tasks(s, 1000)} for s in D.SPLITS
    }
    assert not ids["train"] & ids["validation"] and not ids["train"] & ids["test"]
    assert not ids["validation"] & ids["test"]
    a, b = D.decision_tasks("test", 200), D.decision_tasks("test", 200)
    assert [t.metadata for t in a] == [t.metadata for t in b]
    assert len({t.instance_id for t in a}) == 200
    with pytest.raises(ValueError, match="split='held'"):
        D.decision_tasks("held", 1)
    with pytest.raises(ValueError, match="has only"):
        D.decision_tasks("test", 10**6)


def test_bad_decisions_config_gets_one_clear_error(tmp_path):
    from swe_rl.config import ConfigError, load_config
    from swe_rl.train.run import build_env

    with pytest.raises(ConfigError, match="p_correct_reasoned applies only with reason_first"):
        load_config(
            TrainConfig,
            files=[],
            overrides=["data.source=decisions", "data.decisions.p_correct_reasoned=0.8"],
        )
    cfg = _cfg(tmp_path)
    cfg.eval.n_tasks = 5000
    with pytest.raises(ValueError, match=r"eval\.n_tasks=5000: the decisions split 'validation' has only"):
        build_env(cfg, None, build_tokenizer(vocab_size=1024))


@pytest.mark.parametrize("reason_first", [False, True])
def test_rollout_grades_every_decision_from_the_tokens(tok, reason_first):
    """Reward, exit and observations re-derived independently from each episode's own tokens and its task."""
    model = build_tiny_model(tok, size="tiny", seed=3)
    lay = D.Layout(tok)
    tasks = D.decision_tasks("train", 12)
    trajs = D.DecisionRollouter(model, tok, reason_first=reason_first).rollout(tasks, 6, seed=5)
    assert len(trajs) == 72 and len({len(t.token_ids) for t in trajs}) == 1
    by_id = {t.instance_id: t for t in tasks}
    seen_rewards = set()
    for tr in trajs:
        task = by_id[tr.task_id]
        spans = [m["span"] for m in tr.messages]
        assert len(spans) == 4 and all(sum(tr.loss_mask[a:b]) == b - a == 2 for a, b in spans)
        assert sum(tr.loss_mask) == 8  # nothing but the four turns is trained on
        first = [tr.token_ids[b - 1 if reason_first else a] for a, b in spans]  # the decision tokens
        f, (c1, c2) = task.metadata["f"], task.metadata["c"]
        chosen = D.FILE_TOK.index(first[0]) if first[0] in D.FILE_TOK else None
        obs = tr.token_ids[spans[0][1] : spans[1][0]]
        shown = (c1, c2) if chosen == f else D.shown_constants(task, chosen)
        assert obs == lay.observe(lay.view if chosen == f else lay.miss, list(shown))
        patch_ok = first[0] == D.FILE_TOK[f] and first[1] == D.EDIT1_TOK[c1] and first[2] == D.EDIT2_TOK[c2]
        assert tr.reward == float(patch_ok)
        assert tr.exit_status == ("submitted" if first[3] == D.SUBMIT_TOK else "format_error")
        assert tr.resolved == (patch_ok and first[3] == D.SUBMIT_TOK)
        seen_rewards.add(tr.reward)
    # greedy is deterministic and ignores the seed
    g1 = D.DecisionRollouter(model, tok, temperature=0).rollout(tasks, 1, seed=1)
    g2 = D.DecisionRollouter(model, tok).with_temperature(0).rollout(tasks, 1, seed=2)
    assert [t.token_ids for t in g1] == [t.token_ids for t in g2]


def test_demonstrations_follow_the_layout_and_their_noise(tok):
    lay = D.Layout(tok)
    rng = random.Random(0)
    tasks = D.decision_tasks("train", 50)
    right = wrong = 0
    for _ in range(400):
        t = rng.choice(tasks)
        ids, mask = D.demonstration(lay, t, rng, 0.7, 0.9, 0.8)
        assert len(ids) == len(mask) and sum(mask) == 8
        f_tok = ids[len(lay.prompt(t))]
        right += f_tok == D.FILE_TOK[t.metadata["f"]]
        wrong += f_tok != D.FILE_TOK[t.metadata["f"]]
    assert 0.6 < right / (right + wrong) < 0.8  # p_correct = 0.7


def test_reasoned_demonstrations_decide_better_after_the_template(tok):
    lay = D.Layout(tok)
    rng = random.Random(1)
    tasks = D.decision_tasks("train", 50)
    hits: dict[bool, list[bool]] = {True: [], False: []}
    for _ in range(1500):
        t = rng.choice(tasks)
        ids, mask = D.demonstration(lay, t, rng, 0.5, 0.9, 0.5, reason_first=True, p_correct_reasoned=0.9)
        p = len(lay.prompt(t))
        assert sum(mask) == 8 and mask[p : p + 2] == [1, 1]
        reason, decision = ids[p], ids[p + 1]  # locate turn: reasoning token first, then the file
        hits[reason == D.TEMPLATE_TOK[0]].append(decision == D.FILE_TOK[t.metadata["f"]])
    assert 0.85 < sum(hits[True]) / len(hits[True]) < 0.95
    assert 0.43 < sum(hits[False]) / len(hits[False]) < 0.57
    # act-then-reason demonstrations keep their draw order (the first outcome study's start depends on it)
    a = D.demonstration(lay, tasks[0], random.Random(7), 0.6, 0.9, 0.8)
    b = D.demonstration(
        lay, tasks[0], random.Random(7), 0.6, 0.9, 0.8, reason_first=False, p_correct_reasoned=0.1
    )
    assert a == b


def test_start_is_fitted_reused_and_refuses_another_config(tmp_path, tok):
    cfg = _cfg(tmp_path, decisions={"sft_steps": 40, "p_correct": 0.9, "p_submit": 1.0})
    path = D.build_start(cfg, tmp_path / "start")
    assert (path / "config.json").is_file() and (path / "start.json").is_file()
    from swe_rl.train.run import load_policy_model

    model, tok2 = load_policy_model(
        cfg.model_copy(update={"model": cfg.model.model_copy(update={"init": str(path)})})
    )
    fresh = build_tiny_model(tok2, size="tiny", seed=0)
    tasks = D.decision_tasks("validation", 30)

    def submit_rate(m):
        return (
            sum(t.exit_status == "submitted" for t in D.DecisionRollouter(m, tok2).rollout(tasks, 4, 0)) / 120
        )

    assert submit_rate(model) > 0.5 > 0.05 > submit_rate(fresh)  # it learned the demonstrations' submit
    assert D.build_start(cfg, path) == path  # reused
    other = _cfg(tmp_path, decisions={"sft_steps": 41})
    with pytest.raises(ValueError, match="holds a start built with"):
        D.build_start(other, path)
    assert D.start_folder(cfg) != D.start_folder(other)


def test_aem_premise_holds_on_the_start(start_dir):
    """Span entropies vary within a turn type, and the 0.1-nat range rule holds for well under half the groups."""
    from swe_rl.algo.pipeline import compute_advantages
    from swe_rl.train.batch import collate, token_logprobs_entropy
    from swe_rl.train.run import load_policy_model

    _, cfg = start_dir
    model, tok2 = load_policy_model(cfg)  # builds the start in <out>/starts/
    trajs = D.DecisionRollouter(model, tok2).rollout(D.decision_tasks("validation", 16), 8, seed=0)
    batch = collate(trajs, tok2.pad_token_id)
    with torch.no_grad():
        _, ent = token_logprobs_entropy(model, batch, chunk=16)
    rewards = torch.tensor([t.reward for t in trajs])
    algo = AlgoConfig.model_validate({"modulator": {"kind": "aem", "aem": {"min_range": 0.1}}})
    res = compute_advantages(algo, rewards, torch.arange(16).repeat_interleave(8), torch.ones(128, dtype=torch.bool),
                             batch.loss_mask, ent, [t.exit_status for t in trajs])  # fmt: skip
    assert float(res.diagnostics["aem/frac_groups_range_rule"]) < 0.5
    span = [(ent[i, a:b].mean().item(), k) for i, t in enumerate(trajs) for k, (a, b) in
            enumerate(m["span"] for m in t.messages)]  # fmt: skip
    for k in range(4):  # within one turn type the span entropies are not one value
        vals = torch.tensor([h for h, kk in span if kk == k])
        assert float(vals.std()) > 1e-3


def test_trainer_runs_on_decisions_through_build_env(start_dir):
    from swe_rl.train.loop import train
    from swe_rl.train.run import build_env, load_policy_model

    _, cfg = start_dir
    cfg = cfg.model_copy(deep=True)
    cfg.rollout.tasks_per_step = 8
    # the action span: the loop must hand the batch's action mask to the advantages (else a ValueError names it)
    cfg.algo = AlgoConfig.model_validate({"modulator": {"kind": "aem", "aem": {"entropy_span": "action"}}})
    model, tok = load_policy_model(cfg)
    env = build_env(cfg, model, tok)
    assert all(t.metadata["split"] == "validation" for t in env.evaluator.tasks)
    assert all(t.metadata["split"] == "train" for t in env.tasks)
    run = RunDir.create(cfg.out_dir, cfg.name)
    before = [p.detach().clone() for p in model.parameters()]
    train(cfg, run, model, tok, env.rollouter, env.tasks, sample_tasks=env.sample_tasks)
    rows = run.read_metrics()
    assert [r["step"] for r in rows] == [1, 2] and rows[-1]["rollout_lp_gap"] < 1e-4
    assert "algo/aem/alpha_turn/edit:1" in rows[-1]  # α by turn type has the environment's turn names
    assert sum(r["active_rows"] for r in rows) > 0  # mixed groups: the updates carry a gradient
    assert any(not torch.equal(a, b) for a, b in zip(before, model.parameters(), strict=True))
    metrics = env.evaluator(2)
    assert 0 <= metrics["sampled_success"] <= 1 and "greedy_success" in metrics


@pytest.mark.parametrize("reason_first", [True, False])
def test_action_span_alpha_comes_from_the_decision_token(tok, reason_first):
    """Issue 26: with reason-then-act turns the action is the decision (each turn's last token), so the trainer's
    α under entropy_span=action is AEM's α of the decision-token entropies, unlike the whole-turn α; with
    act-then-reason turns no action start is recorded, every turn counts whole and the two spans agree."""
    from swe_rl.algo.aem import aem_coefficients
    from swe_rl.train.batch import collate, token_logprobs_entropy
    from swe_rl.train.objective import advantages

    model = build_tiny_model(tok, size="tiny", seed=3)
    trajs = D.DecisionRollouter(model, tok, reason_first=reason_first).rollout(
        D.decision_tasks("train", 8), 4, 1
    )
    batch = collate(trajs, tok.pad_token_id)
    assert batch.action_mask is not None
    ends = [[b - 1 for _, b in (m["span"] for m in t.messages)] for t in trajs]
    want = torch.zeros_like(batch.loss_mask)
    for i, e in enumerate(ends):
        want[i, e] = 1.0
    assert torch.equal(batch.action_mask, want if reason_first else batch.loss_mask)
    with torch.no_grad():
        _, ent = token_logprobs_entropy(model, batch, chunk=16)
    rewards = torch.tensor([1.0, 0.0] * 16)  # mixed groups, so every span has a nonzero advantage
    groups = torch.arange(8).repeat_interleave(4)
    valid, exits = torch.ones(32, dtype=torch.bool), [t.exit_status for t in trajs]

    def adv(span: str) -> torch.Tensor:
        # δ = 0: an untrained model's span entropies differ by less than the 0.1-nat range rule
        cfg = AlgoConfig.model_validate({"modulator": {"kind": "aem", "aem": {"entropy_span": span, "min_range": 0.0}},
                                         "reward": {"unsubmitted": "grade"}})  # fmt: skip
        return advantages(
            cfg, rewards, groups, valid, batch.loss_mask, ent, exits, action_mask=batch.action_mask
        )[0]

    a_resp, a_act = adv("response"), adv("action")
    if not reason_first:
        assert torch.equal(a_resp, a_act)
        return
    assert not torch.allclose(a_resp, a_act)
    h = torch.stack([ent[i, e] for i, e in enumerate(ends)]).reshape(-1)  # (32 x 4 spans) decision entropies
    alpha = aem_coefficients(h, groups.repeat_interleave(4), min_range=0.0)
    base = advantages(AlgoConfig.model_validate({"reward": {"unsubmitted": "grade"}}), rewards, groups, valid,
                      batch.loss_mask, ent, exits)[0]  # fmt: skip
    got = torch.stack([a_act[i, e] for i, e in enumerate(ends)]).reshape(-1)
    ref = torch.stack([base[i, e] for i, e in enumerate(ends)]).reshape(-1) * alpha
    torch.testing.assert_close(got, ref, rtol=1e-5, atol=1e-6)


def test_generated_source_refuses_a_validation_split(tmp_path):
    from swe_rl.train.run import build_env

    cfg = TrainConfig.model_validate({"eval": {"split": "validation"}, "out_dir": str(tmp_path)})
    with pytest.raises(ValueError, match=r"eval\.split=validation"):
        build_env(cfg, None, None)
