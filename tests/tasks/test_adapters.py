"""Adapters for R2E-Gym and SWE-Gym rows (offline fixtures in the upstream row formats) and their grading paths."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from swe_rl.grading.r2e import parse_log_r2e_gym, r2e_report
from swe_rl.tasks.adapters import SWE_GYM_SPECS, swe_gym_image
from swe_rl.tasks.loaders import MICRO_SUITE, TaskLoadError, load_tasks

FIXTURES = Path(__file__).parent / "fixtures"
# the example log from R2E-Gym's execution_log_parser.__main__ (summary part), with a class-based test added
R2E_LOG = """============================= short test summary info ==============================
PASSED r2e_tests/test_1.py::test_Idx_construction
PASSED r2e_tests/test_1.py::TestIndexed::test_subs
FAILED r2e_tests/test_1.py::test_Idx_inequalities_current_fails - sympy.utilities.pytest.XFail: test_Idx
ERROR r2e_tests/test_1.py::test_setup_broken - RuntimeError
==================== 1 failed, 2 passed, 1 error in 0.57s ====================="""


def test_r2e_parser_and_exact_match_reward():
    parsed = parse_log_r2e_gym("\x1b[32m" + R2E_LOG + "\x1b[0m")
    assert parsed == {
        "test_Idx_construction": "PASSED",
        "TestIndexed.test_subs": "PASSED",
        "test_Idx_inequalities_current_fails": "FAILED",
        "test_setup_broken": "ERROR",
    }
    assert r2e_report(R2E_LOG, parsed)["resolved"] is True
    missing = {**parsed, "test_extra": "PASSED"}
    assert r2e_report(R2E_LOG, missing)["resolved"] is False
    flipped = {**parsed, "test_Idx_inequalities_current_fails": "PASSED"}
    assert r2e_report(R2E_LOG, flipped)["r2e"]["mismatched"] == ["test_Idx_inequalities_current_fails"]
    assert parse_log_r2e_gym("no summary here") == {}


def test_r2e_row_becomes_task(tmp_path):
    (t,) = load_tasks(FIXTURES / "r2e_gym_rows.jsonl")
    row = json.loads((FIXTURES / "r2e_gym_rows.jsonl").read_text())
    import datasets

    datasets.Dataset.from_list([row]).to_parquet(str(tmp_path / "r2e.parquet"))  # HF shards are parquet
    assert load_tasks(tmp_path / "r2e.parquet") == [t]
    assert t.image == row["docker_image"] and t.repo == "textkit"
    assert t.problem_statement.startswith("wrap() breaks lines")  # [ISSUE] ... [/ISSUE] stripped
    assert t.metadata["grader"] == "r2e_gym" and t.metadata["setup_script"]
    assert t.metadata["expected_output"] == json.loads(row["expected_output_json"])
    assert t.base_commit == json.loads(row["parsed_commit_content"])["old_commit_hash"]
    # the gold patch is the commit's non-test python files, rebuilt from the ParsedCommit JSON
    micro_gold = (MICRO_SUITE / "tasks/swe-rl-micro__textkit-5/gold.patch").read_text()
    assert "tests/test_wrap.py" not in t.patch
    assert t.patch.split("@@", 1)[1] == micro_gold.split("@@", 1)[1]


def test_swe_gym_rows_become_tasks():
    from swebench.harness.utils import make_test_spec

    from swe_rl.grading.grader import instance_dict

    tasks = load_tasks(FIXTURES / "swe_gym_rows.jsonl")
    moto = next(t for t in tasks if t.repo == "getmoto/moto")
    assert moto.image == "xingyaoww/sweb.eval.x86_64.getmoto_s_moto-5865" == swe_gym_image(moto.instance_id)
    assert moto.log_parser == "parse_log_pytest" and moto.metadata["source"] == "swe-gym"
    spec = make_test_spec(instance_dict(moto))  # swebench accepts the adapted row as a 5.x instance
    assert f"{SWE_GYM_SPECS['getmoto/moto'][0]} tests/test_s3/test_s3_tagging.py" in spec.eval_script
    assert "conda activate testbed" in spec.eval_script and ">>>>> Test Exit Code" in spec.eval_script


def test_unknown_rows_fail_with_file_row_and_field(tmp_path):
    row = json.loads((FIXTURES / "swe_gym_rows.jsonl").read_text().splitlines()[0])
    row["repo"] = "someone/elsewhere"  # no SWE-Gym spec, no 5.x eval_script: not gradable
    path = tmp_path / "rows.jsonl"
    path.write_text(json.dumps(row) + "\n")
    with pytest.raises(TaskLoadError) as e:
        load_tasks(path)
    msg = str(e.value)
    assert f"{path}: row 0 (getmoto__moto-5865): field 'image'" in msg and "field 'eval_script'" in msg


@pytest.fixture(scope="module")
def tasks_r2e_image(tasks_micro_images, tmp_path_factory):
    """A local image in R2E-Gym's layout: repo at /testbed, hidden tests in /r2e_tests, /testbed/run_tests.sh."""
    from swe_rl.images.task_images import default_builder

    ctx = tmp_path_factory.mktemp("r2e")
    (ctx / "test_1.py").write_text((MICRO_SUITE / "repos/textkit/tests/test_wrap.py").read_text())
    (ctx / "Dockerfile").write_text(
        "FROM swe-rl/micro:textkit-5\nCOPY test_1.py /r2e_tests/test_1.py\n"
        "RUN touch /r2e_tests/__init__.py && printf 'python3 -m pytest -rA -p no:cacheprovider r2e_tests\\n'"
        " > /testbed/run_tests.sh\n"
    )
    default_builder()("swe-rl/test-r2e:textkit-wrap", ctx / "Dockerfile", ctx)
    (t,) = load_tasks(FIXTURES / "r2e_gym_rows.jsonl")
    return t


@pytest.mark.docker
@pytest.mark.timeout(300)
async def test_r2e_task_grades_like_r2e_gym(tasks_r2e_image):
    from swe_rl.grading.grader import docker_factory, grade

    t, factory = tasks_r2e_image, docker_factory(run_id="tasks-ci")
    gold, empty = await grade(t, t.patch, factory), await grade(t, "", factory)
    assert (gold.reward, gold.failure) == (1.0, None), gold.log[-2000:]
    assert empty.reward == 0.0 and empty.tests["r2e"]["mismatched"] == [
        "test_wrap_line_of_exact_width_is_kept"
    ]
