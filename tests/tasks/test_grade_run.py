"""`grade_predictions` (what `swe-rl grade` runs): per-instance files, swebench-format summary, resumability,
infra failures retried on rerun; `swe-rl tasks build-images` on the micro suite."""

from __future__ import annotations

import asyncio
import json

import pytest

from swe_rl.grading.grade_run import grade_predictions, load_predictions
from swe_rl.grading.grader import docker_factory, grade

pytestmark = [pytest.mark.docker, pytest.mark.timeout(300)]


async def test_reports_summary_and_resume(tasks_micro_images, tmp_path):
    t = tasks_micro_images
    gold = t["swe-rl-micro__textkit-1"]
    gone = t["swe-rl-micro__textkit-2"].model_copy(update={"image": "swe-rl/missing:never"})
    empty = t["swe-rl-micro__textkit-3"]
    tasks = [gold, gone, empty]
    preds = load_predictions("gold", tasks)
    preds[empty.instance_id] = {**preds[empty.instance_id], "model_patch": ""}
    seen: list[str] = []
    factory = docker_factory(run_id="tasks-ci")

    s1 = await grade_predictions(
        tasks, preds, factory, tmp_path, workers=2, on_done=lambda i, r: seen.append(i)
    )
    assert s1["resolved_ids"] == [gold.instance_id] and s1["empty_patch_ids"] == [empty.instance_id]
    assert s1["error_ids"] == s1["infra_failure_ids"] == [gone.instance_id]
    assert s1["failure_reasons"] == {gone.instance_id: "image_missing"}
    assert s1["schema_version"] == 2 and s1["total_instances"] == 3
    report = json.loads((tmp_path / gold.instance_id / "report.json").read_text())[gold.instance_id]
    assert (
        report["resolved"] is True
        and report["reward"] == 1.0
        and report["tests_status"]["FAIL_TO_PASS"]["failure"] == []
    )
    assert (tmp_path / gold.instance_id / "patch.diff").read_text() == gold.patch
    assert ">>>>> Start Test Output" in (tmp_path / gold.instance_id / "test_output.txt").read_text()
    assert json.loads((tmp_path / "summary.json").read_text()) == s1

    seen.clear()  # rerun: the finished instance is skipped, the infra failure is retried
    s2 = await grade_predictions(
        tasks, preds, factory, tmp_path, workers=2, on_done=lambda i, r: seen.append(i)
    )
    assert gold.instance_id not in seen and gone.instance_id in seen
    assert s2["resolved_ids"] == s1["resolved_ids"]


async def test_sandbox_killed_mid_eval_is_an_infra_failure(tasks_micro_images):
    """A container killed while the tests run: reward None with a sandbox label, never a 0 for the policy."""
    import subprocess

    t = tasks_micro_images["swe-rl-micro__textkit-4"]
    slow = t.model_copy(
        update={"eval_script": t.eval_script.replace("python3 -m pytest", "sleep 60; python3 -m pytest")}
    )
    made = []
    base = docker_factory(run_id="tasks-ci")

    def factory(task):
        sb = base(task)
        made.append(sb)
        return sb

    async def killer():
        for _ in range(200):  # wait until the eval script is running, then kill the container from outside
            await asyncio.sleep(0.2)
            if made and made[0].id != made[0].name:
                out = subprocess.run(["docker", "top", made[0].id], capture_output=True, text=True).stdout
                if "sleep 60" in out:
                    subprocess.run(["docker", "kill", made[0].id], capture_output=True)
                    return

    # attempts=1: the label itself (the retry in a fresh sandbox is tested in test_grading.py)
    result, _ = await asyncio.gather(grade(slow, t.patch, factory, timeout=120, attempts=1), killer())
    assert result.reward is None and result.failure in ("sandbox_died", "sandbox_error"), (
        result.failure,
        result.log,
    )
    assert len(made) == 1


def test_build_images_cli(tasks_micro_images):
    from typer.testing import CliRunner

    from swe_rl.cli import app

    res = CliRunner().invoke(app, ["tasks", "build-images", "--id", "swe-rl-micro__confini-1"])
    assert res.exit_code == 0 and "present" in res.output and "swe-rl/micro:confini-1" in res.output


def test_prebuilt_image_sources_report_missing_images(tasks_micro_images):
    from swe_rl.images.task_images import ensure_images

    present = tasks_micro_images["swe-rl-micro__textkit-1"]
    absent = present.model_copy(update={"instance_id": "x__y-1", "image": "registry.invalid/none/img:1"})
    got = {r.instance_id: r for r in ensure_images([present, absent])}
    assert got[present.instance_id].status == "present"
    assert got["x__y-1"].status == "failed" and "registry.invalid" in got["x__y-1"].error


def test_stale_images_are_detected(tasks_micro_images):
    from pathlib import Path

    from swe_rl.images.task_images import is_current

    t = tasks_micro_images["swe-rl-micro__exprcalc-1"]
    dockerfile = Path(t.metadata["task_dir"]) / "Dockerfile"
    assert is_current(t.image, dockerfile, t.base_commit)
    assert not is_current(t.image, dockerfile, "0" * 40)  # the task changed since the image was built
    assert not is_current("swe-rl/missing:never", dockerfile, t.base_commit)
