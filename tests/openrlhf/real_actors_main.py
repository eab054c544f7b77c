"""Subprocess half of test_actors.py: OpenRLHF's real trainer classes on a real local Ray cluster (GPUs declared,
none used), with our classes installed the way launch.py installs them.

    PYTHONPATH=tests/openrlhf/cuda_fakes:.:tests/openrlhf python tests/openrlhf/real_actors_main.py CASE JOB.pkl OUT.pkl

It runs in its own process because OpenRLHF's modules only import with the flash-attn fake on the path (which
must not leak into the other tests) and because it needs a Ray cluster with GPU resources. JOB.pkl holds what the
test built: upstream's parsed args, rollout samples (upstream's Experience), the tiny model's directory.
Cases: `sync` (policy actors through RayActorGroup, our experience maker in this driver; dynamic filter through
upstream's _generate_vllm), `async` (the same batch inside PPOTrainerAsync's TrainingActor), `preflight`
(actors.preflight_actor_check before and after install_swe_rl_classes), `deepspeed` (ds_policy_main.py: upstream's
own init_model_from_pretrained → append → fit → save_checkpoint → resume, ZeRO-2 and ZeRO-3).
Named fakes: `load_tiny_policy` stands in for init_model_from_pretrained in `sync`/`async` (fast: no DeepSpeed
engine; `deepspeed` runs the real one); `CannedRolloutEngine` for RolloutRayActor (vLLM).
"""

from __future__ import annotations

import os
import pickle
import sys

import ray


def load_tiny_policy(policy, strategy, model_dir: str) -> str:
    """Runs in each policy actor: upstream's Actor around the tiny fp32 model (DeepSpeed's engine: CUDA)."""
    import torch
    from openrlhf.models.actor import Actor
    from transformers import AutoModelForCausalLM

    policy.strategy = strategy
    model = AutoModelForCausalLM.from_pretrained(model_dir, dtype=torch.float32)
    policy.actor = Actor(model, temperature=strategy.args.rollout.temperature)
    policy.actor.packing_samples = False  # upstream sets it only when it loads the model from a path
    return type(policy).__qualname__


@ray.remote(num_cpus=0)
class CannedRolloutEngine:
    """Stands in for RolloutRayActor: `generate_responses` returns the executor responses given per label."""

    def __init__(self, responses_by_label: dict):
        self.responses = responses_by_label

    def get_num_unfinished_requests(self) -> int:
        return 0

    def generate_responses(
        self, prompt, label, sampling_params, max_length, hf_tokenizer, num_samples, images
    ):
        return self.responses[label]


def _summary(exps) -> list[dict]:
    return [
        {
            "index": list(e.index),
            "sequences": e.sequences,
            "attention_mask": e.attention_mask,
            "advantages": e.advantages,
            "action_log_probs": e.action_log_probs,
            "action_mask": e.action_mask,
            "info": dict(e.info),
        }
        for e in exps
    ]


def _policy_group(strategy, model_dir):
    from openrlhf.trainer.ray.launcher import RayActorGroup
    from openrlhf.trainer.ray.ppo_actor import (
        PolicyModelActor,
    )  # what train_ppo_ray binds: ours after install

    group = RayActorGroup(1, 1, PolicyModelActor, num_gpus_per_actor=1)  # as train_ppo_ray creates it
    names = ray.get(group.async_run_method("__ray_call__", load_tiny_policy, strategy, model_dir))
    return group, names


def run_sync(job: dict) -> dict:
    from openrlhf.trainer.ppo_utils.kl_controller import FixedKLController
    from openrlhf.utils import get_strategy
    from transformers import AutoTokenizer

    from swe_rl.train.openrlhf.actors import SweRlExperienceMaker, SweRlSamplesGenerator

    strategy = get_strategy(job["args"])
    group, names = _policy_group(strategy, job["model_dir"])
    tok = AutoTokenizer.from_pretrained(job["model_dir"])
    maker = SweRlExperienceMaker(group, None, None, None, FixedKLController(0.0), strategy, tok)
    exps = maker.make_experience_batch(job["samples"])

    engine = CannedRolloutEngine.remote(job["filter_responses"])
    gen = SweRlSamplesGenerator(strategy, None, None, tok, [engine])
    batches = iter([(None, list(job["filter_responses"]), list(job["filter_responses"]), [None, None])])
    accepted, consumed, _ = gen._generate_vllm(batches, 2, dynamic_filtering=True, max_len=4096)
    return {
        "actor_classes": names,
        "experiences": _summary(exps),
        "filter_accepted_labels": sorted({e.labels[0] for e in accepted}),
        "filter_consumed": consumed,
    }


def _make_in_training_actor(training_actor, samples):
    exps = training_actor.experience_maker.make_experience_batch(samples)
    return type(training_actor).__qualname__, type(training_actor.experience_maker).__name__, _summary(exps)


def _through_async_trainer(trainer, samples):
    """Runs in PPOTrainerAsync: hand the batch to its TrainingActor, as its fit loop does via the queue."""
    return ray.get(trainer.trainer_actor.__ray_call__.remote(_make_in_training_actor, samples))


def run_async(job: dict) -> dict:
    from openrlhf.trainer.ppo_trainer_async import PPOTrainerAsync
    from openrlhf.utils import get_strategy

    strategy = get_strategy(job["args"])
    group, names = _policy_group(strategy, job["model_dir"])
    trainer = PPOTrainerAsync.remote(
        job["model_dir"], strategy, group, None, None, None, None, max_len=4096, temperature=0.7
    )
    trainer_cls, maker_cls, exps = ray.get(
        trainer.__ray_call__.remote(_through_async_trainer, job["samples"])
    )
    return {
        "actor_classes": names,
        "trainer_class": trainer_cls,
        "maker_class": maker_cls,
        "experiences": exps,
    }


def run_preflight(job: dict) -> dict:
    """The actor check as `--preflight` runs it, before and after install_swe_rl_classes()."""
    from swe_rl.train.openrlhf.actors import install_swe_rl_classes, preflight_actor_check

    before = preflight_actor_check()
    install_swe_rl_classes()
    return {"before_install": before, "after_install": preflight_actor_check()}


def main(case: str, job_path: str, out_path: str) -> None:
    with open(job_path, "rb") as f:
        job = pickle.load(f)
    env = {"PYTHONPATH": os.environ["PYTHONPATH"], **job["env"]}
    os.environ.update(job["env"])  # the driver reads the AEM config too (our maker lives here in `sync`)
    # retried on a slow raylet; workers at the driver's priority
    from sandboxes.raystart import init_local_ray

    init_local_ray(
        num_cpus=8, num_gpus=4, include_dashboard=False, log_to_driver=False, configure_logging=False,
        runtime_env={"env_vars": env},
    )  # fmt: skip
    if case != "preflight":
        from swe_rl.train.openrlhf.actors import install_swe_rl_classes

        install_swe_rl_classes()  # what launch.py does before OpenRLHF's CLI
    try:
        from ds_policy_main import run_deepspeed
        from rollout_main import run_rollout

        cases = {"sync": run_sync, "async": run_async, "preflight": run_preflight}
        cases.update(deepspeed=run_deepspeed, rollout=run_rollout)
        out = cases[case](job)
    finally:
        ray.shutdown()
    with open(out_path, "wb") as f:
        pickle.dump(out, f)


if __name__ == "__main__":
    main(*sys.argv[1:4])
