"""Installing the AEM seam inside OpenRLHF's processes (driver, trainer actor, policy actors).

`install()` is the Ray `worker_process_setup_hook` our launcher sets (launch.py), so it runs in every worker of
the job before any task, and the launcher calls it in the driver too. It reads the AEM config from the
environment (`SWE_RL_AEM_CONFIG`, JSON of AemConfig) and patches:
- `RemoteExperienceMaker.compute_advantages_and_returns` (trainer actor): see aem_seam.py;
- with exact entropy, `PolicyModelActor.forward` (old-log-prob forward) to also return the per-token entropy,
  computed by OpenRLHF's own `return_entropy` path (packing and ring-attention aware) with its
  `compute_entropy` swapped for swe_rl.algo's chunked one, so (T × vocab) probabilities never exist at once.
Patching the policy actor class in the driver matters: Ray ships that class by value when actors are created.
"""

from __future__ import annotations

import json
import os
from functools import partial
from typing import Any

from swe_rl.train.openrlhf.aem_seam import ENTROPY_ATTR, wrap_compute_advantages
from swe_rl.train.openrlhf.config import AemConfig

ENV_CONFIG = "SWE_RL_AEM_CONFIG"
EXPERIENCE_MAKER = "openrlhf.trainer.ppo_utils.experience_maker"
POLICY_ACTOR = "openrlhf.trainer.ray.ppo_actor"
_CHUNKED_MARK = "_swe_rl_chunked"
_FORWARD_MARK = "_swe_rl_entropy_forward"


def config_from_env(environ: dict[str, str] | None = None) -> AemConfig | None:
    raw = (os.environ if environ is None else environ).get(ENV_CONFIG)
    if not raw:
        return None
    try:
        return AemConfig.model_validate(json.loads(raw))
    except (ValueError, TypeError) as e:
        raise ValueError(f"{ENV_CONFIG}: expected the JSON of an AemConfig ({e})") from e


def install_chunked_entropy(namespace: dict[str, Any], chunk_size: int) -> None:
    """Swap `compute_entropy` in the namespace OpenRLHF's `Actor.forward` resolves it from (the globals of
    openrlhf.models.actor) for swe_rl.algo's chunked token entropy. Actor.forward divides the logits by the
    rollout temperature before the call, so the temperature here stays 1."""
    from swe_rl.algo.entropy import token_entropy

    if "compute_entropy" not in namespace:
        raise RuntimeError(
            "OpenRLHF's Actor.forward no longer resolves `compute_entropy` from its module globals"
        )
    if getattr(namespace["compute_entropy"], _CHUNKED_MARK, False):
        return
    fn = partial(token_entropy, chunk_size=chunk_size)
    setattr(fn, _CHUNKED_MARK, True)
    namespace["compute_entropy"] = fn


def make_policy_forward(cfg: AemConfig):
    """A `PolicyModelActor.forward` replacement: the same old-log-prob forward, plus exact entropy attached to
    the returned (B, A) log-probs as `swe_rl_entropy` (Ray pickles tensor attributes; zero-copy must be off)."""
    chunk = cfg.entropy_chunk

    def forward(
        self,
        sequences,
        action_mask=None,
        attention_mask=None,
        packed_seq_lens=None,
        mm_train_inputs_list=None,
    ):
        import torch

        install_chunked_entropy(type(self.actor).forward.__globals__, chunk)  # = openrlhf.models.actor's dict
        if mm_train_inputs_list and getattr(self.actor, "is_vlm", False):
            raise NotImplementedError("swe-rl exact-entropy forward: VLM inputs are not supported")
        device = torch.cuda.current_device() if torch.cuda.is_available() else "cpu"
        self.actor.eval()
        with torch.no_grad():
            mask = action_mask.to(device)
            logp, output = self.actor(
                sequences.to(device),
                mask,
                attention_mask.to(device),
                return_output=True,
                return_entropy=True,
                ring_attn_group=self.strategy.ring_attn_group,
            )
            entropy = output.entropy[:, -mask.shape[1] :] * mask  # (B, A), aligned like the training loss
            del output
        self.actor.train()
        out = logp.to("cpu")
        setattr(out, ENTROPY_ATTR, entropy.to("cpu"))
        return out

    setattr(forward, _FORWARD_MARK, True)
    return forward


def _plain_class(cls: Any) -> Any:
    """The Python class behind a `@ray.remote` actor class (its methods are what workers run)."""
    return getattr(cls, "__ray_actor_class__", cls)


def patch_experience_maker(maker_cls: Any, cfg: AemConfig) -> None:
    maker_cls.compute_advantages_and_returns = wrap_compute_advantages(
        maker_cls.compute_advantages_and_returns, cfg
    )


def patch_policy_actor(actor_cls: Any, cfg: AemConfig) -> None:
    cls = _plain_class(actor_cls)
    if not getattr(cls.forward, _FORWARD_MARK, False):
        cls.forward = make_policy_forward(cfg)


def install(cfg: AemConfig | None = None) -> bool:
    """Patch OpenRLHF in this process. Returns False when no config is set (not launched by swe-rl).
    With aem.enabled=false the wrap still zeroes invalid / compact-filtered samples."""
    import importlib

    cfg = cfg or config_from_env()
    if cfg is None:
        return False
    try:
        maker = importlib.import_module(EXPERIENCE_MAKER)
        exact = cfg.enabled and cfg.entropy_source == "exact"
        policy = importlib.import_module(POLICY_ACTOR) if exact else None
    except ImportError as e:
        raise ImportError(
            f"swe-rl AEM seam: cannot import OpenRLHF's trainer modules ({e}); this process needs the full "
            "`openrlhf[vllm]==0.11.2` install (GPU machine), see README 'Training on a cluster'"
        ) from e
    patch_experience_maker(maker.RemoteExperienceMaker, cfg)
    if policy is not None:
        patch_policy_actor(policy.PolicyModelActor, cfg)
    return True
