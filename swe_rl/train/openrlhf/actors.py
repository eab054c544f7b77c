"""swe-rl's OpenRLHF 0.11.2 classes: real subclasses of upstream's, made Ray actors with `ray.remote` as upstream
does, and put in place of upstream's names before its CLI runs (`install_swe_rl_classes`).

Why subclasses: `@ray.remote` copies (tracing-wrapped) every method onto a subclass it builds when the class is
decorated, and that copy is what Ray exports to the workers; patching the class afterwards reaches nobody. So:
- `SweRlPolicyModelActor`: its old-log-prob `forward` also returns the exact per-token entropy (swe_rl.algo's
  chunked entropy inside OpenRLHF's own, packing-aware `return_entropy` path), as an explicit `ExactForward`;
- `SweRlExperienceMaker`: unwraps `ExactForward` where upstream gathers the actor's results and runs the AEM
  seam around upstream's `compute_advantages_and_returns` (aem_seam.py);
- `SweRlSamplesGenerator`: the dynamic filter sees each group's valid mean score (valid_groups.py), and each
  sample carries its turns' action tokens for AEM's action span (aem_seam.attach_action_part);
- `SweRlPPOTrainer` (sync), `SweRlTrainingActor` and `SweRlGenerateSamplesActor` (PPOTrainerAsync's two halves):
  upstream's trainers with our maker / samples generator, and one metrics.jsonl line per step
  (`write_metrics_line`: upstream's logged scalars, the step counter, consumed prompts and the step's tasks).
Importing this module imports OpenRLHF's trainer stack (DeepSpeed, vLLM): only the driver (launch.py) and the
processes that run these classes do. No worker setup hook, no environment flag for tensor transport.
"""

from __future__ import annotations

import functools
import importlib
import json
import os
from typing import Any

import ray
from openrlhf.trainer import ppo_trainer as _sync
from openrlhf.trainer import ppo_trainer_async as _async
from openrlhf.trainer.ppo_utils.experience_maker import RemoteExperienceMaker
from openrlhf.trainer.ppo_utils.samples_generator import SamplesGenerator
from openrlhf.trainer.ray import ppo_actor as _ppo_actor
from torch import Tensor

from swe_rl.train.openrlhf.aem_seam import advantages_with_seam, attach_action_part
from swe_rl.train.openrlhf.config import AemConfig
from swe_rl.train.openrlhf.entropy_forward import ExactForward, exact_forward
from swe_rl.train.openrlhf.loggers import write_metrics_line
from swe_rl.train.openrlhf.valid_groups import impute_invalid_scores

AEM_ENV = "SWE_RL_AEM_CONFIG"  # JSON of AemConfig, set by launch.py in the job's runtime env


def aem_config(environ: dict[str, str] | None = None) -> AemConfig:
    raw = (os.environ if environ is None else environ).get(AEM_ENV)
    try:
        return AemConfig.model_validate(json.loads(raw)) if raw else AemConfig()
    except (ValueError, TypeError) as e:
        raise ValueError(f"{AEM_ENV}: expected the JSON of an AemConfig ({e})") from e


def user_class(remote_cls: Any) -> type:
    """The Python class a `@ray.remote` class was made from. Ray's handle class (`ActorClass(Name)`) derives from
    ray.actor.ActorClass and from (a subclass of) the user's class, so the latter is in its MRO."""
    handle = type(remote_cls).__name__
    if not (handle.startswith("ActorClass(") and handle.endswith(")")):
        raise TypeError(f"{remote_cls!r} is not a @ray.remote class")
    name = handle[len("ActorClass(") : -1]
    for c in type(remote_cls).__mro__:
        if c.__qualname__ == name:
            return c
    raise TypeError(f"no class named {name} in the MRO of {handle}")


# ── policy actor: exact entropy in the old-log-prob forward (entropy_forward.py) ──


class _PolicyModelActor(user_class(_ppo_actor.PolicyModelActor)):  # type: ignore[misc]
    def forward(
        self,
        sequences,
        action_mask=None,
        attention_mask=None,
        packed_seq_lens=None,
        mm_train_inputs_list=None,
    ):
        cfg = aem_config()
        if not (cfg.enabled and cfg.entropy_source == "exact"):
            return super().forward(
                sequences, action_mask, attention_mask, packed_seq_lens, mm_train_inputs_list
            )
        if mm_train_inputs_list and getattr(self.actor, "is_vlm", False):
            raise NotImplementedError("swe-rl exact-entropy forward: VLM inputs are not supported")
        return exact_forward(self, sequences, action_mask, attention_mask, cfg.entropy_chunk)


_PolicyModelActor.__name__ = _PolicyModelActor.__qualname__ = "SweRlPolicyModelActor"
SweRlPolicyModelActor = ray.remote(num_gpus=1)(_PolicyModelActor)  # upstream: @ray.remote(num_gpus=1)


# ── experience maker and samples generator (plain classes inside the trainer actors) ──


class SweRlExperienceMaker(RemoteExperienceMaker):
    """Upstream's maker; the actor group's `ExactForward` results are split into log-probs (upstream's) and
    entropy (kept for this batch), and the AEM seam runs around upstream's advantages."""

    def __init__(self, *args: Any, aem: AemConfig | None = None, **kwargs: Any):
        super().__init__(*args, **kwargs)
        self.aem = aem or aem_config()
        self.entropy: list[Tensor] | None = None  # (B, A) per experience, from the latest make_experience
        self.step_prompts: list[str] = []  # the prompts (task ids) of the latest batch

    def _flatten_results(self, refs, duplicate_factor):
        out = super()._flatten_results(refs, duplicate_factor)
        if out and all(isinstance(r, ExactForward) for r in out):
            self.entropy = [r.entropy for r in out]
            return [r.log_probs for r in out]
        return out

    def compute_advantages_and_returns(self, experiences):
        entropy, self.entropy = self.entropy, None
        # this step's prompts (task ids), for the trainer's metrics.jsonl line
        self.step_prompts = [p for e in experiences for p in (e.prompts or [])]
        return advantages_with_seam(
            super().compute_advantages_and_returns, experiences, self.strategy.args, self.aem, entropy
        )


@ray.remote(num_cpus=0)
def _valid_mean_scores(responses: list[dict], floor: float) -> list[dict]:
    return impute_invalid_scores(responses, floor)


class SweRlSamplesGenerator(SamplesGenerator):
    """Upstream's generator; with dynamic filtering on, each prompt group's responses pass through
    `impute_invalid_scores` (a zero-CPU Ray task) before upstream's filter reads their scores."""

    def _process_response_into_experience(self, response, **generate_kwargs):
        exp = super()._process_response_into_experience(response, **generate_kwargs)
        return attach_action_part(exp, response, generate_kwargs.get("max_len", 2048))  # upstream's default

    def _dispatch_prompts_to_vllm(self, prompts, labels, *, images=None, **generate_kwargs):
        refs = super()._dispatch_prompts_to_vllm(prompts, labels, images=images, **generate_kwargs)
        if not self.args.algo.dynamic_filtering_enable:
            return refs
        floor = float(self.args.algo.dynamic_filtering_range[0])
        return [_valid_mean_scores.remote(ref, floor) for ref in refs]


def use_swe_rl_parts(trainer: Any) -> None:
    """Replace a freshly built upstream trainer's experience maker / samples generator by ours (same inputs)."""
    m = getattr(trainer, "experience_maker", None)
    if m is not None:
        trainer.experience_maker = SweRlExperienceMaker(
            m.actor_model_group,
            m.critic_model_group,
            m.reward_model_group,
            m.initial_model_group,
            m.kl_ctl,
            m.strategy,
            m.tokenizer,
        )
    g = getattr(trainer, "samples_generator", None)
    if g is not None:
        trainer.samples_generator = SweRlSamplesGenerator(
            g.strategy, g.prompts_dataloader, g.eval_dataloader, g.tokenizer, g.vllm_engines
        )


# ── trainers ──


def _with_our_parts(remote_cls: Any, name: str) -> Any:
    """A real subclass of an upstream @ray.remote trainer class whose __init__ ends with use_swe_rl_parts."""
    base: Any = user_class(remote_cls)

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        base.__init__(self, *args, **kwargs)
        use_swe_rl_parts(self)

    def save_logs_and_checkpoints(self, global_step, logs_dict=None, client_states=None):
        # our line first: a checkpoint of step k then always has its metrics line (a resumed run may repeat one)
        prompts = getattr(getattr(self, "experience_maker", None), "step_prompts", None)
        write_metrics_line(global_step, logs_dict, client_states, prompts)
        return base.save_logs_and_checkpoints(self, global_step, logs_dict, client_states)

    body: dict[str, Any] = {"__init__": __init__, "__module__": __name__, "__qualname__": name}
    if hasattr(base, "save_logs_and_checkpoints"):  # the trainers (BasePPOTrainer), not the samples actor
        body["save_logs_and_checkpoints"] = save_logs_and_checkpoints
    return ray.remote(type(name, (base,), body))  # upstream: a bare @ray.remote on each


SweRlPPOTrainer = _with_our_parts(_sync.PPOTrainer, "SweRlPPOTrainer")
SweRlTrainingActor = _with_our_parts(_async.TrainingActor, "SweRlTrainingActor")
SweRlGenerateSamplesActor = _with_our_parts(_async.GenerateSamplesActor, "SweRlGenerateSamplesActor")

# (module, name upstream looks up, ours). train_ppo_ray binds PolicyModelActor when it is imported (runpy) and
# imports PPOTrainer inside train(); PPOTrainerAsync.__init__ reads TrainingActor / GenerateSamplesActor from its
# module globals, which Ray ships by value with the class when the driver first creates it.
REPLACEMENTS = (
    ("openrlhf.trainer.ray.ppo_actor", "PolicyModelActor", SweRlPolicyModelActor),
    ("openrlhf.trainer.ppo_trainer", "PPOTrainer", SweRlPPOTrainer),
    ("openrlhf.trainer.ppo_trainer_async", "TrainingActor", SweRlTrainingActor),
    ("openrlhf.trainer.ppo_trainer_async", "GenerateSamplesActor", SweRlGenerateSamplesActor),
)


# The trainer controllers, bare @ray.remote upstream, placed on the node placement.py chooses (its docstring says
# why): (module, name, upstream's own @ray.remote options, kept). PPOTrainerAsync also makes two ray.util.queue
# Queues (actors) between its halves: QUEUE_MODULE's `Queue` gets the same placement.
CONTROLLERS: tuple[tuple[str, str, dict[str, Any]], ...] = (
    ("openrlhf.trainer.ppo_trainer", "PPOTrainer", {}),
    ("openrlhf.trainer.ppo_trainer_async", "PPOTrainerAsync", {}),
    ("openrlhf.trainer.ppo_trainer_async", "TrainingActor", {}),
    ("openrlhf.trainer.ppo_trainer_async", "GenerateSamplesActor", {}),
    ("openrlhf.trainer.ppo_trainer_async", "VLLMLock", {"num_cpus": 0}),
)
QUEUE_MODULE = "openrlhf.trainer.ppo_trainer_async"


def install_swe_rl_classes(node: str | None = None) -> None:
    """Put our classes in place of OpenRLHF's names in this (driver) process. Idempotent; call before running
    openrlhf.cli.train_ppo_ray. With `node` (placement.controller_node()), the trainer controllers (CONTROLLERS:
    ours, upstream's PPOTrainerAsync and VLLMLock) and PPOTrainerAsync's queues get a node affinity to it, soft (Ray
    places them elsewhere only when that node cannot take them) but for VLLMLock's (below)."""
    from ray.util.queue import Queue

    for module, name, ours in REPLACEMENTS:
        setattr(importlib.import_module(module), name, ours)
    queues = importlib.import_module(QUEUE_MODULE)
    queues.Queue = Queue  # type: ignore[attr-defined]
    if node is None:
        return
    from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

    strategy = NodeAffinitySchedulingStrategy(node_id=node, soft=True)
    # an actor that asks for no resource (VLLMLock) can always go there, and Ray's soft affinity does not hold for
    # it (seen on Ray 2.55: placed on a sandbox node): a hard one
    hard = NodeAffinitySchedulingStrategy(node_id=node, soft=False)
    for module, name, options in CONTROLLERS:
        mod = importlib.import_module(module)
        # Ray's typing of ray.remote lists only the placement-group strategy; NodeAffinity is a documented one
        on_node: Any = ray.remote(  # type: ignore[call-overload]
            scheduling_strategy=hard if options.get("num_cpus") == 0 else strategy, **options
        )
        setattr(mod, name, on_node(user_class(getattr(mod, name))))
    # read by PPOTrainerAsync.__init__ from its module's globals, shipped with the class as our classes are
    queues.Queue = functools.partial(Queue, actor_options={"scheduling_strategy": strategy})  # type: ignore[attr-defined]


def preflight_actor_check() -> list[str]:
    """One line per problem (none: []): our classes as Ray runs them on the current cluster (actor_check.py)."""
    from swe_rl.train.openrlhf.actor_check import check_actor_classes

    return check_actor_classes()
