"""`swe-rl view` without a browser: what the site holds, that it matches the run's report, rebuilds, bad input, and
that the run's own files are never changed. (In a real browser: test_browser.py, `make test-view`.)"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from swe_rl.view.build import build_site
from swe_rl.view.load import NotARun

REPO = Path(__file__).resolve().parents[2]


def swe_rl(*args: str) -> subprocess.CompletedProcess:
    """The installed CLI from the repository root, as a user runs it."""
    exe = Path(sys.executable).with_name("swe-rl")
    return subprocess.run([str(exe), *args], cwd=REPO, capture_output=True, text=True, timeout=300)


def rows(view: Path) -> list[list]:
    text = (view / "index-data.js").read_text()
    data = json.loads(text[text.index("{") : text.rindex("}") + 1])
    return [dict(zip(data["columns"], r, strict=True)) for r in data["rows"]]


def digest(root: Path) -> dict[str, str]:
    """Every file of the run outside view/, by content."""
    return {
        str(p.relative_to(root)): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(root.rglob("*"))
        if p.is_file() and "view" not in p.relative_to(root).parts[:1]
    }


def test_index_matches_the_runs_report_and_every_episode_has_a_page(run_copy):
    before = digest(run_copy)
    rel = os.path.relpath(run_copy, REPO)  # a relative RUN_DIR, from the repository root
    p = swe_rl("view", rel)
    assert p.returncode == 0, p.stderr
    assert "open file://" in p.stdout
    report = json.loads((run_copy / "report" / "report.json").read_text())
    view = run_copy / "view"
    got = rows(view)
    assert len(got) == report["episodes"] == 120
    counts = {b: sum(r["outcome"] == b for r in got) for b in report["counts"]}
    assert counts == report["counts"]
    assert sum(bool(r["suspicious"]) for r in got) == len(report["suspicious"]) > 0
    index = (view / "index.html").read_text()
    assert f'id="resolved-count">{report["counts"]["resolved"]}<' in index
    assert f'id="resolve-rate">{report["resolve_rate"]:.1%}<' in index
    assert f'id="pass-at-2">{report["pass@k"]["2"]:.1%}<' in index
    # where the episodes ran: report.json's per_node (two nodes in the synthetic run), one row each
    assert len(report["per_node"]) == 2 and sum(v["episodes"] for v in report["per_node"].values()) == 120
    for node, v in report["per_node"].items():
        assert f"<tr><td>{node}</td><td>{v['episodes']}</td><td>{v['resolved']}</td>" in index, node
    for r in got:
        assert (view / "episodes" / f"{r['key']}.html").is_file()
    assert digest(run_copy) == before, "swe-rl view changed the run's own files"
    assert "http" not in (view / "index.html").read_text().replace("http-equiv", "")  # nothing from a network


def test_episode_page_shows_turns_patch_tests_and_labels(run_copy):
    res = build_site(run_copy)
    got = rows(res.view)
    sus = next(r for r in got if r["suspicious"])
    traj = json.loads((run_copy / "trajectories" / f"{sus['key']}.json").read_text())
    grading = json.loads((run_copy / "grading" / f"{sus['key']}.json").read_text())
    html = (res.view / "episodes" / f"{sus['key']}.html").read_text()
    assert html.count('class="turn"') == sum(m["role"] == "assistant" for m in traj["messages"])
    f2p = grading["tests"]["tests_status"]["FAIL_TO_PASS"]["success"][0]
    assert f'<td class="test">{f2p}</td><td class="status">passed</td>' in html
    assert "suspicious: patch edits conftest.py" in html
    assert '<span class="a">+' in html  # the patch's added lines, coloured
    run, name = sus["key"].split("/")
    other = "run_01" if run == "run_00" else "run_00"
    link = f'<a href="../../episodes/{other}/{name}.html">{other.replace("_", " ")}</a>'
    assert (
        link in html and (res.view / "episodes" / other / f"{name}.html").is_file()
    )  # the instance's other run
    # a turn's tokens and mean entropy come from the trajectory's span and its entropy over policy tokens
    span = next(m["span"] for m in traj["messages"] if m["role"] == "assistant")
    ent = [traj["entropy"][i] for i in range(*span) if traj["loss_mask"][i]]
    assert f"{span[1] - span[0]} tokens · mean entropy {sum(ent) / len(ent):.3f}" in html
    infra = next(r for r in got if r["outcome"] == "infra_failure")
    page = (res.view / "episodes" / f"{infra['key']}.html").read_text()
    assert "SandboxStartError" in page and infra["failure"] in page
    metrics = json.loads((run_copy / "trajectories" / f"{infra['key']}.json").read_text())["metrics"]
    assert f"<dt>node</dt><dd>{metrics['worker_node']}</dd>" in page  # where it failed


def test_rerun_writes_only_what_changed_and_drops_what_is_gone(run_copy):
    first = build_site(run_copy)
    assert first.rendered == first.episodes == 120
    again = build_site(run_copy)
    assert again.rendered == 0 and again.episodes == 120
    # an in-progress run: one episode rewritten (a retried infra failure), one not there any more
    changed = next((run_copy / "trajectories" / "run_01").glob("*.json"))
    data = json.loads(changed.read_text())
    data["exit_status"], data["reward"] = "max_steps", 0.0
    changed.write_text(json.dumps(data))
    gone = next((run_copy / "trajectories" / "run_00").glob("*.json"))
    gone.unlink()
    third = build_site(run_copy)
    assert third.rendered == 1 and third.episodes == 119
    assert not (run_copy / "view" / "episodes" / "run_00" / f"{gone.stem}.html").exists()
    row = next(r for r in rows(run_copy / "view") if r["key"] == f"run_01/{changed.stem}")
    assert row["exit"] == "max_steps"


def test_an_unreadable_episode_file_is_one_warning_and_the_rest_is_built(run_copy):
    bad = next((run_copy / "trajectories" / "run_00").glob("*.json"))
    bad.write_text(bad.read_text()[:500])  # a file cut off (disk full, a copy interrupted)
    p = swe_rl("view", str(run_copy))
    assert p.returncode == 0, p.stderr
    warnings = [line for line in p.stderr.splitlines() if line.startswith("warning:")]
    assert warnings == [f"warning: trajectories/run_00/{bad.name}: left out (ValueError: trajectories/run_00/"
                        f"{bad.name}: not a trajectory JSON object)"]  # fmt: skip
    assert len(rows(run_copy / "view")) == 119
    assert bad.name in (run_copy / "view" / "index.html").read_text()  # said on the page too


@pytest.mark.parametrize("what", ["missing", "a file", "not a run"])
def test_a_folder_that_is_not_a_run_is_one_error(tmp_path, what):
    target = tmp_path / "x"
    if what == "a file":
        target.write_text("hello")
    elif what == "not a run":
        (target / "notes").mkdir(parents=True)
        (target / "notes" / "a.txt").write_text("hello")
    p = swe_rl("view", str(target))
    assert p.returncode == 2
    lines = p.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"error: {target}: ")
    assert "Traceback" not in p.stderr
    if what == "not a run":
        assert "expected an evaluation run" in lines[0]
        assert sorted(p.name for p in target.rglob("*")) == ["a.txt", "notes"]  # nothing written into it
    with pytest.raises(NotARun):
        build_site(target)


def test_out_writes_elsewhere_and_links_back_to_the_run(run_copy, tmp_path):
    out = tmp_path / "site"
    res = build_site(run_copy, out)
    assert not (run_copy / "view").exists()
    page = next((out / "episodes" / "run_00").glob("*.html"))
    href = page.read_text().split('<section id="raw"><h2>Raw files</h2><ul><li><a href="')[1].split('"')[0]
    assert (page.parent / href).resolve() == (
        run_copy / "trajectories" / "run_00" / f"{page.stem}.json"
    ).resolve()
    assert res.episodes == 120


def test_training_records_with_per_turn_alpha_and_advantage_and_a_cut_line(synthetic_run, tmp_path):
    """The step-record format swe-rl train writes (trajectories/step_NNNNNN.jsonl), with the per-turn `turns` a
    trainer may add (the built-in one does not write them yet: docs/viewer.md), its last line cut mid-write."""
    traj = json.loads(next((synthetic_run / "trajectories" / "run_00").glob("*.json")).read_text())
    run = tmp_path / "train"
    (run / "trajectories").mkdir(parents=True)
    n_turns = sum(m["role"] == "assistant" for m in traj["messages"])
    turns = [
        {"entropy": 0.25 + k, "alpha": 1.5 - 0.25 * k, "advantage": -0.5 * (1.5 - 0.25 * k)}
        for k in range(n_turns)
    ]
    rec = {"task_id": traj["task_id"], "reward": 0.0, "exit": "submitted", "messages": traj["messages"],
           "grading": {"failure": None, "tests": {"FAIL_TO_PASS": {"t.py::test_a": "FAILED"}}}, "turns": turns}  # fmt: skip
    line = json.dumps(rec)
    (run / "trajectories" / "step_000001.jsonl").write_text(line + "\n" + line[: len(line) // 3])
    (run / "metrics.jsonl").write_text(
        json.dumps({"step": 1, "reward_mean": 0.0, "resolve_rate": 0.0}) + "\n"
    )
    res = build_site(run)
    assert res.warnings == ["trajectories/step_000001.jsonl:2: a truncated JSON line, cut off mid-write (the run "
                            "was killed, or is writing it now); that line is left out"]  # fmt: skip
    assert res.episodes == 1
    html = (res.view / "episodes" / "step_000001" / "0000.html").read_text()
    assert "mean entropy 1.250 · α 1.250 · advantage -0.625" in html  # the second turn's
    assert '<td class="test">t.py::test_a</td><td class="status">failed</td>' in html
    assert 'data-key="reward_mean"' in (res.view / "index.html").read_text()


def test_a_run_being_written_shows_episodes_whose_grading_file_is_not_there_yet(run_copy):
    """swe-rl eval writes an episode's trajectory, then its grading record: between the two (or with the run
    killed there) the viewer reads the grading the trajectory carries, as the harness's own collect() does."""
    report = json.loads((run_copy / "report" / "report.json").read_text())
    for f in (run_copy / "grading").rglob("*.json"):
        f.unlink()
    shutil.rmtree(run_copy / "report")
    res = build_site(run_copy)
    assert res.report["counts"] == report["counts"]
    assert len(res.report["suspicious"]) == len(report["suspicious"])


def test_serve_answers_on_the_loopback_interface_only(run_copy):
    import urllib.request

    from swe_rl.view.serve import make_server

    build_site(run_copy)
    server = make_server(run_copy, 0)
    try:
        import threading

        threading.Thread(target=server.serve_forever, daemon=True).start()
        host, port = server.server_address[:2]
        assert host == "127.0.0.1"
        body = urllib.request.urlopen(f"http://127.0.0.1:{port}/view/index.html", timeout=10).read().decode()
        assert 'id="resolved-count"' in body
        req = urllib.request.Request(f"http://127.0.0.1:{port}/view/index.html", method="PUT", data=b"x")
        with pytest.raises(urllib.error.HTTPError):  # read-only: GET and HEAD only
            urllib.request.urlopen(req, timeout=10)
    finally:
        server.shutdown()
        server.server_close()


def test_a_folder_holding_runs_names_them(run_copy, tmp_path):
    """swe-rl demo's folder: its own report/report.json, a training run and an evaluation inside."""
    demo = tmp_path / "demo"
    (demo / "report").mkdir(parents=True)
    (demo / "report" / "report.json").write_text("{}")
    run_copy.rename(demo / "report" / "micro")
    p = swe_rl("view", str(demo))
    assert p.returncode == 2
    assert p.stderr.strip() == f"error: {demo}: not a run folder itself; the runs in it: {demo}/report/micro"


def test_a_site_that_cannot_be_written_is_one_error(run_copy):
    (run_copy / "view").write_text("not a folder")  # as a read-only run folder would refuse it
    p = swe_rl("view", str(run_copy))
    assert p.returncode == 1
    assert p.stderr.strip().startswith(f"error: {run_copy / 'view'}")
    assert p.stderr.strip().endswith("(the site goes to RUN_DIR/view; --out DIR writes it elsewhere)")
    assert len(p.stderr.strip().splitlines()) == 1


def test_tests_left_out_by_validation_and_integrity_evidence_are_shown(run_copy):
    """A grading record's validation (swe_rl.tasks.validation's record as the grader reports it): the PASS_TO_PASS
    tests it left out, each with its reason and log line, and the summary line."""
    path = next((run_copy / "grading" / "run_00").glob("*.json"))
    record = json.loads(path.read_text())
    if not record["tests"]:
        path = next(
            p for p in (run_copy / "grading" / "run_00").glob("*.json") if json.loads(p.read_text())["tests"]
        )
        record = json.loads(path.read_text())
    record["tests"]["validation"] = {
        "status": "left_out",
        "summary": "graded on 9 of 10 PASS_TO_PASS; left out: 1 (network)",
        "left_out": [
            {"test": "tests/test_net.py::test_fetch", "reason": "network", "line": "ConnectionRefusedError"}
        ],
    }
    record["tests"]["integrity"] = {
        "suspicious": [],
        "violations": [],
        "harness_restored": ["tests/conftest.py"],
    }
    path.write_text(json.dumps(record))
    res = build_site(run_copy)
    html = (res.view / "episodes" / "run_00" / f"{path.stem}.html").read_text()
    # integrity evidence: what the grader found, even without a label (empty findings are not listed)
    assert (
        '<tr><th>harness_restored</th><td><pre class="">[\n &quot;tests/conftest.py&quot;\n]</pre></td></tr>'
        in html
    )
    assert "<th>violations</th>" not in html
    assert ('<td class="test">tests/test_net.py::test_fetch</td><td class="status">left out</td>'
            "<td>network: ConnectionRefusedError</td>") in html  # fmt: skip
    assert "validation: graded on 9 of 10 PASS_TO_PASS; left out: 1 (network)" in html
