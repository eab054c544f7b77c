"""Typed config of an OpenRLHF 0.11.2 run (`swe-rl train --backend openrlhf`).

Grouped like the recipe YAMLs in configs/train/. `flags.to_argv` maps it to OpenRLHF's dotted CLI; the AEM seam
and the agent executor read their own sections (`aem`, `agent`) from environment variables set by the launcher.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field, model_validator

from swe_rl.config import StrictModel


class ClusterConfig(StrictModel):
    nodes: int = Field(default=1, ge=1)  # nodes running DeepSpeed actor ranks (--actor.num_nodes)
    gpus_per_node: int = Field(default=8, ge=1)  # GPUs per node for the actor (--actor.num_gpus_per_node)
    vllm_engines: int = Field(default=8, ge=1)  # vLLM rollout engines (--vllm.num_engines)
    vllm_tp: int = Field(default=1, ge=1)  # tensor parallel size of each engine (--vllm.tensor_parallel_size)
    colocate_all: bool = (
        True  # hybrid engine: actor, ref and vLLM share GPUs (needs nodes*gpus == engines*tp)
    )
    gpu_memory_utilization: float = Field(default=0.6, gt=0, le=1)  # vLLM share of GPU memory when colocated
    enforce_eager: bool = False  # disable CUDA graphs in vLLM (saves memory, slower decode)
    zero_stage: int = Field(default=3, ge=0, le=3)  # DeepSpeed ZeRO stage
    ring_attn_size: int = Field(
        default=1, ge=1
    )  # context parallelism for long sequences (--ds.ring_attn_size)
    adam_offload: bool = False  # offload Adam states to CPU (--ds.adam_offload)
    ray_address: str | None = None  # existing cluster ("auto" or host:port); None = start a local Ray


class ModelConfig(StrictModel):
    path: str  # HF id or local path of the policy (--actor.model_name_or_path)
    param_dtype: Literal["bf16", "fp16"] = "bf16"  # training dtype
    attn_implementation: str = "flash_attention_2"  # attention kernel for training forwards
    gradient_checkpointing: bool = True  # recompute activations (required at 32K context)
    # pack episodes into one row per micro-batch (--ds.packing_samples; multi-turn episodes differ wildly in length).
    # Packing runs flash-attention's varlen kernels: off only where there is none (the CPU rehearsal, `make rehearsal`)
    packing_samples: bool = True


class RolloutConfig(StrictModel):
    prompts_per_step: int = Field(default=64, ge=1)  # tasks per training step (--rollout.batch_size)
    samples_per_prompt: int = Field(default=8, ge=1)  # rollouts per task = GRPO group size
    temperature: float = Field(default=1.0, gt=0)  # sampling temperature (also scales the trainer's logits)
    top_p: float = Field(default=1.0, gt=0, le=1)  # nucleus sampling
    max_len: int = Field(
        default=32768, ge=256
    )  # whole-episode token budget: prompt + all turns + observations
    max_new_tokens: int = Field(default=8192, ge=16)  # reserved when truncating the prompt (not a turn cap)
    dynamic_filtering: bool = False  # reject groups whose mean score is 0 or 1 (all-equal binary groups)
    max_tokens_per_gpu: int | None = None  # dynamic batching tokens per GPU (None = fixed micro-batches)


class IsCorrectionConfig(StrictModel):
    """Importance-sampling correction π_train_old / π_rollout per token (OpenRLHF 0.11.2 `is_correction_*`).
    TIS = level token, mode clip; ICEPOP = level token, mode mask. Off by default (on-policy recipes)."""

    level: Literal["off", "token", "seq"] = "off"  # granularity of the gated statistic; off = no correction
    mode: Literal["mask", "clip"] = (
        "mask"  # mask drops out-of-band tokens (ICEPOP), clip clamps the ratio (TIS)
    )
    gating: Literal["ratio", "binary_kl", "tv"] = "ratio"  # statistic the gate reads
    threshold: list[float] = Field(default=[0.5, 5.0], min_length=1, max_length=2)  # LOW HIGH, or HIGH only

    @model_validator(mode="after")
    def _upstream_rules(self) -> IsCorrectionConfig:
        # The same rules PolicyLoss enforces in every actor at start-up (models/loss.py), checked before GPUs start.
        if self.mode == "clip" and (self.level == "seq" or self.gating != "ratio"):
            raise ValueError("mode clip (TIS) needs level token and gating ratio")
        if (
            self.gating != "ratio"
            and self.level != "off"
            and len(self.threshold) == 2
            and self.threshold[0] > 0
        ):
            raise ValueError(f"gating {self.gating} takes an upper bound only: threshold [HIGH]")
        if len(self.threshold) == 2 and not self.threshold[0] < self.threshold[1]:
            raise ValueError(f"threshold: LOW must be below HIGH, got {self.threshold}")
        return self


class OptimConfig(StrictModel):
    estimator: Literal["group_norm", "dr_grpo", "rloo", "reinforce_baseline"] = "group_norm"  # base advantage
    lr: float = Field(default=1e-6, gt=0)  # actor learning rate (--actor.adam.lr)
    warmup_ratio: float = Field(default=0.0, ge=0, le=1)  # linear warm-up share of all steps
    lr_scheduler: str = "constant_with_warmup"  # transformers scheduler name
    clip_low: float = Field(default=0.2, gt=0)  # PPO ratio clip below 1
    clip_high: float = Field(default=0.28, gt=0)  # PPO ratio clip above 1 (DAPO clip-higher)
    kl_coef: float = Field(default=0.0, ge=0)  # KL to the reference; 0 = no reference model at all
    kl_estimator: Literal["k1", "k2", "k3"] = "k3"  # used only when kl_coef > 0 (as a loss)
    entropy_coef: float | None = None  # None = no entropy term; 0 = log entropy only
    loss_agg_mode: Literal["token-mean", "seq-mean-token-mean"] = "token-mean"  # policy-loss aggregation
    train_batch_size: int = Field(default=512, ge=1)  # samples per optimizer step (--train.batch_size)
    micro_batch_size: int = Field(default=1, ge=1)  # per-GPU micro-batch for training forwards
    rollout_micro_batch_size: int = Field(default=1, ge=1)  # per-GPU micro-batch for the old-log-prob forward
    max_epochs: int = Field(default=1, ge=1)  # PPO epochs over each rollout batch
    num_episodes: int = Field(
        default=1, ge=1
    )  # passes over the prompt dataset (steps = rows*n*episodes/batch)
    max_norm: float = Field(default=1.0, gt=0)  # gradient clipping
    is_correction: IsCorrectionConfig = (
        IsCorrectionConfig()
    )  # rollout/train mismatch and staleness correction


class AemConfig(StrictModel):
    enabled: bool = True  # run the AEM modulation after OpenRLHF's base advantage
    lam: float = Field(default=1.0, ge=0)  # λ in α = exp(−λ·minmax(H̄)) / mean
    min_range: float = Field(default=0.1, ge=0)  # groups whose H̄ range is below this (nats) keep α = 1
    scope: Literal["group", "trajectory", "batch"] = "group"  # which spans are normalised together
    reverse: bool = False  # the paper's ablation w = exp(+λ·H̃)
    # H̄ over the whole turn (the paper's) or only its action tokens (the tool call after any reasoning; the
    # executor sends each turn's action range, swe_rl_action_ranges)
    entropy_span: Literal["response", "action"] = "response"
    entropy_source: Literal["exact", "surprisal"] = "exact"  # exact: from the old-log-prob forward (chunked)
    entropy_chunk: int = Field(
        default=1024, ge=1
    )  # tokens per chunk of the exact entropy (memory ~ chunk × vocab)
    compact_filter: bool = False  # DeepSWE: zero reward and advantage of truncated / timed-out episodes


class AgentConfig(StrictModel):
    max_steps: int = Field(default=50, ge=1)  # agent turns per episode (OpenRLHF has no max-turns flag)
    command_timeout_s: float = Field(default=90.0, gt=0)  # per tool command inside the sandbox
    episode_timeout_s: float = Field(
        default=3600.0, gt=0
    )  # whole episode wall clock (exit "timeout", truncated)
    max_concurrent_sandboxes: int = Field(default=64, ge=1)  # per vLLM engine process (our own semaphore)
    sandbox: dict[str, Any] = {
        "backend": "docker"
    }  # sandboxes config (backend union); images come from tasks
    grade: bool = True  # grade each patch in a fresh sandbox (reward); False: reward 0, valid 0 (debugging)
    # > 0: generated micro tasks only (the CPU rehearsals): k sandboxes per engine reused between episodes, reset by
    # one exec and graded in place, cached by patch (the built-in trainer's SandboxSlots / CachedGrader); 0 = a
    # sandbox per episode at the task's image and grading in a fresh one (any task)
    slots: int = Field(default=0, ge=0)
    # episodes that did not submit (format errors, truncations): "zero" = reward 0, trained on; "mask" = reward 0
    # in the group baseline, zero advantage; "grade" = the patch graded as is (legacy). As swe_rl.algo's reward spec.
    unsubmitted: Literal["zero", "mask", "grade"] = "zero"
    # episodes the grader labels `suspicious` (swe_rl.grading.reward): "zero" = reward 0, "mask" = reward 0 with zero
    # advantage (swe_rl_masked), "keep" = the graded reward; logged as swe_rl_suspicious either way
    suspicious: Literal["zero", "mask", "keep"] = "zero"
    # grade the FAIL_TO_PASS tests first and skip PASS_TO_PASS when one fails (swe_rl.grading.failfast): the same
    # verdict, only an unresolved patch's per-test lists are shorter
    fail_fast: bool = True
    # the grader's test-run limit, and a limit of this many times gold's test time on each validated task (>= 5, at
    # least 60 s; swe_rl.grading.task_timeout): one hung patch holds its step for the limit. As algo.reward's.
    grade_timeout_s: float = Field(default=1800.0, gt=0)
    grade_timeout_gold_factor: float | None = Field(default=None, ge=5.0)
    loop: dict[str, Any] = {}  # more swe_rl.agent AgentConfig fields (action_format, max_new_tokens, ...)
    # samples in a row of one vLLM engine that ended in an infrastructure error (no sandbox, no grading) before the
    # engine stops the run with the failure kinds and the first error (0 = never: every such sample trains as a
    # zero-advantage one, for ever)
    max_failed_in_a_row: int = Field(default=256, ge=0)

    @model_validator(mode="after")
    def _loop_keys(self) -> AgentConfig:
        self.loop_config(max_context_tokens=32768, temperature=1.0, top_p=1.0)  # unknown keys fail here
        return self

    def loop_config(self, *, max_context_tokens: int, temperature: float, top_p: float) -> Any:
        """The agent loop's own config for one OpenRLHF sample: our limits, OpenRLHF's budget and sampling
        (the trainer scales logits by the rollout temperature, so the agent must sample at that temperature)."""
        from swe_rl.agent.config import AgentConfig as LoopConfig

        fixed = {
            "max_steps": self.max_steps,
            "tool_timeout_s": self.command_timeout_s,
            "max_wall_s": self.episode_timeout_s,
            "max_context_tokens": max_context_tokens,
            "temperature": temperature,
            "top_p": top_p,
        }
        clash = sorted(set(self.loop) & set(fixed))
        if clash:
            raise ValueError(
                f"agent.loop: {clash} are set by agent.* / rollout.* (remove them from agent.loop)"
            )
        try:
            return LoopConfig.model_validate({**self.loop, **fixed})
        except ValueError as e:
            raise ValueError(f"agent.loop: {e}") from e


class DataConfig(StrictModel):
    prompt_dataset: str  # JSONL made by `swe-rl openrlhf-data` (columns: prompt, label = Task JSON)
    eval_dataset: str | None = None  # same format, evaluated every `eval_steps`
    max_samples: int | None = None  # cap on rows read from prompt_dataset


class CheckpointConfig(StrictModel):
    path: str = "runs/openrlhf/checkpoints"  # DeepSpeed + HF checkpoints (--ckpt.path)
    output_dir: str = "runs/openrlhf/final"  # final HF model (--ckpt.output_dir)
    save_steps: int = Field(default=10, ge=-1)  # -1 = never
    save_hf: bool = True  # also write HF-format checkpoints
    eval_steps: int = Field(default=-1, ge=-1)  # -1 = no periodic eval


class LoggingConfig(StrictModel):
    wandb_project: str | None = None  # wandb project (key from WANDB_API_KEY, never printed); None = no wandb
    wandb_run_name: str | None = None  # defaults to the run name (also the TensorBoard subdirectory)
    tensorboard_dir: str | None = None  # OpenRLHF's TensorBoard directory (events under <dir>/<run name>)
    logging_steps: int = Field(default=1, ge=1)  # log every n steps
    # our own per-step JSON lines (upstream's logged scalars, step, consumed prompts, the step's task ids), written
    # by the trainer actor on a path every node sees; null = none
    metrics_jsonl: str | None = None


class AsyncTrainConfig(StrictModel):
    enabled: bool = (
        False  # PPOTrainerAsync: rollouts of step k+1 overlap training of step k (--train.async_enable)
    )
    queue_size: int = Field(
        default=1, ge=1
    )  # rollout batches buffered ahead of the trainer (staleness bound)
    partial_rollout: bool = False  # weight sync pauses vLLM mid-episode: one episode may span two policies


class OpenRLHFTrainConfig(StrictModel):
    name: str  # run name (runs/<name>)
    seed: int = 42  # training seed
    cluster: ClusterConfig = ClusterConfig()  # placement
    model: ModelConfig  # policy
    rollout: RolloutConfig = RolloutConfig()  # sampling and budgets
    optim: OptimConfig = OptimConfig()  # loss and optimiser
    aem: AemConfig = AemConfig()  # the AEM seam
    agent: AgentConfig = AgentConfig()  # the agent executor
    data: DataConfig  # datasets
    ckpt: CheckpointConfig = CheckpointConfig()  # checkpoints
    logging: LoggingConfig = LoggingConfig()  # loggers
    async_train: AsyncTrainConfig = AsyncTrainConfig()  # PPOTrainerAsync (off = the synchronous PPOTrainer)
    extra_flags: list[str] = []  # raw OpenRLHF flags appended last (escape hatch, e.g. ["--ds.zpg", "8"])

    @model_validator(mode="after")
    def _placement(self) -> OpenRLHFTrainConfig:
        c = self.cluster
        if self.async_train.enabled and c.colocate_all:
            raise ValueError(
                "async_train.enabled: vLLM engines need GPUs of their own while the actor trains; "
                "set cluster.colocate_all: false (GPUs = nodes*gpus_per_node + vllm_engines*vllm_tp)"
            )
        if self.async_train.partial_rollout and not self.async_train.enabled:
            raise ValueError("async_train.partial_rollout needs async_train.enabled: true")
        if c.colocate_all and c.nodes * c.gpus_per_node != c.vllm_engines * c.vllm_tp:
            raise ValueError(
                f"cluster: colocate_all needs nodes*gpus_per_node ({c.nodes * c.gpus_per_node}) == "
                f"vllm_engines*vllm_tp ({c.vllm_engines * c.vllm_tp})"
            )
        if not self.model.packing_samples:
            # upstream turns packing back on for these (train_ppo_ray.py:687-694), with a warning only
            for on, what in ((self.rollout.max_tokens_per_gpu is not None, "rollout.max_tokens_per_gpu (dynamic batching)"),
                             (c.ring_attn_size > 1, "cluster.ring_attn_size > 1 (ring attention)")):  # fmt: skip
                if on:
                    raise ValueError(
                        f"model.packing_samples: false, but {what} needs packing; turn it off too"
                    )
        if self.optim.estimator != "reinforce_baseline" and self.rollout.samples_per_prompt < 2:
            raise ValueError(f"rollout.samples_per_prompt: {self.optim.estimator} needs groups of at least 2")
        return self
