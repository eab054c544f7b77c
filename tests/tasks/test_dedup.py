"""Identical patches graded once (swe_rl.grading.dedup) and the per-phase cost record (swe_rl.grading.cost)."""

from __future__ import annotations

import asyncio
import time

from swe_rl.grading.cost import Cost, summary
from swe_rl.grading.dedup import DedupGrader, normalize_patch, patch_key
from swe_rl.grading.reward import RewardResult
from swe_rl.tasks.task import Task

PATCH = (
    "diff --git a/pkg/a.py b/pkg/a.py\nindex 1a2b3c4..5d6e7f8 100644\n--- a/pkg/a.py\n+++ b/pkg/a.py\n"
    "@@ -1 +1 @@\n-x = 1\n+x = 2  \n"
)


def test_normalisation_keeps_everything_that_changes_the_tree():
    same = PATCH.replace("index 1a2b3c4..5d6e7f8 100644", "index 1a2b3c4d5e..5d6e7f8a9b 100644") + "\n\n"
    assert normalize_patch(same) == normalize_patch(PATCH)
    assert normalize_patch(PATCH.replace("x = 2  ", "x = 2")) != normalize_patch(
        PATCH
    )  # trailing spaces count
    assert normalize_patch("") == normalize_patch(" \n") == normalize_patch(None) == ""
    a, b = Task(instance_id="a__b-1", image="img:1"), Task(instance_id="a__b-1", image="img:2")
    assert patch_key(a, PATCH) != patch_key(b, PATCH)  # another image is another grading
    assert patch_key(a, PATCH) != patch_key(Task(instance_id="a__b-2", image="img:1"), PATCH)


class CountingReward:
    """A reward function that takes a while and counts its calls (stands in for a sandboxed grading)."""

    def __init__(self, reward: float | None = 1.0):
        self.calls = 0
        self.reward = reward

    async def __call__(self, task: Task, patch: str) -> RewardResult:
        self.calls += 1
        await asyncio.sleep(0.05)
        tests = {"cost": {"test_run": 0.05, "total": 0.05}}
        return RewardResult(
            self.reward, bool(self.reward), tests, failure=None if self.reward is not None else "x"
        )


async def test_a_group_grades_each_distinct_patch_once_even_when_it_arrives_together():
    fn = CountingReward()
    grader = DedupGrader(fn)
    task = Task(instance_id="a__b-1", image="img:1")
    other = PATCH.replace("x = 2", "x = 3")
    results = await asyncio.gather(*(grader(task, p) for p in [PATCH] * 5 + [other] * 2 + ["", " "]))
    assert fn.calls == 3 and grader.graded == 3 and grader.saved == 6
    hits = [bool(r.tests["cost"].get("dedup_hit")) for r in results]
    assert sum(hits) == 6 and all(r.reward == 1.0 for r in results)
    assert summary(r.tests["cost"] for r in results)["gradings"] == 3  # shared ones cost nothing
    await grader(task, PATCH)
    assert fn.calls == 3  # the same scope: still shared
    grader.new_scope()
    await grader(task, PATCH)
    assert fn.calls == 4  # a new step grades it again


async def test_an_infrastructure_failure_is_never_shared():
    fn = CountingReward(reward=None)
    grader = DedupGrader(fn)
    task = Task(instance_id="a__b-1", image="img:1")
    results = await asyncio.gather(*(grader(task, PATCH) for _ in range(3)))
    assert all(r.reward is None for r in results) and fn.calls == 3 and grader.saved == 0


def test_cost_phases_nest_and_exclude_each_other():
    cost = Cost()
    with cost.phase("test_run"):
        time.sleep(0.02)
        with cost.phase("copy_back"):
            time.sleep(0.03)
        time.sleep(0.02)
    d = cost.as_dict()
    assert 0.035 <= d["test_run"] < 0.2 and 0.025 <= d["copy_back"] < 0.2
    assert d["total"] >= d["test_run"] + d["copy_back"] - 1e-3
