"""The micro-task generator: deterministic, disjoint splits, mixed families, and expert fixes that really fix."""

from __future__ import annotations

import random
import subprocess
from collections import Counter

import pytest

from swe_rl.tasks.generator import FAMILIES, expert_actions, generate_tasks, sample_batch, split_of
from swe_rl.tasks.task import Task


def _run_tests(tmp_path, task: Task, patch: str | None) -> str:
    repo = tmp_path / task.instance_id
    repo.mkdir()
    for p, t in task.metadata["files"].items():
        (repo / p).write_text(t)
    subprocess.run(["git", "init", "-q"], cwd=repo, check=True)
    if patch is not None:
        subprocess.run(["git", "apply", "-"], cwd=repo, input=patch, text=True, check=True)
    for p, t in task.metadata["test_files"].items():
        (repo / p).write_text(t)
    return subprocess.run(["python3", "test_calc.py"], cwd=repo, capture_output=True, text=True).stdout


def test_deterministic_and_valid():
    a = generate_tasks(30, "train", seed=3)
    b = generate_tasks(30, "train", seed=3)
    assert [t.model_dump() for t in a] == [t.model_dump() for t in b]
    assert a[0].model_dump() != generate_tasks(1, "train", seed=4)[0].model_dump()
    for t in a:
        src = t.metadata["files"]["calc.py"]
        assert src.count(t.metadata["expert"]["old"]) == 1  # the expert's replace is unambiguous
        assert t.problem_statement and t.FAIL_TO_PASS and t.PASS_TO_PASS


def test_splits_are_disjoint_combinations():
    def key(t):
        bug = t.FAIL_TO_PASS[0].split("::test_")[1]
        return (t.metadata["family"], bug, t.metadata["expert"]["new"])

    train = generate_tasks(300, "train", seed=0)
    held = generate_tasks(100, "held_out", seed=0)
    assert all(t.metadata["split"] == "train" for t in train)
    assert {key(t) for t in train}.isdisjoint({key(t) for t in held})
    for t in held:
        fam, name, _ = key(t)
        assert any(split_of(fam, name, k) == "held_out" for k in "23456789")


def test_batches_mix_families():
    tasks = generate_tasks(200, "train", seed=0)
    batch = sample_batch(tasks, 12, random.Random(0))
    counts = Counter(t.metadata["family"] for t in batch)
    assert len(counts) == len(FAMILIES)
    assert max(counts.values()) == 2


@pytest.mark.parametrize("index", range(3))
def test_gold_patch_fixes_and_base_fails(tmp_path, index):
    task = generate_tasks(3, "held_out", seed=1)[index]
    before = _run_tests(tmp_path / "a", task, None) if (tmp_path / "a").mkdir() is None else ""
    after = _run_tests(tmp_path / "b", task, task.patch) if (tmp_path / "b").mkdir() is None else ""
    f2p = task.FAIL_TO_PASS[0]
    assert f"FAILED {f2p}" in before
    assert all(f"PASSED {t}" in before for t in task.PASS_TO_PASS)
    assert all(f"PASSED {t}" in after for t in task.FAIL_TO_PASS + task.PASS_TO_PASS)


def test_flawed_fix_fails_the_tests_in_every_family(tmp_path):
    """The flawed expert's fix (off-by-one constant) is the expert's edit with one token changed, and it fails."""
    tasks = generate_tasks(60, "train", seed=2)
    by_family = {t.metadata["family"]: t for t in tasks}
    assert set(by_family) == set(FAMILIES)
    for fam, task in by_family.items():
        ex = task.metadata["expert"]
        assert ex["flawed_new"] != ex["new"] and len(ex["flawed_new"]) == len(ex["new"])
        flawed_patch = task.patch.replace(f"+    return {ex['new']}", f"+    return {ex['flawed_new']}")
        assert flawed_patch != task.patch
        (tmp_path / fam).mkdir()
        out = _run_tests(tmp_path / fam, task, flawed_patch)
        assert f"FAILED {task.FAIL_TO_PASS[0]}" in out, (fam, ex, out)
    acts = expert_actions(task, flawed=True)
    assert acts[1][1]["new_str"] == task.metadata["expert"]["flawed_new"]


def test_expert_actions_shape():
    t = generate_tasks(1, "train", seed=0)[0]
    acts = expert_actions(t)
    assert [a[0] for a in acts] == ["file_editor", "file_editor", "submit"]
    assert acts[1][1]["old_str"] == t.metadata["expert"]["old"]
    with pytest.raises(ValueError, match="split"):
        generate_tasks(1, "test")
