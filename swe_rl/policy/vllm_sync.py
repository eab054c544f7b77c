"""In-place weight sync trainer -> vLLM engine, through vLLM's own weight-loading API (no restart, no disk).

The worker's `reload_weights(weights_iterator=[(name, tensor), ...], is_checkpoint_format=True)`
(vllm.model_executor.model_loader.reload) restores the layers' checkpoint-format parameters, calls the model's own
`load_weights` with HF names (fused qkv / gate_up sharding, tied embeddings handled by vLLM) and re-runs
`process_weights_after_loading` (on CPU that repacks the linear weights for oneDNN and drops the originals, so a
plain `param.copy_` would not reach the kernels). The engine runs it through `AsyncLLM.collective_rpc`.
vLLM's msgpack RPC decodes untyped arguments, so a tensor arrives as a bare [dtype, shape, buffer-index] list:
the tensors travel as (name, dtype, shape, bytes) and `WeightLoadExtension` (engine arg `worker_extension_cls`,
vLLM's hook for RL weight updates) rebuilds them in the worker. Then `reset_prefix_cache()` drops K/V computed
with the old weights, which prefix caching would otherwise reuse.

`rollout_policy(model, tokenizer, model_dir)` is the trainer's engine: a VLLMPolicy that follows the trainer's model.
"""

from __future__ import annotations

import tempfile
import time
from pathlib import Path
from typing import Any

EXTENSION = "swe_rl.policy.vllm_sync.WeightLoadExtension"


def pack_state(model: Any) -> list[tuple[str, str, list[int], bytes]]:
    """(HF name, dtype, shape, raw bytes) of every tensor in the model's state dict."""
    import torch

    out = []
    for name, t in model.state_dict().items():
        t = t.detach().to("cpu").contiguous()
        raw = t.view(-1).view(torch.uint8).numpy().tobytes()
        out.append((name, str(t.dtype).removeprefix("torch."), list(t.shape), raw))
    return out


def unpack_state(items: list[Any]) -> list[tuple[str, Any]]:
    import torch

    out = []
    for name, dtype, shape, raw in items:
        flat = torch.frombuffer(bytearray(raw), dtype=torch.uint8)
        out.append((name, flat.view(getattr(torch, dtype)).reshape(shape)))
    return out


class WeightLoadExtension:
    """Mixed into vLLM's worker (engine arg worker_extension_cls=EXTENSION); called via collective_rpc."""

    def swe_rl_load_weights(self, items: list[Any]) -> int:
        self.reload_weights(weights_iterator=unpack_state(items), is_checkpoint_format=True)  # type: ignore[attr-defined]
        return len(items)


async def push_weights(engine: Any, model: Any) -> float:
    """Load the model's current weights into a running AsyncLLM in place; returns the seconds it took."""
    t0 = time.perf_counter()
    await engine.collective_rpc("swe_rl_load_weights", args=(pack_state(model),))
    await engine.reset_prefix_cache()
    return time.perf_counter() - t0


def rollout_policy(model: Any, tokenizer: Any, model_dir: str | None = None, **overrides: Any) -> Any:
    """The trainer's VLLMPolicy: an engine on `model_dir` (or on a temporary copy of `model` when it has no
    folder, e.g. a fresh tiny model; written once per run, removed on close) that follows `model`."""
    from swe_rl.policy.vllm import VLLMPolicy

    tmp = None
    if not (model_dir and (Path(model_dir) / "config.json").is_file()):
        tmp = tempfile.TemporaryDirectory(prefix="swe-rl-vllm-")
        model.save_pretrained(tmp.name)
        tokenizer.save_pretrained(tmp.name)
        model_dir = tmp.name
    try:
        policy = VLLMPolicy.start(model_dir, model=model, **overrides)
    finally:
        if tmp is not None:  # the engine holds the weights in memory from here on
            tmp.cleanup()
    return policy
