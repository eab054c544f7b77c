"""Issue 22's per-instance checks on real SWE-bench instances (run by `make test-real`; slow: never by `make test`):
gold resolves in ours and in swebench's official run_evaluation with identical per-test results, the empty and a
no-op patch do not, the scripted gold policy resolves every instance through `swe-rl eval`, (issue 44) the
instance validation leaves out exactly the PASS_TO_PASS tests manifest.json names (`left_out`), in ours and the
official run alike, a tiny-model episode
ends without an infra failure, and two RL steps of the shipped checkpoint run on them."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = [pytest.mark.slow, pytest.mark.docker, pytest.mark.timeout(3600)]
SWE_RL = str(Path(sys.executable).with_name("swe-rl"))
REPO = Path(__file__).resolve().parents[2]


def noop_patch(task, inputs: Path) -> str:
    """A patch that changes nothing the tests see: a comment appended to the first file the gold fix edits."""
    from swe_rl.images.swebench_images import read_source_file, source_of

    path = task.patch.split("diff --git a/", 1)[1].split(" ", 1)[0]
    lines = read_source_file(source_of(inputs, task.instance_id), path).decode().splitlines()
    n = len(lines)
    return (f"diff --git a/{path} b/{path}\n--- a/{path}\n+++ b/{path}\n@@ -{n},1 +{n},2 @@\n {lines[-1]}\n"
            "+# swe-rl no-op\n")  # fmt: skip


def test_gold_empty_noop_ours_and_official(iid, real_tasks, real_inputs, real_manifest, tmp_path):
    """Gold resolves (or, for an instance manifest.json marks `official_unresolved`, fails in ours exactly as in the
    official harness), empty and no-op do not, and both harnesses report identical per-test results (for one marked
    `official_host_dependent`, on a host meeting its condition: all but the named tests, whose official status and
    log line the entry gives)."""
    from swe_rl.grading.grader import docker_factory, grade_sync
    from swe_rl.grading.official import run_official

    task = real_tasks.tasks[iid]
    unresolvable = real_manifest.get(iid, {}).get("official_unresolved")
    check_left_out(task, real_manifest.get(iid, {}).get("left_out"), bool(unresolvable))
    factory = docker_factory()
    gold, empty, noop = (
        grade_sync(task, p, factory) for p in (task.patch, "", noop_patch(task, real_inputs))
    )
    assert gold.resolved != bool(unresolvable), (unresolvable, gold.tests, gold.log[-2000:])
    assert gold.tests.get("integrity", {}).get("violations", []) == []  # no rule fires on a gold patch
    assert not empty.resolved and not noop.resolved and noop.reward == 0.0
    left = [i["test"] for i in (task.metadata["validation"].get("left_out") or [])]
    for ours in (gold, noop):  # the verdict names what it left out, and grades none of it
        graded = {t for v in ours.tests["tests_status"]["PASS_TO_PASS"].values() for t in v}
        assert not graded & set(left) and len(graded) == len(task.PASS_TO_PASS) - len(left), ours.tests
        assert ours.tests["validation"]["left_out"] == task.metadata["validation"]["left_out"]
    host_dependent = applies_here(real_manifest.get(iid, {}).get("official_host_dependent"))
    for name, ours in (("gold", gold), ("noop", noop)):
        patch = task.patch if name == "gold" else noop_patch(task, real_inputs)
        _, reports = run_official([task], {iid: patch}, tmp_path / name, run_id=name)
        official = reports[iid]
        if host_dependent:
            log = tmp_path / name / "logs" / "run_evaluation" / name / "peer-model" / iid / "test_output.txt"
            official = as_if_named_tests_ran(
                official, host_dependent, log.read_text(), ours.tests["tests_status"]
            )
        assert official.get("resolved") == ours.resolved, (name, official)
        assert official["tests_status"] == ours.tests["tests_status"], name


def check_left_out(task, entry: dict | None, unresolvable: bool = False) -> None:
    """The instance validation left out exactly the tests manifest.json names, each with its reason and the log
    line that shows it (none for an instance without `left_out`), and nothing else changed: gold passes the rest
    (an `official_unresolved` instance's gold fails here too: the validation says so and keeps those tests)."""
    record = task.metadata.get("validation")
    assert record is not None, f"{task.instance_id}: not validated (image missing?)"
    named = (entry or {}).get("tests", [])
    expect = "gold_unresolved" if unresolvable else "left_out" if named else "ok"
    assert record["status"] == expect, record
    assert [i["test"] for i in record["left_out"]] == named, record["left_out"]
    for item in record["left_out"]:
        assert item["reason"] == entry["reason"] and item["line"], item
    if named:  # what `swe-rl grade` and the evaluation report print for it
        from swe_rl.grading import validation_shown

        summary = validation_shown(task)["summary"]
        m = len(task.PASS_TO_PASS)
        assert summary.startswith(f"graded on {m - len(named)} of {m} PASS_TO_PASS; left out: "), summary
        assert all(f"{t} ({entry['reason']})" in summary for t in named), summary


def applies_here(entry: dict | None) -> dict | None:
    """A manifest `official_host_dependent` entry when this host meets its condition (docker's cgroup version)."""
    if not entry:
        return None
    got = subprocess.run(["docker", "info", "--format", "{{.CgroupVersion}}"], capture_output=True, text=True)
    return entry if got.stdout.strip() == entry["host"]["docker_cgroup_version"] else None


def as_if_named_tests_ran(official: dict, entry: dict, log: str, ours: dict) -> dict:
    """The official report with the entry's tests moved from PASS_TO_PASS failure to success, after checking that they
    are exactly the ones the host changed: the official log says why, they failed there and passed in ours, and the
    official verdict was unresolved. The verdict is then recomputed from the moved lists (swebench's rule)."""
    named = entry["tests"]
    assert entry["log_says"] in log, entry["log_says"]
    assert official.get("resolved") is False, official
    status = {k: {kk: list(vv) for kk, vv in v.items()} for k, v in official["tests_status"].items()}
    p2p = status["PASS_TO_PASS"]
    assert [t for t in named if t in p2p["failure"]] == named, p2p["failure"]
    assert set(named) <= set(ours["PASS_TO_PASS"]["success"]), ours["PASS_TO_PASS"]
    p2p["failure"] = [t for t in p2p["failure"] if t not in named]
    # in ours' order; a test official passed that ours did not stays in (last), so the comparison still sees it
    order = {t: i for i, t in enumerate(ours["PASS_TO_PASS"]["success"])}
    p2p["success"] = sorted({*p2p["success"], *named}, key=lambda t: (order.get(t, len(order)), t))
    f2p = status["FAIL_TO_PASS"]
    return {**official, "tests_status": status, "resolved": not f2p["failure"] and not p2p["failure"]}


def swe_rl(*args: str, timeout: int = 3000) -> str:
    proc = subprocess.run([SWE_RL, *args], cwd=REPO, capture_output=True, text=True, timeout=timeout)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    return proc.stdout


def built(real_tasks) -> dict:
    """The instances whose images built (the per-instance tests report the others' build failures)."""
    if not real_tasks.tasks:
        pytest.fail(f"no real instance built: {real_tasks.tasks.failed}", pytrace=False)
    return dict(real_tasks.tasks)


def eval_report(real_tasks, out: Path, name: str, *overrides: str) -> dict:
    """`swe-rl eval` over every built instance (micro.yaml's settings, local pool); its report, no infra failure."""
    tasks = built(real_tasks)
    swe_rl("eval", "-c", "configs/eval/micro.yaml", "--dataset", str(real_tasks.rows), "--name", name,
           "--output-dir", str(out), "--backend", "local", *overrides)  # fmt: skip
    report = json.loads((out / name / "report" / "report.json").read_text())
    assert report["counts"]["infra_failure"] == 0 and report["episodes"] == len(tasks), report["counts"]
    return report


def test_scripted_gold_resolves_every_instance_through_swe_rl_eval(real_tasks, real_manifest, tmp_path):
    report = eval_report(real_tasks, tmp_path, "real-gold", "agent.max_steps=60", "policy.test_command=git status",
                         "agent.max_context_tokens=200000")  # fmt: skip
    marked = {i for i in built(real_tasks) if real_manifest.get(i, {}).get("official_unresolved")}
    expect = (len(built(real_tasks)) - len(marked)) / len(built(real_tasks))
    assert report["resolve_rate"] == pytest.approx(expect), (report, sorted(marked))
    # the report says what each resolve measured: an instance with tests left out names them, one whose gold fails
    # here (official_unresolved) says so; none elsewhere
    named = {
        i: e["left_out"]["tests"]
        for i, e in real_manifest.items()
        if i in built(real_tasks) and "left_out" in e
    }
    assert sorted(report["validation"]) == sorted(set(named) | marked), report["validation"]
    for iid, tests in named.items():
        assert all(t in report["validation"][iid] for t in tests), report["validation"][iid]
    for iid in marked:
        assert "gold unresolved" in report["validation"][iid], report["validation"][iid]


def test_tiny_model_episodes_end_cleanly(real_tasks, tmp_path):
    eval_report(
        real_tasks, tmp_path, "real-tiny", "policy.kind=tiny", "agent.max_steps=3", "agent.max_new_tokens=16"
    )


def test_two_rl_steps_on_real_instances(real_tasks, tmp_path):
    built(real_tasks)
    args = ["data.source=tasks", f"data.tasks={real_tasks.rows}", "model.init=swe_rl/train/assets/demo_sft",
            "steps=2", "save_every=0", "rollout.tasks_per_step=2", "rollout.n_samples=2", "rollout.max_turns=3",
            f"out_dir={tmp_path}", "name=real", "optim.minibatch=4", "optim.micro_batch=4",
            "rollout.max_len=4096"]  # fmt: skip  # a real issue's prompt alone passes the default 640 tokens
    swe_rl("train", *(x for a in args for x in ("-o", a)))
    steps = [json.loads(x) for x in (tmp_path / "real" / "metrics.jsonl").read_text().splitlines()]
    assert [m["step"] for m in steps if "reward_mean" in m] == [1, 2]
    assert all(m.get("exit/error", 0) == 0 for m in steps)
    active = [m["active_rows"] for m in steps if "reward_mean" in m]
    assert sum(active) > 0, active  # an update saw policy tokens
