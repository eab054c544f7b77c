"""`rollout.engine: vllm` for the built-in trainer: vLLM generates, torch trains, weights go in place.

The hybrid-engine shape OpenRLHF uses on GPUs, on one machine: one vLLM engine (its own processes) serves the
rollouts; the trainer keeps its torch model. The policy holds the trainer's model by reference and, before the
first request after an optimizer step, pushes the new weights with vLLM's weight-loading API (reload_weights via
collective_rpc, then a prefix-cache reset; swe_rl.policy.vllm_sync), so every step samples from the new weights
without a restart or a checkpoint on disk. A resumed run loads its checkpoint into the model first: that is a
weight change too, so the engine serves the checkpoint from the first rollout on.
"""

from __future__ import annotations

from typing import Any

from swe_rl.train.env import PipelineRollouter


class EngineRollouter(PipelineRollouter):
    """PipelineRollouter over a VLLMPolicy; its counters add the weight-sync cost (logged per step as cost/...)."""

    def stats(self) -> dict[str, float]:
        out = super().stats()
        pol: dict[str, float] = getattr(self.provider.policy, "stats", {})
        out.update(weight_sync_s=float(pol.get("sync_s", 0.0)), weight_syncs=float(pol.get("syncs", 0)))
        return out


def vllm_rollout(
    model: Any, tok: Any, agent_cfg: Any, slots: Any, grader: Any, model_dir: str | None
) -> EngineRollouter:
    """Start the engine on `model_dir` (the run's model.init; a fresh model is written to a temp folder once)."""
    from swe_rl.policy.vllm_sync import rollout_policy

    policy = rollout_policy(model, tok, model_dir or None)
    return EngineRollouter(policy, tok, agent_cfg, slots, grader, model=model)
