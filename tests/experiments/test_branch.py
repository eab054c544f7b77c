"""The branch experiment's runner (swe_rl/experiments/branch.py): trunks, paired branches from the trunk's exact
state, the collapse rule. One end-to-end run on the real decisions environment and trainer, at toy sizes."""

from __future__ import annotations

import json

import pytest
import yaml

from swe_rl.experiments import branch as B
from swe_rl.runs import RunDir

TINY = {
    "micro_suite": False,
    "train": {
        "save_every": 1, "keep_checkpoints": 1, "log_trajectories": 0, "model": {"size": "tiny", "threads": 1},
        "data": {"source": "decisions", "n_train": 200, "seed": 0,
                 "decisions": {"reason_first": True, "sft_steps": 2, "sft_batch": 8}},
        "rollout": {"tasks_per_step": 2, "n_samples": 2},
        "optim": {"lr": 1e-3, "minibatch": 4, "micro_batch": 4},
        "eval": {"every": 1, "n_tasks": 4, "sampled": 1, "split": "test"},
    },
}  # fmt: skip


def test_collapse_rule():
    assert B.is_collapsed({"right": 0.49, "entropy": 0.05})  # one answer whatever the file showed
    assert not B.is_collapsed({"right": 0.99, "entropy": 0.05})  # learned
    assert not B.is_collapsed({"right": 0.50, "entropy": 0.69})  # undecided, not collapsed
    assert not B.is_collapsed({"right": 0.10, "entropy": 0.05})  # outside the band


def test_seed_branch_copies_the_trunk_state_once(tmp_path):
    trunk = tmp_path / "trunk" / "grpo_s0"
    (trunk / "checkpoints" / "step_000050").mkdir(parents=True)
    with pytest.raises(FileNotFoundError, match="no checkpoint at step 50"):
        B.seed_branch(trunk, tmp_path / "grpo_aem_s0", 50)
    (trunk / "checkpoints" / "step_000050" / "state.pt").write_text("x")
    (trunk / "metrics.jsonl").write_text('{"step": 50}\n')
    dest = tmp_path / "grpo_aem_s0"
    B.seed_branch(trunk, dest, 50)
    assert (dest / "checkpoints" / "step_000050" / "state.pt").read_text() == "x"
    (dest / "metrics.jsonl").write_text('{"step": 51}\n')  # the branch has moved on: never copied over again
    B.seed_branch(trunk, dest, 50)
    assert (dest / "metrics.jsonl").read_text() == '{"step": 51}\n' and not list(tmp_path.glob(".tmp_*"))


def test_branch_end_to_end_pairs_the_arms_from_the_trunk_state(tmp_path):
    cfg = tmp_path / "tiny.yaml"
    cfg.write_text(yaml.safe_dump(TINY))
    out = tmp_path / "out"
    methods = ["grpo", "grpo_aem_action"]
    B.run_branch([str(cfg)], methods, [0], str(out), trunk_steps=2, branch_steps=1)
    trunk = RunDir(out / "trunk" / "grpo_s0").read_metrics()
    assert [r["step"] for r in trunk] == [0, 1, 2]
    assert [r["step"] for r in trunk if "eval/sampled_success" in r] == [0, 2]  # branch point only
    for m in methods:
        rows = RunDir(out / f"{m}_s0").read_metrics()
        assert [r["step"] for r in rows] == [0, 1, 2, 3]
        assert rows[:3] == trunk  # the branch's history is the trunk's, then it continues
        assert yaml.safe_load((out / f"{m}_s0" / "config.yaml").read_text())["steps"] == 3
    aem = RunDir(out / "grpo_aem_action_s0").read_metrics()[-1]
    assert "algo/aem/num_spans" in aem and "algo/aem/num_spans" not in trunk[-1]
    summary = json.loads((out / "summary.json").read_text())
    assert summary["primary"]["methods"]["grpo"]["steps"]["0"] == [
        0,
        2,
        3,
    ]  # the trunk's records, then its own
    table = json.loads((out / "collapses.json").read_text())
    assert table["split"] == "validation" and set(table["counts"]) == set(methods)
    assert set(table["runs"]) == {"trunk/grpo_s0", "grpo_s0", "grpo_aem_action_s0"}
    assert table["runs"]["grpo_s0"]["step"] == 3 and "edit:1" in table["runs"]["grpo_s0"]
    assert "| 0 |" in (out / "collapses.md").read_text()
    records = json.loads((out / "eval_records.json").read_text())
    assert set(records["trunk/grpo_s0"]) == {"0", "2"} and set(records["grpo_s0"]) == {"3"}  # no trunk copies
    sampled = records["grpo_s0"]["3"]["sampled"]
    assert len(sampled) == 4 and all(set(v) <= {"0", "1"} and len(v) == 1 for v in sampled.values())
