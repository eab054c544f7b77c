"""`preflight_actor_check()` (actors.py): our OpenRLHF classes checked as Ray runs them, before any GPU hour.

1. the driver: OpenRLHF's names are ours (install_swe_rl_classes ran);
2. the policy actor: a real Ray actor of SweRlPolicyModelActor (one GPU where the cluster has GPUs) runs
   upstream's `execute_batch("forward", ...)` on a tiny random Qwen2 wrapped in OpenRLHF's own `Actor`; the result
   must be our ExactForward, with upstream's log-probs and the exact entropy of softmax(logits / T);
3. the trainers: in a Ray worker, the classes Ray ships (PPOTrainer, PPOTrainerAsync with its TrainingActor and
   GenerateSamplesActor) must be ours. Creating the trainers themselves needs the model and the datasets; their
   seam is tested through real actors in tests/openrlhf/test_actors.py.
Each failure is one human-readable line.
"""

from __future__ import annotations

import importlib
import types
from typing import Any

import ray

TEMPERATURE = 0.7


def _driver_problems() -> list[str]:
    from swe_rl.train.openrlhf.actors import REPLACEMENTS

    out = []
    for module, name, ours in REPLACEMENTS:
        if getattr(importlib.import_module(module), name) is not ours:
            out.append(f"{module}.{name} is OpenRLHF's own class: install_swe_rl_classes() has not run")
    return out


def _tiny_actor(device: Any) -> Any:
    """OpenRLHF's Actor around a random 1-layer Qwen2 (vocab 64), as init_model_from_pretrained would hold it."""
    import torch
    from openrlhf.models.actor import Actor
    from transformers import Qwen2Config, Qwen2ForCausalLM

    torch.manual_seed(0)
    cfg = Qwen2Config(
        vocab_size=64, hidden_size=32, intermediate_size=64, num_hidden_layers=1,
        num_attention_heads=2, num_key_value_heads=1, max_position_embeddings=64,
    )  # fmt: skip
    actor = Actor(Qwen2ForCausalLM(cfg).to(device).float(), temperature=TEMPERATURE)
    actor.packing_samples = False  # upstream sets it only when it loads the model from a path
    return actor


def probe_policy_forward(policy: Any) -> list[str]:
    """Runs inside the policy actor (via __ray_call__): upstream's execute_batch → our forward."""
    import torch

    from swe_rl.train.openrlhf.entropy_forward import ExactForward

    device = torch.cuda.current_device() if torch.cuda.is_available() else "cpu"
    policy.actor = _tiny_actor(device)
    policy.strategy = types.SimpleNamespace(
        ring_attn_group=None, is_rank_0=lambda: True
    )  # DeepSpeed's stand-in
    g = torch.Generator().manual_seed(0)
    seqs = torch.randint(1, 64, (2, 12), generator=g)
    attn = torch.ones_like(seqs)
    mask = torch.zeros(2, 11, dtype=torch.bool)
    mask[:, 4:9] = True
    data = {"sequences": [seqs], "action_mask": [mask], "attention_mask": [attn]}
    out = policy.execute_batch("forward", data, 0, 1)[0]
    if not isinstance(out, ExactForward):
        return [
            f"policy actor forward returned {type(out).__name__}, not swe-rl's ExactForward (upstream's ran)"
        ]
    with torch.no_grad():
        ref_logp = policy.actor(seqs.to(device), mask.to(device), attn.to(device)).cpu()
        logits = policy.actor.model(seqs.to(device)).logits.float().cpu() / TEMPERATURE
        want = torch.distributions.Categorical(logits=logits).entropy()[:, :-1] * mask
    problems = []
    if not torch.allclose(out.log_probs, ref_logp, atol=1e-5):
        problems.append("policy actor forward: log-probs differ from OpenRLHF's own forward")
    if out.entropy.shape != mask.shape or not torch.allclose(out.entropy, want, atol=1e-4):
        problems.append("policy actor forward: entropy is not the exact entropy of softmax(logits / T)")
    return problems


def _policy_problems() -> list[str]:
    from swe_rl.train.openrlhf.actors import SweRlPolicyModelActor

    gpus = 1 if ray.cluster_resources().get("GPU", 0) >= 1 else 0
    actor: Any = SweRlPolicyModelActor.options(num_gpus=gpus, num_cpus=0).remote(1, 0, None, None)
    try:
        return ray.get(actor.__ray_call__.remote(probe_policy_forward), timeout=600)
    except Exception as e:  # one line per problem, never a traceback
        return [f"policy actor: {type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}"]
    finally:
        ray.kill(actor)


@ray.remote(num_cpus=0)
def _trainer_classes_in_worker(sync_blob: bytes, async_blob: bytes) -> list[str]:
    """The trainer classes unpickled in a worker from cloudpickle bytes made in the driver, as Ray exports an
    actor class (by value, with the module globals its methods read at that moment)."""
    from ray import cloudpickle

    from swe_rl.train.openrlhf.actors import user_class

    problems = []
    sync_cls = cloudpickle.loads(sync_blob)
    if sync_cls.__qualname__ != "SweRlPPOTrainer":
        problems.append(f"PPOTrainer in the workers is {sync_cls.__qualname__}, not swe-rl's")
    globs = cloudpickle.loads(async_blob).__init__.__globals__
    for name in ("TrainingActor", "GenerateSamplesActor"):
        got = user_class(globs[name]).__qualname__
        if got != f"SweRl{name}":
            problems.append(f"PPOTrainerAsync creates {got} in the workers, not swe-rl's SweRl{name}")
    return problems


def check_actor_classes() -> list[str]:
    """All the checks above on the current Ray cluster (ray.init must have run)."""
    if not ray.is_initialized():
        return ["Ray is not initialized: the actor check needs the cluster (ray.init(address=...))"]
    problems = _driver_problems()
    if problems:
        return problems
    from openrlhf.trainer.ppo_trainer import PPOTrainer
    from openrlhf.trainer.ppo_trainer_async import PPOTrainerAsync
    from ray import cloudpickle

    from swe_rl.train.openrlhf.actors import user_class

    problems += _policy_problems()
    blobs = [cloudpickle.dumps(user_class(c)) for c in (PPOTrainer, PPOTrainerAsync)]
    try:
        found: list[str] = ray.get(_trainer_classes_in_worker.remote(*blobs), timeout=600)
        problems += found
    except Exception as e:
        problems.append(f"trainer classes: {type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}")
    return problems
