"""The `deepspeed` case of real_actors_main.py: our policy actor as upstream builds it (its own
`init_model_from_pretrained`: a DeepSpeedEngine, ZeRO-2 and ZeRO-3 side by side, DeepSpeed's CPU accelerator), then
upstream's `append` -> `fit` -> `save_checkpoint`, and upstream's `init_model_from_pretrained` again resuming from
that checkpoint (`load_ckpt`).

Named pieces that differ from the GPU path: the CPU_FOR_CUDA shim (cuda_shim.py) in each actor process,
`torch_adam: true` in the optimizer section (DeepSpeed's FusedAdam would JIT-compile a CUDA-style op for ~7 min;
the optimizer math is torch's AdamW either way), DeepSpeed's CPU-only shared-memory collective op left unbuilt
(see `_in_actor_setup`), and the resume runs in the same actor process after dropping the
trained engine (see `_resume_in_place`; a job restart on the cluster is a new process). Everything else is upstream's: strategy, Actor, engine, replay
buffer, PolicyLoss, scheduler (from `prepare_datasets` on our dataset), checkpoint I/O.
"""

from __future__ import annotations

import sys
from typing import Any

import ray


def _in_actor_setup(policy: Any) -> list[str]:
    """Runs in the policy actor before upstream's init: the shim, then DeepSpeed's CPU set-up (torch's AdamW, no
    JIT-built shared-memory collective op; cuda_shim.deepspeed_on_cpu)."""
    import cuda_shim

    routed = cuda_shim.install()
    cuda_shim.deepspeed_on_cpu()
    return routed


def _engine_facts(policy: Any) -> dict:
    """What upstream built: the engine class, its ZeRO stage, whether parameters are partitioned (ZeRO-3)."""
    import importlib

    model = policy.actor.model
    params = list(model.module.parameters())
    return {
        "shm_comm_op": importlib.import_module("deepspeed.comm.comm").cdb.shm_comm_op,  # the live backend
        "engine": type(model).__name__,
        "stage": model.zero_optimization_stage(),
        "partitioned": all(hasattr(p, "ds_id") and p.data.numel() == 0 for p in params),
        "optimizer": type(model.optimizer).__name__,
        "basic_optimizer": type(getattr(model, "basic_optimizer", None)).__name__,
        "max_steps": policy.max_steps,
    }


def _state(policy: Any) -> dict:
    """Full weights (gathered under ZeRO-3), scheduler state, optimizer steps, and the shim's routed calls."""
    import cuda_shim
    import deepspeed

    engine = policy.actor.model
    params = list(engine.module.named_parameters())
    with deepspeed.zero.GatheredParameters(
        [p for _, p in params], enabled=engine.zero_optimization_stage() == 3
    ):
        weights = {n: p.detach().float().clone() for n, p in params}
    return {
        "weights": weights,
        "scheduler": policy.actor_scheduler.state_dict(),
        "global_steps": engine.global_steps,
        "checkpoint_states": policy.get_checkpoint_states(),
        "cuda_calls": sorted(set(cuda_shim.CALLS)),
    }


def _group(n_gpus: int = 1):
    """A policy actor group as train_ppo_ray creates it (our class after install_swe_rl_classes), with the shim
    installed in its process first (a ref: the actor boots and imports while the driver goes on)."""
    from openrlhf.trainer.ray.launcher import RayActorGroup
    from openrlhf.trainer.ray.ppo_actor import PolicyModelActor  # ours after install_swe_rl_classes

    group = RayActorGroup(1, n_gpus, PolicyModelActor, num_gpus_per_actor=1)
    return group, group.async_run_method("__ray_call__", _in_actor_setup)


def _each(groups: dict, method_name: str, *args, **kwargs) -> dict:
    """One upstream method on every stage's group at once (the stages' actors work concurrently); rank 0's result."""
    refs = {s: g.async_run_method(method_name, *args, **kwargs) for s, g in groups.items()}
    return {s: ray.get(r)[0] for s, r in refs.items()}


def _resume_in_place(policy: Any, strategy: Any, model_dir: str, max_steps: int) -> None:
    """Runs in the policy actor after its save: drop the trained engine, then upstream's init_model_from_pretrained
    again (a new model from `model_dir`, a new DeepSpeedEngine, and --ckpt.load_enable's load_ckpt of the saved
    checkpoint). In the same process rather than a new actor: a second process would import upstream's stack
    again (~30 s of CPU on 2 cores); the check stays sharp, since everything resumed is read from disk (without
    load_ckpt the weights would be model_dir's, the scheduler and step counter at 0, the client states empty)."""
    import gc

    policy.actor = policy.actor_optim = policy.actor_scheduler = None
    gc.collect()
    policy.init_model_from_pretrained(strategy, model_dir, max_steps)


def run_deepspeed(job: dict) -> dict:
    """Every ZeRO stage in job["args_by_stage"] on the one Ray cluster, side by side: each stage's actor is created
    up front, so the processes start and import upstream's stack (the dominant cost here) concurrently."""
    import time

    from openrlhf.trainer.ppo_trainer import prepare_datasets
    from openrlhf.trainer.ppo_utils.kl_controller import FixedKLController
    from openrlhf.utils import get_strategy
    from real_actors_main import _summary
    from transformers import AutoTokenizer

    from swe_rl.train.openrlhf.actors import SweRlExperienceMaker

    t0 = time.perf_counter()
    timings: dict[str, float] = {}

    def mark(what: str) -> None:
        timings[what] = round(time.perf_counter() - t0, 1)
        print(f"deepspeed case: {what} at {timings[what]} s", file=sys.stderr, flush=True)

    stages = job["args_by_stage"]
    started = {s: _group() for s in stages}
    tok = AutoTokenizer.from_pretrained(job["model_dir"])
    strategies = {s: get_strategy(a) for s, a in stages.items()}
    max_steps = {
        s: prepare_datasets(st, tok)[2] for s, st in strategies.items()
    }  # upstream's scheduler length
    out: dict = {s: {"routed": ray.get(r)[0]} for s, (_, r) in started.items()}
    mark("actors up")
    groups = {s: g for s, (g, _) in started.items()}
    refs = [r for s, g in groups.items()
            for r in g.async_init_model_from_pretrained(strategies[s], job["model_dir"], max_steps[s])]  # fmt: skip
    ray.get(refs)
    mark("init_model_from_pretrained")
    for s, facts in _each(groups, "__ray_call__", _engine_facts).items():
        out[s]["facts"] = facts
    for s, before in _each(groups, "__ray_call__", _state).items():
        out[s]["before"] = before
    exps = {}
    for s, g in groups.items():  # exact entropy from inside the DeepSpeedEngine
        maker = SweRlExperienceMaker(g, None, None, None, FixedKLController(0.0), strategies[s], tok)
        exps[s] = maker.make_experience_batch(job["samples"])
        out[s]["experiences"] = _summary(exps[s])
    mark("make_experience_batch")
    append = [
        r
        for s, g in groups.items()
        for r in g.async_run_method_batch(method_name="append", experience=exps[s])
    ]
    ray.get(append)  # as PPOTrainer.train_step
    for s, status in _each(groups, "fit", kl_ctl=0.0).items():
        out[s]["status"] = status
    mark("append+fit")
    for s, after in _each(groups, "__ray_call__", _state).items():
        out[s]["after"] = after
    _each(groups, "save_checkpoint", tag="global_step1", client_states=job["client_states"])
    mark("save_checkpoint")
    refs = [r for s, g in groups.items()
            for r in g.async_run_method("__ray_call__", _resume_in_place, strategies[s], job["model_dir"], max_steps[s])]  # fmt: skip
    ray.get(refs)
    for s, resumed in _each(groups, "__ray_call__", _state).items():
        out[s]["resumed"] = resumed
    mark("resume (load_ckpt)")
    for g in groups.values():
        _kill(g)
    for s in stages:
        out[s]["timings"] = timings
    return out


def _kill(group: Any) -> None:
    for a in group._actor_handlers:
        ray.kill(a)
