"""`swe-rl train-openrlhf --preflight` / `scripts/cluster/env_check.sh RECIPE`: the cluster's first minute, run here
for real (a local Ray started by the command, the real Docker engine, the repo-relative paths a user types). On
this CPU machine the GPU-only checks must fail with their reason and everything else must pass."""

from __future__ import annotations

import json
import platform
import shutil
import subprocess
import uuid
from pathlib import Path

import pytest

from swe_rl.config import load_config
from swe_rl.tasks.task import Task
from swe_rl.train.openrlhf.config import OpenRLHFTrainConfig
from swe_rl.train.openrlhf.data import write_prompt_dataset
from swe_rl.train.openrlhf.launch import agent_func_path
from swe_rl.train.openrlhf.preflight import dataset_check, gpu_check, gpus_needed

ROOT = Path(__file__).resolve().parents[2]
SECRET = "wandb-preflight-key-fedcba9876543210"
MISSING_IMAGE = "localhost:1/swe-rl-missing:none"


@pytest.mark.parametrize(
    ("recipe", "gpus"),
    [
        ("qwen25_coder_7b_grpo_aem.yaml", 8),  # colocated: 8 engines on the actor's 8 GPUs
        ("qwen25_coder_7b_grpo_aem_async.yaml", 8),  # 4 train + 4 vLLM
        ("qwen3_32b_deepswe_grpo_pp_aem.yaml", 64),
        ("qwen3_32b_deepswe_grpo_pp_aem_async.yaml", 64),  # 32 train + 8 engines x TP 4
    ],
)
def test_gpus_needed_match_the_hardware_table(recipe, gpus):
    cfg = load_config(OpenRLHFTrainConfig, files=[f"configs/train/{recipe}"])
    assert gpus_needed(cfg) == gpus
    assert gpu_check(cfg, {"GPU": float(gpus)}).ok and not gpu_check(cfg, {"GPU": gpus - 1.0}).ok


def test_dataset_check_names_the_bad_line(tmp_path):
    rows = tmp_path / "rows.jsonl"
    write_prompt_dataset(
        [Task(instance_id="a__b-1", image="img:1"), Task(instance_id="a__b-2", image="img:1")], rows
    )
    cfg = load_config(
        OpenRLHFTrainConfig,
        files=["configs/train/qwen25_coder_7b_grpo_aem.yaml"],
        overrides=[f"data.prompt_dataset={rows}", "rollout.prompts_per_step=2"],
    )
    check, images = dataset_check(cfg)
    assert check.ok and images == ["img:1"] and check.detail == "2 tasks, 1 sandbox images, 0 validated"
    rows.write_text(rows.read_text() + json.dumps({"prompt": "x", "label": "x"}) + "\n")
    check, _ = dataset_check(cfg)
    assert not check.ok and "line 3" in check.detail and "Task JSON" in check.detail


@pytest.mark.docker
def test_rows_without_gold_timing_fail_a_recipe_that_limits_by_it(orl_micro_task):
    """`swe-rl openrlhf-data` from the repo root says how many rows it validated; the preflight's dataset check
    passes its rows under a recipe with `agent.grade_timeout_gold_factor` (the cluster recipes set 10) and fails,
    naming the rows and the fix, when their records have no gold test time (rows made before gold was timed)."""
    import sys

    rel = Path("runs") / f"data-test-{uuid.uuid4().hex[:8]}"
    (ROOT / rel).mkdir(parents=True)
    try:
        missing = orl_micro_task.model_copy(update={"instance_id": "x__y-1", "image": MISSING_IMAGE})
        (ROOT / rel / "tasks.jsonl").write_text(
            orl_micro_task.model_dump_json() + "\n" + missing.model_dump_json()
        )
        res = subprocess.run(
            [str(Path(sys.executable).with_name("swe-rl")), "openrlhf-data", f"{rel}/tasks.jsonl",
             "-o", f"{rel}/rows.jsonl"],
            cwd=ROOT, capture_output=True, text=True, timeout=300,
        )  # fmt: skip
        assert res.returncode == 0, res.stderr[-2000:]
        assert f"wrote 2 rows to {rel}/rows.jsonl; 1 validated, 1 graded on every test" in res.stdout, (
            res.stdout
        )
        recipe = ["configs/train/qwen25_coder_7b_grpo_aem.yaml"]  # sets agent.grade_timeout_gold_factor: 10
        over = [f"data.prompt_dataset={ROOT / rel / 'rows.jsonl'}", "rollout.prompts_per_step=2"]
        cfg = load_config(OpenRLHFTrainConfig, files=recipe, overrides=over)
        assert cfg.agent.grade_timeout_gold_factor == 10
        check, _ = dataset_check(cfg)
        assert check.ok and check.detail == "2 tasks, 2 sandbox images, 1 validated", check.detail
        rows = [json.loads(x) for x in (ROOT / rel / "rows.jsonl").read_text().splitlines()]
        for row in rows:  # as `swe-rl openrlhf-data` wrote it before validation timed gold
            label = json.loads(row["label"])
            label["metadata"].get("validation", {}).pop("gold_test_s", None)
            row["label"] = json.dumps(label)
        (ROOT / rel / "rows.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
        check, _ = dataset_check(cfg)
        assert not check.ok, check.detail
        assert f"lack (made before it was timed: {orl_micro_task.instance_id})" in check.detail
        assert "agent.grade_timeout_gold_factor=10" in check.detail and "swe-rl openrlhf-data" in check.detail
        no_factor = load_config(
            OpenRLHFTrainConfig, files=recipe, overrides=[*over, "agent.grade_timeout_gold_factor=null"]
        )
        assert dataset_check(no_factor)[0].ok  # nothing asks for gold's time: the rows are fine
    finally:
        shutil.rmtree(ROOT / rel, ignore_errors=True)


@pytest.mark.ray
@pytest.mark.docker
@pytest.mark.slow  # make test's 15-minute budget (~18 s); .ci/run still runs it (make test-ci-slow)
@pytest.mark.ci_slow
def test_env_check_script_runs_the_preflight_from_the_repo_root(orl_micro_task):
    """The whole preflight through the shell entry point, relative recipe / dataset / checkpoint paths."""
    rel = Path("runs") / f"preflight-test-{uuid.uuid4().hex[:8]}"
    (ROOT / rel).mkdir(parents=True)
    try:
        tasks = [orl_micro_task, Task(instance_id="x__y-1", image=MISSING_IMAGE)]
        write_prompt_dataset(tasks, ROOT / rel / "rows.jsonl")
        res = subprocess.run(
            ["bash", "scripts/cluster/env_check.sh", "configs/train/qwen25_coder_7b_grpo_aem.yaml",
             "-o", f"data.prompt_dataset={rel}/rows.jsonl", "-o", "rollout.prompts_per_step=2",
             "-o", f"ckpt.path={rel}/ckpt", "--disk-gb", "1"],
            cwd=ROOT, capture_output=True, text=True, timeout=300,
            env={"PATH": "/usr/bin:/bin", "HOME": str(Path.home()), "SWE_RL_PY": ".venv/bin/python",
                 "WANDB_API_KEY": SECRET},
        )  # fmt: skip
    finally:
        shutil.rmtree(ROOT / rel)
    out = res.stdout
    lines = out.splitlines()
    assert res.returncode == 1, out + res.stderr
    assert SECRET not in out + res.stderr
    host = platform.node()
    expect_ok = [
        "OK   dataset: 2 tasks, 2 sandbox images",
        f"OK   {host}: openrlhf: 0.11.2",
        f"OK   {host}: file {agent_func_path()}: present",
        f"OK   {host}: file {ROOT / rel / 'rows.jsonl'}: present",
        f"OK   {host}: docker: engine",
        f"OK   {host}: disk {ROOT / rel / 'ckpt'}:",
    ]
    expect_fail = [
        "FAIL cluster gpus: Ray cluster has 0 GPUs, the recipe's placement needs 8",
        f"FAIL {host}: vllm: not installed",  # the GPU stack is absent here: named, not skipped
        f"FAIL {host}: images: 1/2 present; missing e.g. ['{MISSING_IMAGE}']",
        "FAIL logger: wandb is not installed",
    ]
    for want in expect_ok + expect_fail:
        assert any(line.startswith(want) for line in lines), f"no line starting {want!r} in:\n{out}"
    assert any(line.startswith(("OK   actors", "FAIL actors")) for line in lines), out
    # each node that lacks an image is named by its address, id and engine (swe_rl/rollout/nodes.py)
    named = [ln for ln in lines if ln.startswith("FAIL sandbox images on node ") and MISSING_IMAGE in ln]
    assert len(named) == 1 and "(engine " in named[0] and "1/2 present" in named[0], out
    assert lines[-1].startswith("preflight: ") and "failed" in lines[-1]
