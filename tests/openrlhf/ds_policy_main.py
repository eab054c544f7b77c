"""The `ds2` / `ds3` cases of real_actors_main.py: our policy actor as upstream builds it (its own
`init_model_from_pretrained`: a DeepSpeedEngine, ZeRO-2 or ZeRO-3, DeepSpeed's CPU accelerator), then upstream's
`append` -> `fit` -> `save_checkpoint`, and a second actor resuming from that checkpoint (`load_ckpt`).

Named pieces that differ from the GPU path: the CPU_FOR_CUDA shim (cuda_shim.py) in each actor process, and
`torch_adam: true` in the optimizer section (DeepSpeed's FusedAdam would JIT-compile a CUDA-style op for ~7 min;
the optimizer math is torch's AdamW either way). Everything else is upstream's: strategy, Actor, engine, replay
buffer, PolicyLoss, scheduler (from `prepare_datasets` on our dataset), checkpoint I/O.
"""

from __future__ import annotations

from typing import Any

import ray


def _in_actor_setup(policy: Any) -> list[str]:
    """Runs in the policy actor before upstream's init: the shim, and torch's AdamW in DeepSpeed's config."""
    import cuda_shim
    from openrlhf.utils.deepspeed.deepspeed import DeepspeedStrategy

    routed = cuda_shim.install()
    upstream = DeepspeedStrategy.get_ds_train_config

    def get_ds_train_config(self, optim_dict=None, **kwargs):
        cfg = upstream(self, optim_dict, **kwargs)
        if "optimizer" in cfg:
            cfg["optimizer"]["params"]["torch_adam"] = True
        return cfg

    DeepspeedStrategy.get_ds_train_config = get_ds_train_config
    return routed


def _engine_facts(policy: Any) -> dict:
    """What upstream built: the engine class, its ZeRO stage, whether parameters are partitioned (ZeRO-3)."""
    model = policy.actor.model
    params = list(model.module.parameters())
    return {
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


def _policy(strategy: Any, model_dir: str, max_steps: int):
    from openrlhf.trainer.ray.launcher import RayActorGroup
    from openrlhf.trainer.ray.ppo_actor import PolicyModelActor  # ours after install_swe_rl_classes

    group = RayActorGroup(1, 1, PolicyModelActor, num_gpus_per_actor=1)  # as train_ppo_ray creates it
    routed = ray.get(group.async_run_method("__ray_call__", _in_actor_setup))[0]
    ray.get(group.async_init_model_from_pretrained(strategy, model_dir, max_steps))
    return group, routed


def run_deepspeed(job: dict) -> dict:
    """Every ZeRO stage in job["args_by_stage"] on the one Ray cluster (its start dominates on 2 cores)."""
    return {stage: _one_stage(job, args) for stage, args in job["args_by_stage"].items()}


def _one_stage(job: dict, args: Any) -> dict:
    from openrlhf.trainer.ppo_trainer import prepare_datasets
    from openrlhf.trainer.ppo_utils.kl_controller import FixedKLController
    from openrlhf.utils import get_strategy
    from transformers import AutoTokenizer

    from swe_rl.train.openrlhf.actors import SweRlExperienceMaker

    strategy = get_strategy(args)
    tok = AutoTokenizer.from_pretrained(job["model_dir"])
    _, _, max_steps = prepare_datasets(strategy, tok)  # upstream's scheduler length on our prompt rows
    group, routed = _policy(strategy, job["model_dir"], max_steps)
    out: dict = {"routed": routed, "facts": ray.get(group.async_run_method("__ray_call__", _engine_facts))[0]}
    out["before"] = ray.get(group.async_run_method("__ray_call__", _state))[0]

    maker = SweRlExperienceMaker(group, None, None, None, FixedKLController(0.0), strategy, tok)
    exps = maker.make_experience_batch(job["samples"])  # exact entropy from inside the DeepSpeedEngine
    out["experiences"] = [
        {
            "index": list(e.index),
            "advantages": e.advantages,
            "action_mask": e.action_mask,
            "info": dict(e.info),
        }
        for e in exps
    ]
    ray.get(group.async_run_method_batch(method_name="append", experience=exps))  # as PPOTrainer.train_step
    out["status"] = ray.get(group.async_run_method(method_name="fit", kl_ctl=0.0))[0]
    out["after"] = ray.get(group.async_run_method("__ray_call__", _state))[0]
    ray.get(
        group.async_run_method(
            method_name="save_checkpoint", tag="global_step1", client_states=job["client_states"]
        )
    )
    _kill(group)
    resumed, _ = _policy(strategy, job["model_dir"], max_steps)  # --ckpt.load_enable: upstream's load_ckpt
    out["resumed"] = ray.get(resumed.async_run_method("__ray_call__", _state))[0]
    _kill(resumed)
    return out


def _kill(group: Any) -> None:
    for a in group._actor_handlers:
        ray.kill(a)
