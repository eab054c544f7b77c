"""`--grader official`: swebench's run_evaluation grades the run's predictions; the report matches our grader's."""

from __future__ import annotations

import pytest

from swe_rl.evaluation.harness import load_eval_tasks, run_eval

pytestmark = [pytest.mark.docker, pytest.mark.slow]


def test_official_grader_gives_the_same_report(eval_config_factory, eval_report_reader, tmp_path):
    tasks = load_eval_tasks(eval_config_factory(tmp_path, "probe").dataset)[:2]
    ids = "dataset.instances=[" + ",".join(t.instance_id for t in tasks) + "]"
    common = ("pool.backend=local", ids)
    ours = run_eval(eval_config_factory(tmp_path, "ours", *common))
    official = run_eval(eval_config_factory(tmp_path, "official", "grader=official", *common))
    assert official["counts"]["resolved"] == 2 == ours["counts"]["resolved"]
    a = eval_report_reader(tmp_path / "ours" / "report" / "report.json")
    b = eval_report_reader(tmp_path / "official" / "report" / "report.json")
    a.pop("grader"), b.pop("grader")
    assert a == b
    record = (tmp_path / "official" / "grading" / "run_00" / f"{tasks[0].instance_id}.json").read_text()
    assert '"grader": "official"' in record and "FAIL_TO_PASS" in record
