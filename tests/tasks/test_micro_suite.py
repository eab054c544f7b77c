"""The bundled micro suite: well formed (swebench's own checker), loadable as Tasks, internally consistent."""

from __future__ import annotations

import pytest

from swe_rl.tasks.loaders import MICRO_SUITE, load_tasks

pytestmark = pytest.mark.timeout(120)


def test_swebench_checker_finds_only_the_local_image_naming():
    from swebench.task.checks import check_task_repo

    problems = [str(p) for p in check_task_repo(MICRO_SUITE)]
    # our images live in the local swe-rl/micro namespace, not swebench's derived registry names
    assert [p for p in problems if "is not the derived name" not in p] == []


def test_micro_suite_loads_as_tasks():
    tasks = load_tasks("micro")
    assert len(tasks) >= 4
    repos = {t.repo for t in tasks}
    assert all(r.startswith("swe-rl-micro/") for r in repos)
    for t in tasks:
        assert t.FAIL_TO_PASS, t.instance_id
        assert not set(t.FAIL_TO_PASS) & set(t.PASS_TO_PASS), t.instance_id
        assert t.patch.startswith("diff --git a/") and t.test_patch.startswith("diff --git a/")
        assert len(t.base_commit) == 40 and t.base_commit in t.eval_script
        assert t.image.startswith("swe-rl/micro:")
        assert t.log_parser == "parse_log_pytest" and t.eval_type == "pass_and_fail"
        assert ">>>>> Start Test Output" in t.eval_script and ">>>>> End Test Output" in t.eval_script
        assert t.metadata["split"] == "test" and t.metadata["task_dir"].endswith(t.instance_id)
        assert "Traceback" in t.problem_statement or "```" in t.problem_statement  # issue-style, with a repro


def test_gold_patches_touch_source_and_test_patches_touch_tests():
    for t in load_tasks("micro"):
        gold_files = [ln.split(" b/")[-1] for ln in t.patch.splitlines() if ln.startswith("diff --git")]
        test_files = [ln.split(" b/")[-1] for ln in t.test_patch.splitlines() if ln.startswith("diff --git")]
        assert gold_files and not any(f.startswith("tests/") for f in gold_files), t.instance_id
        assert test_files and all(f.startswith("tests/") for f in test_files), t.instance_id
        for f in test_files:  # F2P names come from the files the test patch touches
            assert any(name.startswith(f + "::") for name in t.FAIL_TO_PASS + t.PASS_TO_PASS)
