"""`make rehearsal` (issue 24 item 4): OpenRLHF's whole train_ppo_ray on CPU. The full run is slow-marked (several
minutes of both cores; `make rehearsal` is its entry, not CI); its two transport pieces are tested here on their own,
across the process boundary they serve, so a change that breaks them fails in CI rather than in the next rehearsal."""

from __future__ import annotations

import json
import socket
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
REHEARSAL = ROOT / "tests" / "openrlhf" / "rehearsal"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


RECEIVER = """
import sys
import torch
from rehearsal_hooks import digest, stateless_init_process_group

port, shape = int(sys.argv[1]), [int(x) for x in sys.argv[2:]]
group = stateless_init_process_group("127.0.0.1", port, 1, 2, "cuda:0")  # the engine's end (rank 1)
weight = torch.empty(shape, dtype=torch.bfloat16)  # as _cpu_update_weight allocates it
group.broadcast(weight, src=0, stream=None)
print(digest(weight))
"""


def test_gloo_group_delivers_bf16_weights_between_processes():
    """The stand-in for vLLM's PyNcclCommunicator: upstream's call signature, a bf16 tensor from rank 0 arrives
    bit-exact in another process (the PyNccl communicator it replaces sends nothing on CPU)."""
    sys.path.insert(0, str(REHEARSAL))
    import torch
    from rehearsal_hooks import GlooBroadcastGroup, digest

    port, shape = _free_port(), [512, 128]
    env = {"PATH": "/usr/bin:/bin", "PYTHONPATH": str(REHEARSAL), "HOME": str(Path.home())}
    proc = subprocess.Popen([sys.executable, "-c", RECEIVER, str(port), *map(str, shape)], env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)  # fmt: skip
    try:
        group = GlooBroadcastGroup("127.0.0.1", port, 0, 2, timeout_s=120)  # the trainer's end (rank 0)
        sent = torch.randn(shape, generator=torch.Generator().manual_seed(0)).to(torch.bfloat16)
        group.broadcast(sent, src=0, stream=None)
        out, err = proc.communicate(timeout=120)
    finally:
        proc.kill()
    assert proc.returncode == 0, err[-3000:]
    assert out.strip() == digest(sent)
    assert out.strip() != digest(torch.zeros(shape, dtype=torch.bfloat16))


@pytest.mark.vllm
def test_vllm_finds_the_rehearsal_plugin_only_on_the_rehearsal_path(tmp_path):
    """vLLM's own plugin loader (every vLLM process runs it) finds the entry point of the dist-info folder when
    the rehearsal folder is on the path, and the plugin patches upstream's WorkerWrap only when the rehearsal's
    output dir is set (otherwise it stays inert)."""
    code = (
        "import os, vllm.plugins as p\n"
        "from openrlhf.trainer.ray.vllm_worker_wrap import WorkerWrap\n"
        "before = WorkerWrap.update_weight.__name__\n"
        "plugins = p.load_plugins_by_group(p.DEFAULT_PLUGINS_GROUP)\n"
        "plugins['swe_rl_rehearsal']()\n"
        "print('swe_rl_rehearsal' in plugins, before, WorkerWrap.update_weight.__name__)\n"
    )
    path = f"{ROOT / 'tests/openrlhf/cuda_fakes'}:{REHEARSAL}:{ROOT}"
    runs = {}
    for label, extra in (("rehearsal", {"SWE_RL_REHEARSAL_OUT": str(tmp_path)}), ("elsewhere", {})):
        env = {"PATH": "/usr/bin:/bin", "PYTHONPATH": path, "HOME": str(Path.home()), **extra}
        res = subprocess.run([sys.executable, "-c", code], env=env, cwd=tmp_path, capture_output=True, text=True,
                             timeout=300)  # fmt: skip
        assert res.returncode == 0, res.stderr[-3000:]
        runs[label] = res.stdout.strip().splitlines()[-1]
    assert runs["rehearsal"] == "True update_weight _cpu_update_weight"
    assert runs["elsewhere"] == "True update_weight update_weight"


@pytest.mark.slow
@pytest.mark.vllm
@pytest.mark.docker
@pytest.mark.ray
@pytest.mark.timeout(1800)
def test_make_rehearsal_trains_and_syncs_the_engine(tmp_path):
    """`make rehearsal` from the repo root, as a user runs it: every check of both launches (the second resumes
    from the first's checkpoint) passes, read back from the summary the driver writes."""
    work = tmp_path / "rehearsal"
    res = subprocess.run(["make", "rehearsal", f"REHEARSAL_ARGS=--work {work}"], cwd=ROOT, capture_output=True,
                         text=True, timeout=1700)  # fmt: skip
    summary = json.loads((work / "summary.json").read_text())
    assert res.returncode == 0, res.stdout[-6000:] + res.stderr[-3000:]
    assert [p["label"] for p in summary["phases"]] == ["run 1", "run 2, resumed"]
    for phase in summary["phases"]:
        assert phase["error"] is None
        names = {name.split(",")[0] for name, ok, _ in phase["checks"] if ok}
        assert {"one weight sync per step", "engine after the last sync == final saved model",
                "training changed the weights", "DeepSpeed checkpoint of the last step"} <= names  # fmt: skip
        assert all(ok for _, ok, _ in phase["checks"])
    resumed = {name for name, ok, _ in summary["phases"][1]["checks"] if ok}
    assert "resumed: the engine first gets the checkpoint's weights" in resumed
