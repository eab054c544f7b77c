"""Instance validation (issue 44 item 4): the gold patch graded once per image; PASS_TO_PASS tests it fails for a
named environmental reason (no network in the sandbox) are recorded with the reason and log line and left out of
every verdict; a FAIL_TO_PASS test that cannot pass here makes the instance ungradeable; any other failure stays.

The docker tests use generated tasks on the sandbox base image (their repo is written at start): a test that
connects to an outside address fails at once in a sandbox without network (ENETUNREACH).
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from swe_rl.grading import docker_factory, grade, grade_predictions, validate_tasks
from swe_rl.grading.validate import CACHE_ENV
from swe_rl.tasks.task import Task
from swe_rl.tasks.validation import (
    assess,
    environmental_reason,
    graded_summary,
    graded_task,
    validation_of,
)

CALC = "def add(a, b):\n    return a - b\n\n\ndef mul(a, b):\n    return a * b\n"
TESTS = textwrap.dedent("""
    import socket

    from calc import add, mul

    OUTSIDE = ("10.255.255.1", 80)  # requests' own tarpit address: unreachable without network


    def test_add():
        assert add(2, 3) == 5


    def test_mul():
        assert mul(2, 3) == 6


    def test_fetch():
        socket.create_connection(OUTSIDE, timeout=5).close()


    def test_remote_add():
        socket.create_connection(OUTSIDE, timeout=5).close()
        assert add(2, 3) == 5


    def test_wrong():
        assert mul(2, 3) == 7


    def test_local_server():
        socket.create_connection(("127.0.0.1", 9), timeout=5).close()
""")


def _diff(old: str, new: str) -> str:
    return (
        "diff --git a/calc.py b/calc.py\n--- a/calc.py\n+++ b/calc.py\n@@ -1,2 +1,2 @@\n"
        f" def add(a, b):\n-    return {old}\n+    return {new}\n"
    )


GOLD = _diff("a - b", "a + b")
# fixes add, breaks the left-out test's neighbour
BREAKS_MUL = GOLD + "@@ -5,2 +5,2 @@\n def mul(a, b):\n-    return a * b\n+    return 0\n"
# fixes add, and makes the neighbour fail the way the left-out test does (as if it, too, needed the network)
MUL_NEEDS_NETWORK = GOLD + (
    "@@ -5,2 +5,3 @@\n def mul(a, b):\n"
    "+    __import__('socket').create_connection(('10.255.255.1', 80), timeout=5)\n"
    "     return a * b\n"
)


def _task(iid: str, f2p: list[str], p2p: list[str]) -> Task:
    files = {"calc.py": CALC, "tests/test_calc.py": TESTS}
    return Task(
        instance_id=f"v44__{iid}", repo="swe-rl/netcalc", base_commit="", problem_statement="add() subtracts",
        patch=GOLD, test_patch="", FAIL_TO_PASS=[f"tests/test_calc.py::{t}" for t in f2p],
        PASS_TO_PASS=[f"tests/test_calc.py::{t}" for t in p2p], version="0",
        image="swe-rl/base:bookworm", log_parser="parse_log_pytest", metadata={"files": files},
        eval_script="cd /testbed && python3 -m pytest -rA -p no:cacheprovider tests",
    )  # fmt: skip


NET = _task("net-1", ["test_add"], ["test_mul", "test_fetch"])
F2P_NET = _task("net-2", ["test_remote_add"], ["test_mul"])
NOT_ENV = _task("net-3", ["test_add"], ["test_mul", "test_wrong", "test_local_server"])


class _NoSandbox:
    def __call__(self, task):
        raise AssertionError(f"validation ran again for {task.instance_id}: the cache should have served it")


@pytest.mark.docker
@pytest.mark.timeout(900)
async def test_validation_leaves_out_only_named_environmental_failures(tmp_path, monkeypatch):
    monkeypatch.setenv(CACHE_ENV, str(tmp_path / "cache"))
    factory = docker_factory(run_id="tasks-validation")
    net, f2p_net, not_env = await validate_tasks([NET, F2P_NET, NOT_ENV], factory)

    record = net.metadata["validation"]
    assert record["status"] == "left_out", record
    (item,) = record["left_out"]
    assert item["test"] == "tests/test_calc.py::test_fetch" and item["reason"] == "network unreachable", item
    assert "Network is unreachable" in item["line"] or "Errno 101" in item["line"], item
    assert graded_task(net).PASS_TO_PASS == ["tests/test_calc.py::test_mul"]

    gold = await grade(net, net.patch, factory)
    shown = gold.tests["validation"]
    assert gold.resolved and gold.reward == 1.0 and gold.suspicious == (), gold.log[-2000:]
    assert shown["summary"] == (
        "graded on 1 of 2 PASS_TO_PASS; left out: tests/test_calc.py::test_fetch (network unreachable)"
    )
    assert gold.tests["tests_status"]["PASS_TO_PASS"]["success"] == ["tests/test_calc.py::test_mul"]
    # a patch cannot use the left-out list: its neighbour stays graded, and a failure that looks environmental
    # in a patch's run is not left out (the list comes from gold, at validation)
    for exploit in (BREAKS_MUL, MUL_NEEDS_NETWORK):
        r = await grade(net, exploit, factory)
        assert r.tests.get("patch_successfully_applied", True), r.log[-1500:]
        assert not r.resolved and r.reward == 0.0, (exploit, r.tests.get("tests_status"))
        assert r.tests["tests_status"]["PASS_TO_PASS"]["failure"] == ["tests/test_calc.py::test_mul"]
    assert not (await grade(net, "", factory)).resolved

    # FAIL_TO_PASS needs the network: ungradeable, never resolved (masked in training, reported in evaluation)
    assert f2p_net.metadata["validation"]["status"] == "ungradeable"
    assert "network unreachable" in f2p_net.metadata["validation"]["ungradeable"]
    r = await grade(f2p_net, f2p_net.patch, factory)
    assert (r.reward, r.resolved, r.failure) == (None, False, "ungradeable"), r

    # gold fails a test for no environmental reason (a wrong assertion, a refused local connection): not left out
    record = not_env.metadata["validation"]
    assert record["status"] == "gold_unresolved" and record["left_out"] == [], record
    assert sorted(g["test"] for g in record["gold_failing"]) == [
        "tests/test_calc.py::test_local_server",
        "tests/test_calc.py::test_wrong",
    ]
    r = await grade(not_env, not_env.patch, factory)
    assert not r.resolved and len(r.tests["tests_status"]["PASS_TO_PASS"]["failure"]) == 2

    # once per image: the next use reads the cache and grades nothing
    again = await validate_tasks([NET, F2P_NET, NOT_ENV], _NoSandbox())
    assert [t.metadata["validation"] for t in again] == [
        t.metadata["validation"] for t in (net, f2p_net, not_env)
    ]


@pytest.mark.docker
@pytest.mark.timeout(900)
async def test_grade_predictions_says_what_each_verdict_measured(tmp_path, monkeypatch):
    """`swe-rl grade`'s door: it validates first, and its summary names the left-out tests and the ungradeable."""
    monkeypatch.setenv(CACHE_ENV, str(tmp_path / "cache"))
    preds = {t.instance_id: {"instance_id": t.instance_id, "model_patch": t.patch} for t in (NET, F2P_NET)}
    out = tmp_path / "out"
    summary = await grade_predictions([NET, F2P_NET], preds, docker_factory(run_id="tasks-validation"), out)
    assert summary["resolved_ids"] == [NET.instance_id] and summary["ungradeable_ids"] == [
        F2P_NET.instance_id
    ]
    assert summary["validation"][NET.instance_id].startswith("graded on 1 of 2 PASS_TO_PASS; left out: ")
    assert summary["validation"][F2P_NET.instance_id].startswith("ungradeable here: ")
    report = json.loads((out / NET.instance_id / "report.json").read_text())[NET.instance_id]
    assert report["validation"]["left_out"][0]["test"] == "tests/test_calc.py::test_fetch"

    # `swe-rl tasks validate -o`: the rows with their records (from the cache now), read back by the loader
    from swe_rl.tasks.loaders import load_tasks

    rows, validated = tmp_path / "rows.jsonl", tmp_path / "validated.jsonl"
    rows.write_text("".join(t.model_dump_json() + "\n" for t in (NET, F2P_NET)))
    swe_rl = str(Path(sys.executable).with_name("swe-rl"))
    cmd = [swe_rl, "tasks", "validate", "--tasks", str(rows), "-o", str(validated)]
    res = subprocess.run(cmd, capture_output=True, text=True, timeout=600)  # the cache env var is inherited
    assert res.returncode == 0, res.stdout + res.stderr
    assert f"{NET.instance_id}\tleft_out\tgraded on 1 of 2 PASS_TO_PASS; left out: " in res.stdout
    assert f"{F2P_NET.instance_id}\tungradeable\tungradeable here: " in res.stdout
    back = {t.instance_id: t for t in load_tasks(str(validated))}
    assert graded_summary(back[NET.instance_id]) == summary["validation"][NET.instance_id]


LOG = textwrap.dedent("""
    ____________________________ TestTimeout.test_connect_timeout ____________________________
        def test_connect_timeout(self):
    E   requests.exceptions.ConnectionError: HTTPConnectionPool(host='10.255.255.1', port=80): Max retries exceeded (Caused by NewConnectionError('Failed to establish a new connection: [Errno 101] Network is unreachable'))
    ____________________________ TestTimeout.test_connect_timeout_local ______________________
    E   ConnectionRefusedError: [Errno 111] Connection refused
    ____________________________ test_remote_refused ____________________________
    E   urllib3.exceptions.NewConnectionError: HTTPSConnectionPool(host='example.org', port=443): [Errno 111] Connection refused
    ____________________________ test_plain ____________________________
    E   assert 2 == 3
    =========================== short test summary info ============================
    FAILED t.py::TestTimeout::test_connect_timeout - requests.excepti...
    FAILED t.py::TestTimeout::test_connect_timeout_local - ConnectionRefusedError...
    FAILED t.py::test_remote_refused - urllib3...
    FAILED t.py::test_plain - assert 2 == 3
""")


def test_reasons_are_read_from_the_test_s_own_part_of_the_log():
    reason, line = environmental_reason(LOG, "t.py::TestTimeout::test_connect_timeout")
    assert reason == "network unreachable" and "host='10.255.255.1'" in line
    # a refused connection counts only to an outside host; the name's prefix never lends its neighbour a reason
    assert environmental_reason(LOG, "t.py::TestTimeout::test_connect_timeout_local") is None
    assert (
        environmental_reason(LOG, "t.py::test_remote_refused")[0] == "connection refused by an outside host"
    )
    assert environmental_reason(LOG, "t.py::test_plain") is None
    assert environmental_reason(LOG, "t.py::test_absent") is None


# a sphinx test's section: the app fixture prints its warnings at teardown, inside the failing test's section
SPHINX_LOG = textwrap.dedent("""
    _______________________________ test_html_remote_images _______________________________
    E       assert '<img alt="https://www.python.org/static/img/rtd.png"' in content
    ------------------------------ Captured stdout teardown ------------------------------
    # warning:
    WARNING: Could not fetch remote image: https://www.python.org/static/img/rtd.png [HTTPSConnectionPool(host='www.python.org', port=443): Max retries exceeded (Caused by NameResolutionError("Failed to resolve 'www.python.org' ([Errno -3] Temporary failure in name resolution)"))]
    _______________________________ test_html_local_images _______________________________
    E       assert 'img/local.png' in content
    ================================ short test summary info =============================
""")


def test_a_remote_image_sphinx_cannot_fetch_is_a_name_resolution_failure():
    reason, line = environmental_reason(SPHINX_LOG, "tests/test_build_html.py::test_html_remote_images")
    assert reason == "name resolution failure" and line.startswith("WARNING: Could not fetch remote image"), (
        line
    )
    assert environmental_reason(SPHINX_LOG, "tests/test_build_html.py::test_html_local_images") is None


def test_assess_and_the_report_line():
    task = _task("unit", ["test_add"], ["test_mul", "test_fetch", "test_plain"])
    status = {
        "FAIL_TO_PASS": {"success": ["tests/test_calc.py::test_add"], "failure": []},
        "PASS_TO_PASS": {"success": ["tests/test_calc.py::test_mul"],
                         "failure": ["tests/test_calc.py::test_fetch", "tests/test_calc.py::test_plain"]},
    }  # fmt: skip
    log = LOG.replace("TestTimeout.test_connect_timeout _", "test_fetch _")
    record = assess(task, status, log)
    assert record["status"] == "gold_unresolved", record  # test_plain has no nameable reason: kept
    assert [i["test"] for i in record["left_out"]] == ["tests/test_calc.py::test_fetch"]
    assert [g["test"] for g in record["gold_failing"]] == ["tests/test_calc.py::test_plain"]
    shown = task.model_copy(update={"metadata": {**task.metadata, "validation": record}})
    assert graded_summary(shown) == (
        "graded on 2 of 3 PASS_TO_PASS; left out: tests/test_calc.py::test_fetch (network unreachable); gold "
        "fails here with no nameable reason (kept, gold unresolved): tests/test_calc.py::test_plain"
    )
    assert graded_task(shown).PASS_TO_PASS == [
        "tests/test_calc.py::test_mul",
        "tests/test_calc.py::test_plain",
    ]


@pytest.mark.parametrize(
    ("record", "field"),
    [
        ({"status": "fine"}, "metadata.validation.status"),
        ({"status": "left_out", "left_out": [{"test": "tests/test_calc.py::test_add", "reason": "x", "line": "y"}]},
         "metadata.validation.left_out[0].test"),
        ({"status": "left_out", "left_out": [{"test": "tests/test_calc.py::test_mul", "reason": "", "line": "y"}]},
         "metadata.validation.left_out[0]"),
        ({"status": "ungradeable"}, "metadata.validation.ungradeable"),
        ({"status": "ok", "gold_test_s": -1.0}, "metadata.validation.gold_test_s"),
        ({"status": "ok", "gold_test_s": "12"}, "metadata.validation.gold_test_s"),
    ],
)  # fmt: skip
def test_a_bad_record_is_one_error_naming_its_field(record, field):
    task = _task("bad", ["test_add"], ["test_mul"])
    bad = task.model_copy(update={"metadata": {**task.metadata, "validation": record}})
    with pytest.raises(ValueError, match=re.escape(f"v44__bad: {field}")):
        validation_of(bad)


def test_the_record_travels_in_openrlhf_labels():
    """`swe-rl openrlhf-data` validates, and the cluster's grader reads the record from each sample's label."""
    from swe_rl.train.openrlhf.data import task_from_label, task_to_row

    task = _task("label", ["test_add"], ["test_mul", "test_fetch"])
    record = {"status": "left_out", "left_out": [{"test": "tests/test_calc.py::test_fetch",
              "reason": "network unreachable", "line": "OSError: [Errno 101] Network is unreachable"}]}  # fmt: skip
    validated = task.model_copy(update={"metadata": {**task.metadata, "validation": record}})
    back = task_from_label(task_to_row(validated)["label"])
    assert validation_of(back) == record and graded_task(back).PASS_TO_PASS == [
        "tests/test_calc.py::test_mul"
    ]


def test_the_official_harness_never_gets_an_ungradeable_instance(tmp_path):
    """run_official leaves it out (its report says why, never resolved) and sends the rest as ours grades them."""
    from swe_rl.grading import run_official

    record = {"status": "ungradeable", "ungradeable": "FAIL_TO_PASS fails with the gold patch here: x"}
    task = _task("off", ["test_remote_add"], ["test_mul"])
    task = task.model_copy(update={"metadata": {**task.metadata, "validation": record}})
    summary, reports = run_official([task], {task.instance_id: task.patch}, tmp_path)
    assert reports == {task.instance_id: {"resolved": False, "ungradeable": record["ungradeable"]}}
    assert summary["ungradeable_ids"] == [task.instance_id] and not (tmp_path / "dataset.jsonl").exists()


def test_a_cache_that_cannot_be_written_costs_a_validation_not_a_grading(tmp_path, monkeypatch, capsys):
    from swe_rl.grading import validate

    blocker = tmp_path / "a-file"
    blocker.write_text("")
    monkeypatch.setenv(CACHE_ENV, str(blocker / "cache"))
    validate._store("k", {"status": "ok"})
    assert "not written" in capsys.readouterr().err and validate._cached("k") is None
