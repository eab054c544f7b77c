"""Loaders: local files, task repos, HF names offline; one clear error per bad row naming file, row and field."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys

import pytest
from typer.testing import CliRunner

from swe_rl.cli import app
from swe_rl.grading.grader import instance_dict
from swe_rl.tasks.loaders import MICRO_SUITE, TaskLoadError, load_tasks


def _rows(tasks_micro, n=3):
    return [instance_dict(t) for t in list(tasks_micro.values())[:n]]


def test_jsonl_json_and_parquet_round_trip(tasks_micro, tmp_path, tasks_write_jsonl):
    rows = _rows(tasks_micro)
    for r in rows:  # SWE-bench datasets store the test lists as JSON strings
        r["FAIL_TO_PASS"], r["PASS_TO_PASS"] = json.dumps(r["FAIL_TO_PASS"]), json.dumps(r["PASS_TO_PASS"])
    want = [tasks_micro[r["instance_id"]].model_copy(update={"metadata": {}}) for r in rows]
    jsonl = tasks_write_jsonl(tmp_path / "d.jsonl", rows)
    (tmp_path / "d.json").write_text(json.dumps(rows))
    import datasets

    datasets.Dataset.from_list(rows).to_parquet(str(tmp_path / "d.parquet"))
    for path in (jsonl, tmp_path / "d.json", tmp_path / "d.parquet"):
        got = load_tasks(path)
        assert [t.model_copy(update={"metadata": {}}) for t in got] == want, path
    only = load_tasks(jsonl, instance_ids=[rows[1]["instance_id"]])
    assert [t.instance_id for t in only] == [rows[1]["instance_id"]]


def test_bad_rows_are_each_reported_with_file_row_and_field(tasks_micro, tmp_path, tasks_write_jsonl):
    rows = _rows(tasks_micro, 4)
    del rows[0]["image"]
    rows[1]["FAIL_TO_PASS"] = "[not json"
    rows[2]["log_parser"] = "parse_log_nonsense"
    rows[3]["eval_type"] = "sometimes"
    path = tasks_write_jsonl(tmp_path / "bad.jsonl", rows)
    with pytest.raises(TaskLoadError) as e:
        load_tasks(path)
    lines = str(e.value).splitlines()
    assert lines[0] == "4 bad row(s):"
    ids = [r["instance_id"] for r in rows]
    assert f"{path}: row 0 ({ids[0]}): field 'image': missing (required for grading)" in lines
    assert any(
        ln.startswith(f"{path}: row 1 ({ids[1]}): field 'FAIL_TO_PASS'") and "not JSON" in ln for ln in lines
    )
    assert any(
        f"row 2 ({ids[2]}): field 'log_parser': unknown parser 'parse_log_nonsense'" in ln for ln in lines
    )
    assert any(f"row 3 ({ids[3]}): field 'eval_type'" in ln for ln in lines)


def test_broken_task_repo_names_the_task_directory(tmp_path):
    repo = tmp_path / "repo"
    shutil.copytree(
        MICRO_SUITE / "tasks" / "swe-rl-micro__textkit-1", repo / "tasks" / "swe-rl-micro__textkit-1"
    )
    tests = repo / "tasks" / "swe-rl-micro__textkit-1" / "tests.json"
    tests.write_text(json.dumps({"FAIL_TO_PASS": {"a": 1}, "PASS_TO_PASS": []}))
    with pytest.raises(
        TaskLoadError, match=r"tasks/swe-rl-micro__textkit-1/ \(task.yaml, tests.json\): field 'FAIL_TO_PASS'"
    ):
        load_tasks(repo)
    with pytest.raises(TaskLoadError, match="tasks/ subdirectory"):
        load_tasks(tmp_path)
    with pytest.raises(TaskLoadError, match="instance id"):
        load_tasks("micro", instance_ids=["nope"])


def test_unknown_source_and_malformed_files(tmp_path):
    with pytest.raises(TaskLoadError, match="not found"):
        load_tasks("nothing-here")
    bad = tmp_path / "x.jsonl"
    bad.write_text('{"instance_id": "a"}\n{oops\n')
    with pytest.raises(TaskLoadError, match=r"x.jsonl: line 2: not valid JSON"):
        load_tasks(bad)


def test_hf_name_offline_says_how_to_use_local_files():
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1"}
    # a fresh interpreter, so the offline switches take effect before huggingface_hub is imported
    code = "from swe_rl.tasks.loaders import load_tasks; load_tasks('SWE-bench/SWE-bench_Verified')"
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=120)
    assert proc.returncode == 1 and "TaskLoadError" in proc.stderr
    assert "SWE-bench/SWE-bench_Verified" in proc.stderr and "point --tasks at local files" in proc.stderr


def test_cli_list_show_and_bad_predictions(tmp_path):
    runner = CliRunner()
    out = runner.invoke(app, ["tasks", "list", "--tasks", "micro"])
    assert out.exit_code == 0 and "swe-rl-micro__exprcalc-3" in out.output and "F2P=2" in out.output
    show = runner.invoke(app, ["tasks", "show", "swe-rl-micro__exprcalc-3", "--json"])
    assert show.exit_code == 0 and json.loads(show.output)["image"] == "swe-rl/micro:exprcalc-3"
    preds = tmp_path / "p.jsonl"
    preds.write_text(json.dumps({"instance_id": "unknown__x-1", "model_patch": ""}) + "\n")
    bad = runner.invoke(app, ["grade", "--predictions", str(preds), "--out", str(tmp_path / "o")])
    assert bad.exit_code == 2 and "not in the task source" in bad.output
    # a patch that is not text is one error naming the row and the field (it was a TypeError after grading began)
    preds.write_text(json.dumps({"instance_id": "swe-rl-micro__textkit-2", "model_patch": 5}) + "\n")
    typed = runner.invoke(app, ["grade", "--predictions", str(preds), "--out", str(tmp_path / "o")])
    assert typed.exit_code == 2, typed.output
    assert (
        "row 0 (swe-rl-micro__textkit-2): field 'model_patch': expected a diff (string) or null, got int"
        in (typed.output)
    )
    assert not (tmp_path / "o" / "swe-rl-micro__textkit-2").exists()


def test_duplicate_ids_are_an_error(tasks_micro, tmp_path, tasks_write_jsonl):
    row = _rows(tasks_micro, 1)[0]
    path = tasks_write_jsonl(tmp_path / "dup.jsonl", [row, row])
    with pytest.raises(TaskLoadError, match=f"duplicate instance_id\\(s\\): {row['instance_id']}"):
        load_tasks(path)
