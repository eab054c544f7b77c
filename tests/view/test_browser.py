"""`swe-rl view` of real runs opened in headless Chromium (`make test-view`): the micro evaluation, a 2-step training
run and a real SWE-bench instance's `swe-rl grade` output, each made by the CLI from the repository root. The tests
read the pages through the DOM after their script ran; every page they open is kept as a screenshot in
$SWE_RL_VIEW_ARTIFACTS (default runs/test-view/). The index's load time is printed (bench/view_build.py measures
it at 2,000 episodes), never asserted.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from swe_rl.view.browser import Chromium

pytestmark = [pytest.mark.view, pytest.mark.slow, pytest.mark.docker]

REPO = Path(__file__).resolve().parents[2]
ARTIFACTS = Path(os.environ.get("SWE_RL_VIEW_ARTIFACTS") or REPO / "runs" / "test-view")
INPUTS = Path(os.environ.get("SWE_RL_REAL_INPUTS") or REPO.parent / "shared" / "real_instances").resolve()
REAL_ID = "pallets__flask-5014"


def swe_rl(*args: str, timeout: float = 600) -> subprocess.CompletedProcess:
    exe = Path(sys.executable).with_name("swe-rl")
    p = subprocess.run([str(exe), *args], cwd=REPO, capture_output=True, text=True, timeout=timeout)
    assert p.returncode == 0, f"swe-rl {' '.join(args)}: exit {p.returncode}\n{p.stderr[-3000:]}"
    return p


def rel(path: Path) -> str:
    return os.path.relpath(path, REPO)


@pytest.fixture(scope="module")
def browser():
    with Chromium(width=1280, height=900) as b:
        yield b


@pytest.fixture(scope="session")
def micro_eval(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("view-eval")
    swe_rl("eval", "-c", "configs/eval/micro.yaml", "--output-dir", rel(out))
    return out / "micro-gold"


@pytest.fixture(scope="session")
def train_run(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("view-train")
    sets = ["model.init=swe_rl/train/assets/demo_sft", "steps=2", "name=train2", f"out_dir={rel(out)}",
            "rollout.tasks_per_step=4", "rollout.n_samples=4", "eval.n_tasks=4", "log_trajectories=16",
            "data.n_train=64"]  # fmt: skip
    swe_rl("train", "-c", "configs/train/grpo_aem.yaml", *(x for s in sets for x in ("-o", s)))
    return out / "train2"


def open_page(b: Chromium, path: Path, shot: str) -> float | None:
    """Open a page from disk, check it asked for nothing but files, keep its screenshot; the index's ready time."""
    b.open(path.as_uri())
    off_disk = [u for u in b.requested() if not u.startswith(("file://", "data:"))]
    assert off_disk == [], f"{path.name} asked the network for {off_disk}"
    b.screenshot(ARTIFACTS / f"{shot}.png")
    ready = b.eval("document.documentElement.dataset.ready || null")
    return None if ready is None else float(ready)


def text(b: Chromium, selector: str) -> str:
    return b.eval(f"document.querySelector({json.dumps(selector)}).textContent")


def rows_drawn(b: Chromium) -> int:
    return b.eval("document.querySelectorAll('#table tbody tr').length")


def all_tokens(run: Path) -> list[int]:
    return [len(json.loads(p.read_text())["token_ids"]) for p in (run / "trajectories").glob("run_*/*.json")]


def set_filter(b: Chromium, column: str, value: str) -> None:
    b.eval(f"""(() => {{ const el = document.getElementById('filter-{column}'); el.value = {json.dumps(value)};
              el.dispatchEvent(new Event('input')); }})()""")


def test_micro_evaluation(micro_eval, browser):
    swe_rl("view", rel(micro_eval))
    report = json.loads((micro_eval / "report" / "report.json").read_text())
    ready = open_page(browser, micro_eval / "view" / "index.html", "eval_index")
    print(f"micro evaluation index ready {ready:.0f} ms after navigation start")
    assert text(browser, "#resolved-count") == str(report["counts"]["resolved"]) == "15"
    assert text(browser, "#resolve-rate") == f"{report['resolve_rate']:.1%}"
    assert rows_drawn(browser) == 15
    assert browser.eval("document.querySelectorAll('#per-repo tbody tr').length") == len(report["per_repo"])
    set_filter(browser, "outcome", "resolved")
    assert rows_drawn(browser) == 15 and text(browser, "#shown") == "15"
    set_filter(browser, "instance", "textkit")
    assert rows_drawn(browser) == 5
    href = browser.eval("document.querySelector('#table tbody a').href")
    key = re.search(r"episodes/(run_\d+/[^/]+)\.html$", href).group(1)
    grading = json.loads((micro_eval / "grading" / f"{key}.json").read_text())
    traj = json.loads((micro_eval / "trajectories" / f"{key}.json").read_text())
    browser.open(href)
    browser.screenshot(ARTIFACTS / "eval_episode.png")
    browser.screenshot(ARTIFACTS / "eval_episode_top.png", full=False)
    assert text(browser, "#outcome") == "resolved"
    f2p = grading["tests"]["tests_status"]["FAIL_TO_PASS"]["success"][0]
    statuses = browser.eval("""[...document.querySelectorAll('table.tests tr')].map(
        tr => [...tr.querySelectorAll('td')].map(td => td.textContent))""")
    assert ["FAIL_TO_PASS", f2p, "passed", ""] in statuses
    turns = sum(m["role"] == "assistant" for m in traj["messages"])
    assert browser.eval("document.querySelectorAll('article.turn').length") == turns
    assert "<github_issue>" not in text(browser, "#problem pre")  # the issue itself, not the prompt around it
    raw = browser.eval("document.querySelector('#raw a').href")
    assert (
        Path(raw.removeprefix("file://")).resolve() == (micro_eval / "trajectories" / f"{key}.json").resolve()
    )


def test_training_run(train_run, browser):
    swe_rl("view", rel(train_run))
    metrics = [json.loads(x) for x in (train_run / "metrics.jsonl").read_text().splitlines()]
    open_page(browser, train_run / "view" / "index.html", "train_index")
    charts = browser.eval("[...document.querySelectorAll('figure.chart')].map(f => f.dataset.key)")
    assert {"reward_mean", "resolve_rate", "valid_frac", "entropy_mean", "algo/aem/alpha_token_mean"} <= set(
        charts
    )
    assert browser.eval("document.querySelectorAll('#steps tbody tr').length") == 2
    step1 = next(m for m in metrics if m["step"] == 1 and "reward_mean" in m)
    assert browser.eval("document.querySelector('#steps tbody td:nth-child(2)').textContent") == (
        f"{step1['reward_mean']:.3f}"
    )
    records = (train_run / "trajectories" / "step_000001.jsonl").read_text().splitlines()
    browser.eval("document.querySelector('#steps a[href=\"#step=1\"]').click()")
    browser.eval("window.dispatchEvent(new HashChangeEvent('hashchange'))")
    set_filter(browser, "kind", "train")
    assert rows_drawn(browser) == len(records)
    first = json.loads(records[0])
    browser.open((train_run / "view" / "episodes" / "step_000001" / "0000.html").as_uri())
    browser.screenshot(ARTIFACTS / "train_episode.png")
    statuses = browser.eval("""[...document.querySelectorAll('table.tests tr')].map(
        tr => [...tr.querySelectorAll('td')].map(td => td.textContent))""")
    for test, status in first["grading"]["tests"]["FAIL_TO_PASS"].items():
        assert ["FAIL_TO_PASS", test, "passed" if status == "PASSED" else "failed", ""] in statuses
    spans = [m["span"] for m in first["messages"] if m["role"] == "assistant"]
    metas = browser.eval("[...document.querySelectorAll('article.turn h3 .meta')].map(m => m.textContent)")
    assert [m.split(" tokens")[0] for m in metas] == [str(e - s) for s, e in spans]
    # the trainer's per-turn record (objective.turn_records): AEM's α and the advantage each turn received
    assert len(first["turns"]) == len(spans), (first["turns"], spans)
    for meta, turn in zip(metas, first["turns"], strict=True):
        assert f"α {turn['alpha']:.3f}" in meta and f"advantage {turn['advantage']:+.3f}" in meta, meta


def test_a_truncated_training_line_is_one_warning(train_run, tmp_path, browser):
    run = tmp_path / "train2"
    shutil.copytree(train_run, run, ignore=shutil.ignore_patterns("view", "checkpoints"))
    step = run / "trajectories" / "step_000002.jsonl"
    lines = step.read_text().splitlines(keepends=True)
    step.write_text("".join(lines[:-1]) + lines[-1][: len(lines[-1]) // 2])  # killed mid-write
    before = {p: p.read_bytes() for p in run.rglob("*") if p.is_file()}
    p = swe_rl("view", str(run))
    warnings = [x for x in p.stderr.splitlines() if x.startswith("warning:")]
    assert warnings == [f"warning: trajectories/step_000002.jsonl:{len(lines)}: a truncated JSON line, cut off "
                        "mid-write (the run was killed, or is writing it now); that line is left out"]  # fmt: skip
    assert {
        p: p.read_bytes() for p in run.rglob("*") if p.is_file() and "view" not in p.relative_to(run).parts
    } == before
    open_page(browser, run / "view" / "index.html", "train_truncated_index")
    assert "step_000002.jsonl" in text(browser, "#warnings")
    set_filter(browser, "step", "2")
    set_filter(browser, "kind", "train")
    assert rows_drawn(browser) == len(lines) - 1


def test_paginate_sort_and_serve(synthetic_run, tmp_path, browser):
    run = tmp_path / "eval"
    shutil.copytree(synthetic_run, run, ignore=shutil.ignore_patterns("view"))
    exe = Path(sys.executable).with_name("swe-rl")
    proc = subprocess.Popen([str(exe), "view", rel(run), "--serve", "--port", "0"], cwd=REPO, text=True,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)  # fmt: skip
    try:
        line = ""
        while "serving" not in line:
            line = proc.stdout.readline()
            assert line, proc.stderr.read()
        url = re.search(r"(http://127\.0\.0\.1:\d+/\S+)", line).group(1)
        browser.open(url)
        assert [u for u in browser.requested() if not u.startswith("http://127.0.0.1:")] == []
        assert rows_drawn(browser) == 100 and text(browser, "#page").strip() == "page 1 of 2"
        browser.eval("document.getElementById('next').click()")
        assert rows_drawn(browser) == 20
        browser.eval("document.querySelector('#table th[data-col=tokens]').click()")
        browser.eval("document.querySelector('#table th[data-col=tokens]').click()")  # descending
        tokens = browser.eval("[...document.querySelectorAll('#table td.c-tokens')].map(t => +t.textContent)")
        assert tokens == sorted(tokens, reverse=True) and len(tokens) == 100  # page 1 again, sorted
        assert tokens[0] == max(r for r in all_tokens(run))
        browser.screenshot(ARTIFACTS / "synthetic_index_sorted.png", full=False)
        raw = browser.eval("document.querySelector('#table tbody a').href")
        browser.open(raw)  # an episode page over HTTP, and its raw trajectory link from the server
        browser.open(browser.eval("document.querySelector('#raw a').href"))
        assert browser.eval("JSON.parse(document.body.innerText).task_id") in raw
    finally:
        proc.send_signal(signal.SIGINT)
        assert proc.wait(30) == 0


@pytest.mark.skipif(not (INPUTS / "rows.jsonl").is_file(), reason=f"no real-instance inputs at {INPUTS}")
def test_real_instance_grade_output(tmp_path, browser):
    tasks, out = tmp_path / "tasks.jsonl", tmp_path / "grade"
    swe_rl("images", "build", "--inputs", str(INPUTS), "--id", REAL_ID, "-o", str(tasks), timeout=1800)
    swe_rl("grade", "--tasks", str(tasks), "--predictions", "gold", "--out", rel(out), "--id", REAL_ID)
    swe_rl("view", rel(out), "--tasks", str(tasks))
    report = json.loads((out / REAL_ID / "report.json").read_text())[REAL_ID]
    open_page(browser, out / "view" / "index.html", "grade_index")
    assert text(browser, "#resolved-count") == "1"
    browser.open((out / "view" / "episodes" / "graded" / f"{REAL_ID}.html").as_uri())
    browser.screenshot(ARTIFACTS / "grade_episode.png")
    assert text(browser, "#outcome") == "resolved"
    assert "Require a non-empty name for Blueprints" in text(browser, "#problem")
    f2p = report["tests_status"]["FAIL_TO_PASS"]["success"]
    shown = browser.eval("[...document.querySelectorAll('table.tests td.test')].map(t => t.textContent)")
    assert set(f2p) <= set(shown)
    p2p = len(report["tests_status"]["PASS_TO_PASS"]["success"])
    assert text(browser, "details.p2p summary") == f"{p2p} PASS_TO_PASS tests passed"
    assert "Test Exit Code" in text(browser, "pre.log") or "passed" in text(browser, "pre.log")
