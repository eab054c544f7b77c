"""Issue 25, class 6: the built-in trainer applies the reward policy to episodes the grader labelled `suspicious`
and logs integrity/* per step (metrics.jsonl). The toy environment's episodes are labelled the way rollout_one
records the real grader's result (metrics.grading.suspicious / tests.integrity.harness_restored)."""

from __future__ import annotations

import pytest

from swe_rl.algo.config import AlgoConfig
from swe_rl.experiments.toy import ToyRollouter, toy_sampler
from swe_rl.grading.reward import RewardResult, apply_policy, police_episodes
from swe_rl.train.loop import train

SMALL = {"rollout.tasks_per_step": 4, "rollout.n_samples": 4}  # 16 episodes


class HackingToy(ToyRollouter):
    """Every episode 'resolves'; those of the first task are labelled suspicious, those of the second touched the
    test harness (reset by the grader, not suspicious by itself), and one of the third's hung its tests (the
    grader's patch_caused: reward 0)."""

    def rollout(self, tasks, n, seed):
        trajs = super().rollout(tasks, n, seed)
        for i, t in enumerate(trajs):
            t.reward, t.resolved = 1.0, True
            grading = {"failure": None, "tests": {}, "suspicious": []}
            if i // n == 0:
                grading["suspicious"] = ["tripwire: test detection: PYTEST_* environment: pkg/a.py"]
            elif i // n == 1:
                grading["tests"] = {"integrity": {"harness_restored": ["conftest.py"]}}
            elif i // n == 2 and i % n == 0:  # its tests hung where gold's ran in a second: reward 0
                t.reward, t.resolved = 0.0, False
                grading["tests"] = {"patch_caused": {"failure": "test_timeout", "why": "x"}}
            t.metrics["grading"] = grading
        return trajs


@pytest.mark.parametrize(("policy", "reward_mean"), [("zero", 11 / 16), ("mask", 11 / 12)])
def test_trainer_applies_the_policy_and_logs_integrity(train_toy_setup, policy, reward_mean):
    algo = AlgoConfig.model_validate({"reward": {"suspicious": policy}})
    cfg, run, model, tok, _roll, tasks = train_toy_setup(f"int-{policy}", steps=1, **SMALL, algo=algo)
    train(cfg, run, model, tok, HackingToy(model, tok), tasks, sample_tasks=toy_sampler)
    m = run.read_metrics()[-1]
    assert m["integrity/suspicious"] == 4 and m["integrity/suspicious_frac"] == 0.25
    assert m["integrity/harness_touched"] == 4 and m["integrity/harness_touched_frac"] == 0.25
    assert m["integrity/patch_caused"] == 1 and m["integrity/patch_caused_frac"] == 1 / 16
    assert m["reward_mean"] == pytest.approx(
        reward_mean
    )  # mask: the 4 are out of the mean, like infra failures


def test_policy_on_results_and_episodes():
    sus = RewardResult(1.0, True, {}, "", None, suspicious=("tripwire: x",))
    assert apply_policy(sus, "zero").reward == 0.0 and apply_policy(sus, "zero").suspicious == sus.suspicious
    assert apply_policy(sus, "mask").reward is None and apply_policy(sus, "mask").failure == "suspicious"
    assert apply_policy(sus, "keep") is sus
    clean = RewardResult(1.0, True, {}, "", None)
    assert apply_policy(clean, "zero") is clean

    class T:
        def __init__(self, reward, grading):
            self.reward, self.metrics = reward, {"grading": grading} if grading is not None else {}

    trajs = [T(1.0, {"failure": None, "suspicious": ["x"]}), T(1.0, {"failure": None}), T(None, None)]
    m = police_episodes(trajs, "zero")
    assert [t.reward for t in trajs] == [0.0, 1.0, None]  # the ungraded one is not counted
    assert m["integrity/suspicious"] == 1 and m["integrity/suspicious_frac"] == 0.5
    assert trajs[0].metrics["grading"]["reward_before_policy"] == 1.0


def test_every_training_recipe_zeroes_suspicious_episodes():
    """Written out in every recipe (not left to a default someone may change): built-in trainer recipes under
    algo.reward, OpenRLHF recipes under agent."""
    from pathlib import Path

    import yaml

    recipes = [*sorted(Path("configs/train").glob("*.yaml")), Path("configs/demo.yaml")]
    found = {}
    for path in recipes:
        doc = yaml.safe_load(path.read_text())
        algo = doc.get("algo") or (doc.get("train") or {}).get("algo") or {}
        found[path.name] = (
            (algo.get("reward") or {}).get("suspicious"),
            (doc.get("agent") or {}).get("suspicious"),
        )
    assert len(found) >= 12 and all("zero" in v for v in found.values()), found
