"""`AlgoConfig`: every knob of swe_rl.algo, typed and documented (no torch import, so configs load light).

Defaults are plain GRPO (verl conventions, singleton groups → 0) with PPO-clip 0.2/0.28 and token-mean; the
GRPO++ (DeepSWE) recipe is: estimator.name=rloo, compact_filtering.enabled=true,
loss.agg=seq-mean-token-sum, loss.kl_coef=0, loss.entropy_coef=0 — plus modulator.kind=aem for GRPO++ +AEM.
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field, model_validator

from swe_rl.config import StrictModel

CompactReason = Literal["max_steps", "context_limit", "timeout", "format_errors"]
UnsubmittedRule = Literal["zero", "mask", "grade"]


class EstimatorConfig(StrictModel):
    name: Literal["grpo", "dr_grpo", "rloo", "loop"] = "grpo"  # base advantage estimator (loop = rloo)
    std: Literal["unbiased", "population"] = "unbiased"  # grpo σ: N−1 (verl) or N (rLLM)
    eps: float = Field(default=1e-6, gt=0)  # grpo: A = (r − μ)/(σ + eps)
    singleton: Literal["zero", "raw"] = "zero"  # group with ≤ 1 valid member: A = 0, or the raw reward (verl)


class RewardSpecConfig(StrictModel):
    # Episodes that did not end by submitting (format_errors, max_steps, context_limit, timeout): "zero" = reward 0,
    # trained on; "mask" = reward 0 in the group baseline, no gradient; "grade" = their patch graded as is (legacy).
    # Infra failures (exit "error", reward None) are always invalid: masked and out of the baseline.
    unsubmitted: UnsubmittedRule = "zero"
    submitted: list[str] = ["submitted"]  # exit statuses that count as a submission
    # episodes the grader labels `suspicious` (swe_rl.grading.reward): "zero" = reward 0, "mask" = left out like an
    # infra failure, "keep" = the graded reward (the label is still logged as integrity/* metrics)
    suspicious: Literal["zero", "mask", "keep"] = "zero"
    # grade the FAIL_TO_PASS tests first and skip PASS_TO_PASS when one fails (swe_rl.grading.failfast): the same
    # verdict, only an unresolved patch's per-test lists are shorter; real-task grading only (data.source=tasks)
    fail_fast: bool = True
    # the grader's test-run limit (swebench's 1800 s) and, when set, a limit of this many times gold's own test time
    # on each validated task, at least 60 s (swe_rl.grading.task_timeout): one hung patch holds a whole RL step for
    # the limit. >= 5 (the grader's PATCH_TIMEOUT_FACTOR), so every timeout it causes is the patch's (reward 0)
    grade_timeout_s: float = Field(default=1800.0, gt=0)
    grade_timeout_gold_factor: float | None = Field(default=None, ge=5.0)


class CompactFilterConfig(StrictModel):
    enabled: bool = False  # DeepSWE compact filtering: zero loss mask, stays in the baseline with reward 0
    # exit statuses that are filtered ("error" is an infra failure: invalid, not filtered)
    reasons: list[CompactReason] = ["context_limit", "max_steps", "timeout"]


class DynamicFilterConfig(StrictModel):
    enabled: bool = False  # DAPO dynamic sampling: keep-mask drops groups whose rewards are all equal


class AEMConfig(StrictModel):
    lam: float = Field(default=1.0, ge=0)  # λ in w = exp(−λ·H̃)
    # δ (nats): groups with max H̄ − min H̄ < δ get α = 1 (δ = 0: only zero-range groups do)
    min_range: float = Field(default=0.1, ge=0)
    scope: Literal["group", "trajectory", "batch"] = "group"  # spans normalized together (paper ablation)
    reverse: bool = False  # ablation: α grows with entropy, w = exp(+λ·H̃)
    # Tokens H̄ averages over: the whole turn (the paper's response span) or only its action (the tool call after
    # any reasoning; needs each turn's action start, Trajectory.action_starts): in reason-then-act turns
    # the response mean is dominated by the reasoning tokens, not by the decision.
    entropy_span: Literal["response", "action"] = "response"


class EMPGConfig(StrictModel):
    k: float = Field(default=1.0, ge=0)  # g = exp(−k·H̃) / batch mean
    k_next: float = Field(default=1.0, ge=0)  # f = exp(−k'·H̃_{t+1})
    zeta: float = Field(default=0.1, ge=0)  # future-clarity bonus weight ζ (0.1 project page, 0.05 ARLArena)


class ModulatorConfig(StrictModel):
    kind: Literal["none", "aem", "empg"] = "none"  # advantage modulator applied after the base estimator
    aem: AEMConfig = AEMConfig()  # used when kind = aem
    empg: EMPGConfig = EMPGConfig()  # used when kind = empg


class EPOConfig(StrictModel):
    enabled: bool = False  # add −λ·(L_H − β_k·L_smooth) to the loss (EPO v2)
    lam: float = Field(default=1e-3, ge=0)  # λ: entropy-bonus coefficient
    kappa_low: float = Field(default=0.0, ge=0)  # κ_l: lower corridor edge as a multiple of H̄_W
    kappa_high: float = Field(default=2.0, ge=0)  # κ_r: upper corridor edge as a multiple of H̄_W
    gamma: float = Field(default=3.0, ge=0)  # γ in β_k = 1 + exp(−γ·k/⌊K/2⌋)
    alpha: float = Field(default=0.1, ge=0)  # α_p: penalty weight inside L_smooth
    total_steps: int = Field(default=150, ge=2)  # K: planned RL steps (sets ⌊K/2⌋)

    @model_validator(mode="after")
    def _corridor(self) -> EPOConfig:
        if self.kappa_low > self.kappa_high:
            raise ValueError(f"epo: kappa_low ({self.kappa_low}) must be <= kappa_high ({self.kappa_high})")
        return self


class OffPolicyConfig(StrictModel):
    # Truncated importance sampling on ρ = π_trainer(old) / π_sampler per token (rollout/trainer mismatch):
    # off; clip = TIS, the per-token loss times clamp(ρ, low, high); mask = tokens with ρ outside [low, high] drop
    # out, the rest keep weight ρ; seq_mask = the same on each sequence's geometric-mean ρ (whole rows drop out).
    mode: Literal["off", "clip", "mask", "seq_mask"] = "off"
    low: float = Field(default=0.5, ge=0)  # lower bound on ρ (0 = upper bound only)
    high: float = Field(default=5.0, gt=0)  # upper bound on ρ (TIS's C; OpenRLHF default 5)

    @model_validator(mode="after")
    def _band(self) -> OffPolicyConfig:
        if self.low > self.high:
            raise ValueError(f"off_policy: low ({self.low}) must be <= high ({self.high})")
        return self


class LossConfig(StrictModel):
    type: Literal["ppo", "gspo", "gspo_token"] = "ppo"  # per-token PPO-clip, GSPO sequence ratio, GSPO-token
    clip_low: float = Field(default=0.2, ge=0, lt=1)  # ε_low (GSPO paper: 3e-4)
    clip_high: float = Field(default=0.28, ge=0)  # ε_high (DAPO clip-higher; GSPO paper: 4e-4)
    dual_clip: float | None = Field(
        default=3.0, gt=1
    )  # dual-clip c for A < 0 (verl default 3); null disables
    agg: Literal["token-mean", "seq-mean-token-mean", "seq-mean-token-sum", "seq-mean-token-sum-norm"] = (
        "token-mean"  # loss aggregation (DeepSWE: seq-mean-token-sum, Dr.GRPO: seq-mean-token-sum-norm)
    )
    norm_const: float | None = Field(
        default=None, gt=0
    )  # seq-mean-token-sum-norm divisor; null = mask width T
    kl_coef: float = Field(default=0.0, ge=0)  # reference-KL loss coefficient (0 = off, as in GRPO++/DAPO)
    kl_estimator: Literal["k1", "k3"] = "k3"  # per-token KL estimator (k3 = verl low_var_kl)
    entropy_coef: float = Field(default=0.0, ge=0)  # plain entropy bonus (0 = off, as in GRPO++)


class AlgoConfig(StrictModel):
    reward: RewardSpecConfig = RewardSpecConfig()  # what an episode that did not submit scores
    estimator: EstimatorConfig = EstimatorConfig()  # base advantage
    compact_filtering: CompactFilterConfig = CompactFilterConfig()  # DeepSWE
    dynamic_filtering: DynamicFilterConfig = DynamicFilterConfig()  # DAPO
    modulator: ModulatorConfig = ModulatorConfig()  # none | aem | empg
    epo: EPOConfig = EPOConfig()  # entropy regularizer in the loss
    loss: LossConfig = LossConfig()  # policy loss
    off_policy: OffPolicyConfig = (
        OffPolicyConfig()
    )  # truncated importance sampling on the sampler/trainer ratio
    entropy_chunk_size: int = Field(default=512, ge=1)  # tokens per chunk in token_entropy (memory vs speed)

    @model_validator(mode="after")
    def _gspo_needs_token_form(self) -> AlgoConfig:
        # Sequence-level GSPO takes one advantage per row; per-span α (cumulative rows) would be averaged away.
        if self.modulator.kind != "none" and self.loss.type == "gspo":
            raise ValueError(
                f"loss.type: 'gspo' uses one advantage per sequence, so modulator.kind={self.modulator.kind!r} "
                "(per-span advantages) needs loss.type='gspo_token'"
            )
        return self
