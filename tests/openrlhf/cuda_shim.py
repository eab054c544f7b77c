"""CPU_FOR_CUDA: a named test shim that routes OpenRLHF 0.11.2's CUDA-only calls on the policy actor's path to CPU.

Installed inside each real policy actor process (real_actors_main.py `ds*` cases, via `__ray_call__`) before
upstream's own `init_model_from_pretrained`; never in the package. Each routed site is listed in `ROUTED` with the
upstream line it serves. Every other callable in `torch.cuda` raises `UnknownCudaCall` naming it, so a new CUDA
call on this path fails loudly instead of silently doing something else. Queries (`is_available`,
`device_count`, ...), seeding and torch's private helpers keep torch's own CPU behaviour (torch and DeepSpeed's CPU
accelerator call them).
"""

from __future__ import annotations

from typing import Any

import torch

# name -> (what it does here, the upstream sites it serves)
ROUTED: dict[str, tuple[str, str]] = {
    "set_device": ("no-op", "utils/deepspeed/deepspeed.py:97 setup_distributed"),
    "current_device": (
        "'cpu'",
        "ppo_actor.py:160 ppo_train, launcher.py:136 forward, deepspeed.py:614/633 all_reduce/all_gather, "
        "replay_buffer.py:104-165",
    ),
    "synchronize": ("no-op", "distributed_util.py:10 barrier, ppo_actor.py:583 fit, deepspeed_utils.py:189"),
    "empty_cache": ("no-op", "ppo_actor.py:577/582 fit, launcher.py:64, deepspeed.py:398, ppo_actor.py:417"),
    # the weight broadcast (the rehearsal): the stream argument of the communicator's broadcast; on CPU there is none
    "current_stream": ("None", "ppo_actor.py:436 broadcast_to_vllm"),
}
# torch's own behaviour stays for queries and for the RNG seeding torch.manual_seed forwards (lazy on CPU)
QUERIES = {
    "is_available",
    "device_count",
    "is_initialized",
    "is_bf16_supported",
    "manual_seed",
    "manual_seed_all",
}
CALLS: list[str] = []  # routed calls seen in this process (the tests assert the path really crossed them)


class UnknownCudaCall(RuntimeError):
    pass


def _routed(name: str, result: Any):
    def call(*args: Any, **kwargs: Any) -> Any:
        CALLS.append(name)
        return result

    call.__name__ = name
    return call


def _unknown(name: str):
    def call(*args: Any, **kwargs: Any) -> Any:
        raise UnknownCudaCall(f"CPU_FOR_CUDA shim: torch.cuda.{name} is not a known site on this path")

    return call


def install() -> list[str]:
    """Route `ROUTED`, fence the rest of torch.cuda, and map upstream's two CUDA device strings to CPU."""
    if torch.cuda.is_available():
        raise RuntimeError("CPU_FOR_CUDA shim is for CPU machines only")
    results = {"set_device": None, "current_device": "cpu", "synchronize": None, "empty_cache": None}
    results["current_stream"] = None
    for name in dir(torch.cuda):
        obj = getattr(torch.cuda, name)
        if name.startswith("_") or name in QUERIES or isinstance(obj, type) or not callable(obj):
            continue
        setattr(torch.cuda, name, _routed(name, results[name]) if name in ROUTED else _unknown(name))
    _mesh_on_cpu()
    _replay_buffer_on_cpu()
    return sorted(ROUTED)


def _mesh_on_cpu() -> None:
    """deepspeed.py:105 `init_device_mesh("cuda", ...)`: the same mesh over gloo on CPU."""
    from openrlhf.utils.deepspeed import deepspeed as ds_mod

    upstream = ds_mod.init_device_mesh

    def init_device_mesh(device_type: str, *args: Any, **kwargs: Any):
        if device_type != "cuda":
            raise UnknownCudaCall(f"CPU_FOR_CUDA shim: init_device_mesh({device_type!r}) not expected")
        CALLS.append("init_device_mesh")
        return upstream("cpu", *args, **kwargs)

    ds_mod.init_device_mesh = init_device_mesh


def _replay_buffer_on_cpu() -> None:
    """replay_buffer.py:40 `torch.device(f"cuda:{torch.cuda.current_device()}")`: the collate target is CPU."""
    from openrlhf.trainer.ppo_utils import replay_buffer as rb

    init = rb.NaiveReplayBuffer.__init__
    current = torch.cuda.current_device

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        torch.cuda.current_device = lambda: 0  # type: ignore[assignment]  # only to format the device string
        try:
            init(self, *args, **kwargs)
        finally:
            torch.cuda.current_device = current
        CALLS.append("replay_buffer.target_device")
        self.target_device = torch.device("cpu")

    rb.NaiveReplayBuffer.__init__ = __init__


def deepspeed_on_cpu() -> None:
    """DeepSpeed's CPU accelerator for upstream's strategy, in the process that builds the engine: no shared-memory
    collective op (DeepSpeed's CPU backend JIT-builds `deepspeed_shm_comm`, C++, ~2 min on 2 busy cores, cached only
    per machine, at init_distributed; without it DeepSpeed calls torch.distributed's gloo collectives directly, as
    it calls NCCL's on a GPU), and torch's AdamW in the optimizer section (`torch_adam: true`; FusedAdam would
    JIT-compile its op for ~7 min; the optimizer math is AdamW either way)."""
    import importlib

    from openrlhf.utils.deepspeed.deepspeed import DeepspeedStrategy

    importlib.import_module("deepspeed.comm.torch").build_shm_op = lambda: None  # (the attribute is `torch`)
    upstream = DeepspeedStrategy.get_ds_train_config

    def get_ds_train_config(self, optim_dict=None, **kwargs):
        cfg = upstream(self, optim_dict, **kwargs)
        if "optimizer" in cfg:
            cfg["optimizer"]["params"]["torch_adam"] = True
        return cfg

    DeepspeedStrategy.get_ds_train_config = get_ds_train_config
