"""Every estimator / modulator / loss configuration of swe_rl.algo, with inputs built on a chosen device.

Shared by the CPU guard (tests/algo/test_device_placement.py: inputs on the CPU while torch's default device is
`meta`, so any tensor made without a device next to them fails) and the GPU tests (tests/gpu: the same cases on
CUDA equal the CPU's). `run_case` runs compute_advantages, then compute_policy_loss and its backward.
"""

from __future__ import annotations

from typing import Any

import torch

from swe_rl.algo.config import AlgoConfig
from swe_rl.algo.epo import EntropyHistory
from swe_rl.algo.pipeline import compute_advantages, compute_policy_loss

# name -> AlgoConfig overrides: the ten of the first CUDA run plus the remaining losses, aggregations and
# off-policy modes
CASES: dict[str, dict[str, Any]] = {
    "grpo": {},
    "grpo_aem": {"modulator": {"kind": "aem"}},
    "grpo_aem_action": {"modulator": {"kind": "aem", "aem": {"entropy_span": "action"}}},
    "grpo_aem_batch": {"modulator": {"kind": "aem", "aem": {"scope": "batch", "reverse": True}}},
    "grpo_aem_trajectory": {"modulator": {"kind": "aem", "aem": {"scope": "trajectory"}}},
    "empg": {"modulator": {"kind": "empg"}},
    "rloo_compact_aem": {
        "estimator": {"name": "rloo"},
        "compact_filtering": {"enabled": True},
        "modulator": {"kind": "aem"},
        "loss": {"agg": "seq-mean-token-sum", "dual_clip": None},
    },
    "dr_grpo_dynamic": {
        "estimator": {"name": "dr_grpo"},
        "dynamic_filtering": {"enabled": True},
        "loss": {"agg": "seq-mean-token-sum-norm"},
    },
    "epo": {"epo": {"enabled": True, "total_steps": 10}},
    "gspo": {"loss": {"type": "gspo", "agg": "seq-mean-token-mean"}},
    "gspo_token_aem": {"loss": {"type": "gspo_token"}, "modulator": {"kind": "aem"}},
    "kl_entropy": {"loss": {"kl_coef": 0.1, "kl_estimator": "k3", "entropy_coef": 0.01}},
    "kl_k1_population_raw": {
        "estimator": {"std": "population", "singleton": "raw"},
        "loss": {"kl_coef": 0.05, "kl_estimator": "k1"},
    },
    "reward_mask": {"reward": {"unsubmitted": "mask"}},
    "reward_grade": {"reward": {"unsubmitted": "grade"}},
    "is_clip": {"off_policy": {"mode": "clip", "low": 0.0, "high": 2.0}},
    "is_mask": {"off_policy": {"mode": "mask"}},
    "is_seq_mask": {"off_policy": {"mode": "seq_mask", "low": 0.8, "high": 1.25}},
}

B, T, N = 10, 24, 4  # rows, tokens, samples per task (groups 0, 1 of 4; group 2 of 2)
EXITS = ["submitted", "submitted", "max_steps", "submitted", "format_errors", "submitted", "submitted",
         "timeout", "submitted", "submitted"]  # fmt: skip


def device_under_test() -> str:
    """CUDA where torch sees it; the CPU in a dry run of the gpu tests (SWE_RL_GPU_TESTS_ON_CPU, tests/conftest.py)."""
    return "cuda" if torch.cuda.is_available() else "cpu"


def config(name: str) -> AlgoConfig:
    return AlgoConfig.model_validate(CASES[name])


def inputs(device: torch.device | str, seed: int = 0) -> dict[str, Any]:
    """Deterministic inputs (drawn on the CPU, then moved), every tensor explicitly on `device`."""
    g = torch.Generator(device="cpu").manual_seed(seed)
    cpu = torch.device("cpu")
    rewards = torch.tensor([1.0, 0.0, 0.0, 1.0, 0.0, 0.0, 0.0, 0.0, 1.0, 0.5], device=cpu)
    valid = torch.tensor([True] * 6 + [False] + [True] * 3, device=cpu)
    group_ids = torch.tensor([0, 0, 0, 0, 1, 1, 1, 1, 2, 2], device=cpu)
    mask = torch.zeros(B, T, device=cpu)
    action = torch.zeros(B, T, device=cpu)
    for i in range(B):  # 2-3 turns per row at row-dependent places; the action part is each turn's tail
        for start in (2 + i % 3, 10, 17 + i % 2)[: 2 + i % 2]:
            mask[i, start : start + 4] = 1.0
            action[i, start + 2 : start + 4] = 1.0
    ent = torch.rand(B, T, generator=g, device=cpu) * 2.0
    old = -torch.rand(B, T, generator=g, device=cpu) * 3.0
    new = old + 0.1 * torch.randn(B, T, generator=g, device=cpu)
    ref = old + 0.05 * torch.randn(B, T, generator=g, device=cpu)
    roll = old + 0.2 * torch.randn(B, T, generator=g, device=cpu)
    cur_ent = ent + 0.1 * torch.randn(B, T, generator=g, device=cpu)
    t = {"rewards": rewards, "valid": valid, "group_ids": group_ids, "loss_mask": mask, "action_mask": action,
         "token_entropy": ent, "logp": new, "old_logp": old, "ref_logp": ref, "rollout_logp": roll,
         "cur_entropy": cur_ent}  # fmt: skip
    return {k: v.to(device) for k, v in t.items()}


def run_case(name: str, device: torch.device | str, seed: int = 0) -> dict[str, Any]:
    """compute_advantages → compute_policy_loss → backward, all on `device`. Returns host copies of every
    tensor output (token advantages, loss mask, keep, α, loss, d loss / d logp, d loss / d entropy) and the
    diagnostics and metrics."""
    cfg = config(name)
    x = inputs(device, seed)
    res = compute_advantages(
        cfg, x["rewards"], x["group_ids"], x["valid"], x["loss_mask"], x["token_entropy"], EXITS,
        action_mask=x["action_mask"],
    )  # fmt: skip
    logp = x["logp"].clone().requires_grad_(True)
    cur_ent = x["cur_entropy"].clone().requires_grad_(True)
    loss, metrics = compute_policy_loss(
        cfg, logp, x["old_logp"], res.token_advantages, res.loss_mask, ref_logp=x["ref_logp"],
        token_entropy=cur_ent, epo_history=EntropyHistory([1.0, 0.8]), step=3,
        global_count=None, rollout_logp=x["rollout_logp"],
    )  # fmt: skip
    loss.backward()
    out: dict[str, Any] = {
        "token_advantages": res.token_advantages,
        "loss_mask": res.loss_mask,
        "keep": res.keep,
        "loss": loss.detach(),
        "grad_logp": logp.grad,
        "grad_entropy": cur_ent.grad if cur_ent.grad is not None else torch.zeros((), device=device),
    }
    if res.span_alpha is not None:
        out["span_alpha"] = res.span_alpha
    want = torch.device(device)  # "cuda" names the current device: a tensor there reports "cuda:0"
    for k, v in out.items():
        if v.dim() > 0 and (v.device.type != want.type or want.index not in (None, v.device.index)):
            raise AssertionError(f"{name}: {k} came back on {v.device}, not on {device}")
    host = {k: v.detach().cpu() for k, v in out.items()}
    host["diagnostics"], host["metrics"] = res.diagnostics, metrics
    return host
