"""`swe-rl compare`'s summary: per-seed gains from the first to the last held-out evaluation, and the plots."""

from __future__ import annotations

import json

import pytest

from swe_rl.experiments.compare import summarize
from swe_rl.runs import RunDir


def _write_run(out, name, greedy, sampled, mixed):
    run = RunDir.create(str(out), name)
    for step, (g, s, m) in enumerate(zip(greedy, sampled, mixed, strict=True)):
        row = {"mixed_group_frac": m, "entropy_mean": 0.05, "reward_mean": s}
        if g is not None:
            row |= {"eval/greedy_success": g, "eval/sampled_success": s}
        run.log_metrics(step, row)


def test_summary_gains_and_plots(tmp_path):
    _write_run(tmp_path, "a_s0", [0.5, None, 0.7], [0.3, 0.35, 0.6], [0.9, 0.8, 0.7])
    _write_run(tmp_path, "a_s1", [0.4, None, 0.4], [0.2, 0.3, 0.3], [0.6, 0.5, 0.5])
    _write_run(tmp_path, "b_s0", [0.5, None, 0.45], [0.4, 0.4, 0.35], [0.9, 0.9, 0.9])
    path = summarize(tmp_path, ["a", "b"], [0, 1])
    summary = json.loads(path.read_text())
    assert summary["a"]["greedy_mean_gain"] == pytest.approx(0.1)  # (0.2 + 0.0) / 2
    assert summary["a"]["sampled_mean_gain"] == pytest.approx(0.2)  # (0.3 + 0.1) / 2
    assert summary["a"]["greedy_sd_gain"] == pytest.approx(0.1414, abs=1e-3)
    assert summary["b"]["sampled_mean_gain"] == pytest.approx(-0.05)
    assert summary["b"]["greedy_sd_gain"] is None  # one seed ran
    assert [s["seed"] for s in summary["b"]["seeds"]] == [0]
    assert summary["a"]["seeds"][0]["mixed_first"] == 0.9
    pngs = {p.name for p in (tmp_path / "plots").glob("*.png")}
    assert {"heldout_success.png", "heldout_success_sampled.png", "entropy.png", "mixed_groups.png"} <= pngs


def test_step0_evaluation_is_computed_once_per_key(tmp_path):
    from swe_rl.experiments.compare import Step0Cache

    calls = []

    def evaluator(step):
        calls.append(step)
        return {"greedy_success": 0.5 + 0.1 * len(calls)}

    path = tmp_path / "eval_step0.json"
    a = Step0Cache(evaluator, path, {"init": "ck1"})
    first = a(0)
    assert Step0Cache(evaluator, path, {"init": "ck1"})(0) == first  # a second run reuses it
    assert calls == [0]
    assert a(12) != first and calls == [0, 12]  # later steps are always evaluated
    assert Step0Cache(evaluator, path, {"init": "ck2"})(0) != first  # another checkpoint: evaluated again
    assert calls == [0, 12, 0]


def test_aem_diagnostics_in_summary_plots_and_report(tmp_path):
    from swe_rl.experiments.plots import aem_report_rows

    run = RunDir.create(str(tmp_path), "grpo_aem_s0")
    for step, (rule, tok, edit) in enumerate([(1.0, 1.0, 1.0), (0.5, 0.9, 0.6), (0.25, 0.8, 0.4)]):
        run.log_metrics(step + 1, {
            "mixed_group_frac": 0.5, "algo/aem/alpha_mean": 1.0, "algo/aem/frac_groups_range_rule": rule,
            "algo/aem/alpha_token_mean": tok, "algo/aem/alpha_turn/file_editor:str_replace": edit,
            "algo/aem/alpha_turn/submit": 1.1,
        })  # fmt: skip
    RunDir.create(str(tmp_path), "grpo_s0").log_metrics(1, {"mixed_group_frac": 0.5})
    summary = json.loads(summarize(tmp_path, ["grpo_aem", "grpo"], [0]).read_text())
    aem = summary["grpo_aem"]["aem"]
    assert aem["frac_groups_range_rule"] == pytest.approx(0.5833, abs=1e-3)
    assert aem["alpha_token_mean"] == pytest.approx(0.9)
    assert aem["alpha_by_turn"] == pytest.approx({"file_editor:str_replace": 2 / 3, "submit": 1.1})
    assert "aem" not in summary["grpo"]  # no AEM, no AEM diagnostics
    pngs = {p.name for p in (tmp_path / "plots").glob("*.png")}
    assert {"aem_range_rule.png", "aem_alpha_token_mean.png"} <= pngs
    rows = aem_report_rows(run.read_metrics())
    assert any("range rule" in r and "100%" in r and "25%" in r for r in rows)
    assert any("file_editor:str_replace" in r and "0.400" in r for r in rows)
