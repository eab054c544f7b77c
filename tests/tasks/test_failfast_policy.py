"""The adaptive fail-fast decision (swe_rl.grading.failfast_policy): learned from the gradings' own cost, per task;
and through the trainers' reward function (grading_reward_fn) on a real micro task in Docker."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import pytest

from swe_rl.grading.failfast_policy import FailFastPolicy


@dataclass(frozen=True)
class R:  # the fields of a RewardResult the policy reads
    reward: float | None
    tests: dict[str, Any] = field(default_factory=dict)

    @property
    def resolved(self) -> bool:
        return self.reward == 1.0


def graded(reward: float | None = 0.0, **cost: float) -> R:
    return R(reward, {"cost": {"start": 1.0, **cost, "total": 9.0}})


def test_pre_run_stays_on_until_both_costs_are_known():
    p = FailFastPolicy()
    assert p.worth("a")
    p.observe("a", graded(failfast=3.0))  # a failing pre-run: its cost only
    assert p.worth("a")
    # F2P passed: both costs; resolve rate (1 + 1) / (2 + 2): the pre-run pays below (1 - 1/2) x 4 s
    p.observe("a", graded(1.0, failfast=3.0, test_run=4.0))
    assert not p.worth("a")
    assert p.worth("b")  # per task


def test_the_share_that_pays_follows_the_tasks_resolve_rate():
    p = FailFastPolicy()
    p.observe("a", graded(1.0, failfast=3.0, test_run=4.0))  # p = 2/3: pays below 1.33 s
    assert not p.worth("a")
    for _ in range(7):  # full runs of failing patches: p = 2/10, pays below 0.8 x 4 s
        p.observe("a", graded(0.0, test_run=4.0))
    assert p.worth("a")
    p.observe("a", graded(1.0, test_run=4.0))  # p = 3/11: pays below 2.9 s
    assert not p.worth("a")


def test_means_not_the_last_grading():
    p = FailFastPolicy()
    p.observe("a", graded(0.0, failfast=1.0, test_run=10.0))  # p = 1/3: pays below 6.7 s
    p.observe("a", graded(0.0, failfast=9.0))  # one slow pre-run (load): mean 5 s, p = 1/4
    assert p.worth("a")
    p.observe("a", graded(0.0, failfast=11.0))  # mean 7 s, p = 1/5: pays below 8 s
    assert p.worth("a")
    p.observe("a", graded(0.0, failfast=17.0))  # mean 9.5 s >= (1 - 1/6) x 10 s
    assert not p.worth("a")


def test_infrastructure_failures_and_shared_results_teach_nothing():
    p = FailFastPolicy()
    p.observe("a", graded(None, failfast=9.0, test_run=1.0))
    shared = R(1.0, {"cost": {"failfast": 9.0, "test_run": 1.0, "dedup_hit": True}})
    p.observe("a", shared)
    assert p.worth("a")
    p.observe("a", graded(1.0, failfast=0.01, test_run=1.0))  # a runner it cannot select: ~0 s pre-run
    assert p.worth("a")


def test_mark_says_why():
    p = FailFastPolicy()
    p.observe("a", graded(1.0, failfast=2.0, test_run=2.0))
    marked = p.mark("a", graded(0.0, test_run=2.0))
    assert marked.tests["fail_fast"]["pre_run"] == "not_worth"
    assert "resolve rate 0.67" in marked.tests["fail_fast"]["why"] and marked.tests["cost"]["test_run"] == 2.0


@pytest.mark.docker
@pytest.mark.timeout(900)
async def test_reward_fn_decides_from_its_own_gradings(tasks_micro_images, tasks_wrong_patch):
    """Through grading_reward_fn as both trainers build it: the gold runs the pre-run (nothing known yet) and
    then the full run; the next patch pre-runs or not exactly as the gold's two costs say, and the verdict is
    the full run's either way (unresolved, no failure)."""
    from swe_rl.grading.grader import docker_factory
    from swe_rl.rollout.context import grading_reward_fn

    task = tasks_micro_images["swe-rl-micro__textkit-1"]
    reward = grading_reward_fn(docker_factory(run_id="tasks-ffpolicy"), fail_fast=True)
    gold = await reward(task, task.patch)
    assert (gold.reward, gold.resolved, gold.tests["fail_fast"]["pre_run"]) == (1.0, True, "passed")
    cost = gold.tests["cost"]
    pays = cost["failfast"] < (1 - 2 / 3) * cost["test_run"]  # one resolved grading: p = (1 + 1) / (1 + 2)
    wrong = await reward(task, tasks_wrong_patch)
    assert (wrong.reward, wrong.resolved, wrong.failure) == (0.0, False, None), wrong.log[-800:]
    if pays:  # the pre-run ran and stopped at the failing F2P test: no full run
        assert "failed" in wrong.tests["fail_fast"] and "test_run" not in wrong.tests["cost"], wrong.tests
    else:  # the pre-run was left out: the full run alone
        assert wrong.tests["fail_fast"]["pre_run"] == "not_worth", wrong.tests.get("fail_fast")
        assert "failfast" not in wrong.tests["cost"] and "test_run" in wrong.tests["cost"], wrong.tests
