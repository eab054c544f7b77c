"""`swe-rl train` never mixes two runs in runs/<name>: a fresh run into a folder holding another run's metrics or
checkpoints, or `--resume` with settings the run was not trained with, is one error before anything starts (both
went through silently: the new run's `--resume` then continued the old run's newest checkpoint)."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import uuid
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
SWE_RL = str(Path(sys.executable).with_name("swe-rl"))


@pytest.fixture
def scratch():
    rel = Path("runs") / f"test-run-dir-{uuid.uuid4().hex[:8]}"
    (REPO / rel).mkdir(parents=True)
    yield rel
    shutil.rmtree(REPO / rel, ignore_errors=True)


def _train(scratch: Path, *args: str) -> subprocess.CompletedProcess[str]:
    cmd = [SWE_RL, "train", "-c", "configs/train/gpu_check.yaml", "-o", f"out_dir={scratch}", "-o", "device=cpu",
           *args]  # fmt: skip
    return subprocess.run(cmd, cwd=REPO, capture_output=True, text=True, timeout=120)


def _earlier_run(scratch: Path) -> Path:
    """runs/<name> as an earlier run of the recipe left it: its config, one metrics row, a checkpoint."""
    from swe_rl.config import load_config
    from swe_rl.runs import RunDir
    from swe_rl.train.config import TrainConfig

    over = ["device=cpu", f"out_dir={scratch}"]
    cfg = load_config(TrainConfig, files=[REPO / "configs/train/gpu_check.yaml"], overrides=over)
    run = RunDir.create(REPO / scratch, cfg.name)
    run.save_config(cfg)
    run.log_metrics(1, {"reward_mean": 0.5})
    (run.checkpoints / "step_000001").mkdir()
    (run.checkpoints / "step_000001" / "state.pt").write_bytes(b"")
    return run.root


def test_a_fresh_run_into_a_folder_holding_a_run_is_refused(scratch):
    root = _earlier_run(scratch)
    before = (root / "metrics.jsonl").read_text()
    res = _train(scratch)
    assert res.returncode == 2, res.stderr[-2000:]
    err = res.stderr.strip().splitlines()[-1]
    assert err.startswith(
        f"error: run directory {scratch}/gpu_check already holds a run (1 metrics rows, "
    ), err
    assert "checkpoint step_000001): --resume continues it" in err and "-o name=..." in err, err
    assert (root / "metrics.jsonl").read_text() == before  # nothing of the earlier run was touched


def test_resume_with_other_training_settings_is_refused_and_names_them(scratch):
    _earlier_run(scratch)
    res = _train(
        scratch, "-o", "optim.lr=5e-3", "-o", "algo.estimator.name=rloo", "-o", "steps=4", "--resume"
    )
    assert res.returncode == 2, res.stderr[-2000:]
    err = res.stderr.strip().splitlines()[-1]
    assert "--resume of " in err and "with settings it was not trained with" in err, err
    assert "algo.estimator.name: 'grpo' -> 'rloo'" in err and "optim.lr: 0.0001 -> 0.005" in err, err
    assert "steps:" not in err.split("(", 2)[1]  # a longer run is a resumed run's business


def test_resume_may_change_its_length_and_where_it_runs(scratch):
    from swe_rl.config import ConfigError, load_config
    from swe_rl.train.config import TrainConfig
    from swe_rl.train.run import check_run_dir

    _earlier_run(scratch)
    over = [
        f"out_dir={REPO / scratch}",
        "device=auto",
        "steps=10",
        "save_every=5",
        "eval.n_tasks=8",
        "model.threads=1",
    ]
    cfg = load_config(TrainConfig, files=[REPO / "configs/train/gpu_check.yaml"], overrides=over)
    check_run_dir(cfg, resume=True)  # no error (out_dir is absolute here: the same folder, named otherwise)
    lr = load_config(
        TrainConfig, files=[REPO / "configs/train/gpu_check.yaml"], overrides=[*over, "optim.lr=1"]
    )
    with pytest.raises(ConfigError, match=r"optim\.lr: 0\.0001 -> 1\.0"):
        check_run_dir(lr, resume=True)


@pytest.mark.parametrize(
    "override",
    ["steps=-1", "rollout.n_samples=0", "optim.micro_batch=0", "keep_checkpoints=0", "rollout.max_len=1"],
)
def test_counts_out_of_range_are_config_errors_naming_the_key(override):
    # `-o steps=-1` ran "0 steps" and wrote a run folder; n_samples=0 failed deep in the trainer
    from swe_rl.config import ConfigError, load_config
    from swe_rl.train.config import TrainConfig

    with pytest.raises(ConfigError, match=rf"bad value for '{override.split('=')[0]}'"):
        load_config(TrainConfig, overrides=[override])


@pytest.mark.docker
def test_ctrl_c_says_what_is_kept_and_resume_goes_on(scratch):
    # Ctrl-C ended `swe-rl train` with exit 130 and not a word; the run folder is what a user resumes from
    import signal
    import time

    args = [
        "-c",
        "configs/train/grpo_aem.yaml",
        "-o",
        "model.init=swe_rl/train/assets/demo_sft",
        "-o",
        f"out_dir={scratch}",
        "-o",
        "steps=3",
        "-o",
        "save_every=1",
        "-o",
        "rollout.slots=4",
        "-o",
        "rollout.tasks_per_step=2",
        "-o",
        "rollout.n_samples=2",
        "-o",
        "eval.n_tasks=2",
        "-o",
        "model.threads=2",
    ]
    ckpt = REPO / scratch / "grpo_aem" / "checkpoints" / "step_000001" / "state.pt"
    p = subprocess.Popen([SWE_RL, "train", *args], cwd=REPO, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                         text=True)  # fmt: skip
    try:
        deadline = time.monotonic() + 240
        while not ckpt.is_file() and p.poll() is None and time.monotonic() < deadline:
            time.sleep(0.2)
        assert ckpt.is_file(), "no first checkpoint"
        p.send_signal(signal.SIGINT)
        _, err = p.communicate(timeout=120)
    finally:
        p.kill()
    assert p.returncode == 130, err[-2000:]
    said = [x for x in err.splitlines() if x.startswith("interrupted: ")]
    assert said and "the newest checkpoint is step_00000" in said[0] and "--resume continues" in said[0], err[
        -2000:
    ]
    res = subprocess.run(
        [SWE_RL, "train", *args, "--resume"], cwd=REPO, capture_output=True, text=True, timeout=300
    )
    assert res.returncode == 0, res.stderr[-2000:]
    steps = [
        json.loads(x)["step"]
        for x in (REPO / scratch / "grpo_aem" / "metrics.jsonl").read_text().splitlines()
    ]
    assert max(steps) == 3
