"""The launcher's runtime env really runs our setup hook inside Ray workers (real Ray, a fresh job per case, in a
subprocess so the session-wide local Ray of other tests is untouched). Without the AEM config the hook is a no-op;
with it, the hook imports OpenRLHF's trainer modules, which fail on a CPU machine, so the worker dies: proof that
the hook ran there with the config it was given."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from swe_rl.config import load_config
from swe_rl.train.openrlhf.config import OpenRLHFTrainConfig
from swe_rl.train.openrlhf.launch import build_runtime_env

SCRIPT = """
import json, sys, ray
runtime_env = json.loads(sys.argv[1])
ray.init(num_cpus=1, include_dashboard=False, log_to_driver=False, configure_logging=False, runtime_env=runtime_env)
@ray.remote(max_retries=0)
def probe():
    import os
    return os.environ.get("SWE_RL_AGENT_CONFIG") is not None
try:
    print("RESULT", ray.get(probe.remote(), timeout=240))
except Exception as e:
    print("ERROR", type(e).__name__)
"""


def _run(runtime_env: dict) -> str:
    res = subprocess.run(
        [sys.executable, "-c", SCRIPT, json.dumps(runtime_env)],
        capture_output=True, text=True, timeout=400, cwd=Path(__file__).resolve().parents[2],
    )  # fmt: skip
    lines = [x for x in res.stdout.splitlines() if x.startswith(("RESULT", "ERROR"))]
    assert lines, res.stdout + res.stderr
    return lines[-1]


@pytest.mark.ray
@pytest.mark.slow
def test_setup_hook_runs_in_ray_workers():
    cfg = load_config(OpenRLHFTrainConfig, files=["configs/train/qwen25_coder_7b_grpo_aem.yaml"])
    env = build_runtime_env(cfg, environ={})
    without_aem = {**env, "env_vars": {k: v for k, v in env["env_vars"].items() if k != "SWE_RL_AEM_CONFIG"}}
    assert _run(without_aem) == "RESULT True"  # hook found and ran as a no-op; env vars reached the worker
    assert _run(env) == "ERROR WorkerCrashedError"  # hook ran install(): no GPU stack here
