"""Cluster scripts that run here: the GPU smoke script in its CPU mode, the node check, sandbox cleanup and image
pre-pull against the real Docker engine (only containers this test creates are touched)."""

from __future__ import annotations

import json
import subprocess
import uuid
from pathlib import Path

import pytest

from swe_rl.train.openrlhf.envcheck import check_package, run_checks

ROOT = Path(__file__).resolve().parents[2]
BASE_IMAGE = "swe-rl/base:bookworm"


def _run(cmd: list[str], **kw) -> subprocess.CompletedProcess:
    return subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=300, **kw)


def test_gpu_smoke_cpu_mode(capsys):
    from swe_rl.train.openrlhf.gpu_smoke import main

    assert main(["--device", "cpu", "--steps", "2", "--chunk", "16"]) == 0
    lines = capsys.readouterr().out.splitlines()
    ent = json.loads(next(x for x in lines if x.startswith("entropy "))[len("entropy ") :])
    assert ent["entropy_vocab"] == 151936 and ent["entropy_max_abs_err"] < 1e-3
    steps = [json.loads(x) for x in lines if x.startswith('{"step"')]
    assert len(steps) == 2 and all(s["tokens_per_s"] > 0 for s in steps)
    assert steps[0]["alpha_min"] < 1.0 < steps[0]["alpha_max"], "AEM should be active on the smoke batch"
    assert lines[-1] == "SMOKE OK"


def test_gpu_smoke_script_refuses_cuda_without_gpu():
    import torch

    if torch.cuda.is_available():
        pytest.skip("a GPU is present")
    res = _run(["bash", "scripts/gpu_smoke.sh", "--device", "cuda"])  # the shell entry point, end to end
    assert res.returncode == 2 and "use --device cpu" in res.stdout, res.stderr


def test_gpu_check_refuses_a_machine_without_cuda_unless_told_it_is_a_dry_run(tmp_path):
    import os
    import sys

    import torch

    if torch.cuda.is_available():
        pytest.skip("a GPU is present")
    env = {
        **os.environ,
        "OUT": str(tmp_path),
        "PYTHON": sys.executable,
        "GPU_CHECK_WHEELS": str(tmp_path / "none"),
    }
    work = set(Path("/tmp").glob("swe_rl_gpu_check.*"))  # the train part's run folders
    res = _run(["bash", "scripts/gpu_check.sh", "--bench"], env=env)  # the check's parts refuse the same way
    assert set(Path("/tmp").glob("swe_rl_gpu_check.*")) == work, "a refused check leaves no run folder behind"
    assert res.returncode == 1 and "no CUDA device" in res.stdout and "--allow-cpu" in res.stdout, res.stdout
    assert "cuda_available False" in (tmp_path / "device.txt").read_text()  # the device line is written first
    assert not list(tmp_path.glob("*.log")), "no part may run without CUDA or --allow-cpu"
    bad = _run(["bash", "scripts/gpu_check.sh", "--bnch"], env=env)
    assert bad.returncode == 2 and "unknown argument --bnch" in bad.stderr and "--bench" in bad.stderr


def test_gpu_dry_env_says_what_it_needs(tmp_path):
    """Its bad input, each one line and exit 2 before anything is made (building the environment needs PyPI and
    ~3 GB: run by hand, docs/development.md)."""
    res = _run(["bash", "scripts/gpu_dry_env.sh"])
    assert res.returncode == 2 and "name the folder to make" in res.stderr, res.stderr
    res = _run(["bash", "scripts/gpu_dry_env.sh", str(tmp_path / "env"), "--python", "/bin/false"])
    assert res.returncode == 2 and "no CPython 3.12 found (/bin/false)" in res.stderr, res.stderr
    res = _run(["bash", "scripts/gpu_dry_env.sh", "--pyton", "x"])
    assert res.returncode == 2 and "unknown argument --pyton" in res.stderr, res.stderr
    assert not (tmp_path / "env").exists()


def test_env_check_reports_missing_gpu_stack(tmp_path):
    checks = {c.name: c for c in run_checks(8, 1.0, [str(tmp_path)], [], docker=False, shm_gb=0)}
    assert checks["openrlhf"].ok and checks["torch"].ok and checks[f"disk {tmp_path}"].ok
    assert not checks["gpus"].ok and "need 8" in checks["gpus"].detail
    assert not check_package("vllm", "0.29.0").ok
    assert "not installed (need 0.29.0" in check_package("vllm", "0.29.0").detail
    assert "need 9.9.9" in check_package("torch", "9.9.9").detail
    res = _run(
        [
            ".venv/bin/python",
            "-m",
            "swe_rl.train.openrlhf.envcheck",
            "--gpus",
            "0",
            "--no-docker",
            "--shm-gb",
            "0",
        ]
    )
    assert res.returncode == 1 and "FAIL vllm" in res.stdout and "checks passed" in res.stdout


@pytest.mark.docker
def test_cleanup_removes_only_this_nodes_sandboxes_of_the_run():
    run_id = f"orl-test-{uuid.uuid4().hex[:8]}"
    host = _run(["hostname"]).stdout.strip()
    labels = ["--label", "sandboxes.managed=1", "--label", f"sandboxes.run_id={run_id}"]
    mine = _run(["docker", "create", *labels, "--label", f"sandboxes.owner_host={host}", BASE_IMAGE, "true"])
    other = _run(
        ["docker", "create", *labels, "--label", "sandboxes.owner_host=elsewhere", BASE_IMAGE, "true"]
    )
    ids = [mine.stdout.strip(), other.stdout.strip()]
    try:
        assert all(ids), mine.stderr + other.stderr
        dry = _run(["bash", "scripts/cluster/cleanup_sandboxes.sh", "--run-id", run_id, "--dry-run"])
        assert "would remove 1 sandbox containers" in dry.stdout
        res = _run(["bash", "scripts/cluster/cleanup_sandboxes.sh", "--run-id", run_id])
        assert res.returncode == 0 and "removed 1 sandbox containers" in res.stdout, res.stderr
        left = _run(
            ["docker", "ps", "-aq", "--no-trunc", "--filter", f"label=sandboxes.run_id={run_id}"]
        ).stdout
        assert left.split() == [ids[1]]
    finally:
        _run(["docker", "rm", "-f", *[i for i in ids if i]])


@pytest.mark.docker
def test_prepull_reports_present_and_missing_images(tmp_path):
    images = tmp_path / "images.txt"
    images.write_text(f"# sandbox images\n{BASE_IMAGE}\nlocalhost:1/swe-rl-missing:none\n")
    res = _run(
        ["bash", "scripts/cluster/prepull_images.sh"],
        env={"IMAGES_FILE": str(images), "PATH": "/usr/bin:/bin"},
    )
    assert f"present {BASE_IMAGE}" in res.stdout
    assert "MISSING localhost:1/swe-rl-missing:none" in res.stderr and res.returncode != 0
