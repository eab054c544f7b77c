"""The AEM mechanism probe: identical steps per advantage kind, controls that must cancel, the summary and plot."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from swe_rl.experiments.probe import KINDS, ProbeConfig, _shuffle_within_groups, plot, run_probe

TINY = {"batches": 2, "tasks": 2, "n": 4, "sft_steps": 3, "probe_states": 2, "starts": {"a": 0.2, "b": 0.8}}


def test_shuffle_keeps_each_groups_alpha_values():
    alpha = torch.tensor([0.5, 1.5, 1.0, 2.0, 0.2, 0.8])
    group = torch.tensor([0, 0, 0, 1, 1, 1])
    out = _shuffle_within_groups(alpha, group, torch.Generator().manual_seed(3))
    for g in (0, 1):
        assert sorted(out[group == g].tolist()) == sorted(alpha[group == g].tolist())
    assert not torch.equal(out, alpha)


def test_with_alpha_one_every_kind_takes_the_grpo_step():
    # δ far above any entropy range: α = 1 everywhere, so all four kinds must give exactly GRPO's change.
    results, summary = run_probe(ProbeConfig(**TINY, delta=1e9))
    for res in results:
        for row in res["batches"]:
            for kind in KINDS[1:]:
                assert row[kind] == row["grpo"], (kind, row)
    for s in summary.values():
        assert s["aem_frac_groups_range_rule"] == 1.0
        assert s["aem"]["entropy"]["mean"] == 0.0 and s["shuffled"]["p_correct"]["hi"] == 0.0


def test_warmed_adam_keeps_the_control_exact():
    cfg = ProbeConfig(**TINY, delta=1e9, optimizer="adam", lr=1e-3, adam_warmup=2)
    results, _ = run_probe(cfg)
    rows = [r for res in results for r in res["batches"]]
    assert all(r[k] == r["grpo"] for r in rows for k in KINDS[1:])
    assert any(r["grpo"]["entropy"] != 0.0 for r in rows)  # the step did move the policy


def test_modulating_delta_changes_the_step_and_the_plot_is_written(tmp_path):
    results, summary = run_probe(ProbeConfig(**TINY, delta=0.0))
    rows = [r for res in results for r in res["batches"]]
    assert any(r["aem"] != r["grpo"] for r in rows)  # AEM's α moved the update
    assert all(s["aem_frac_groups_range_rule"] < 1.0 for s in summary.values())
    for s in summary.values():
        e = s["reversed"]["entropy"]
        assert e["lo"] <= e["mean"] <= e["hi"] and e["n"] == 2
    assert plot(summary, tmp_path / "probe.png").stat().st_size > 1000


@pytest.mark.slow
def test_script_writes_json_and_png(tmp_path):
    script = Path(__file__).resolve().parents[2] / "scripts" / "probe_aem.py"
    out = tmp_path / "p"
    subprocess.run([sys.executable, str(script), str(out), "--batches", "2", "--sft-steps", "3", "--tasks", "2",
                    "--n", "4"], check=True, timeout=600)  # fmt: skip
    data = json.loads((out / "probe.json").read_text())
    assert set(data["summary"]) == {"failure_dominated", "success_dominated"}
    assert (out / "probe.png").is_file()
