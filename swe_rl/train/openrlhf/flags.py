"""Typed config → OpenRLHF 0.11.2 dotted CLI flags (`python -m openrlhf.cli.train_ppo_ray ...`).

Flags are emitted in a fixed order so a dry run is diffable. Every flag name here is checked against upstream's
argparse source by tests/openrlhf/test_contract.py, so a renamed flag fails the suite, not a cluster job.
"""

from __future__ import annotations

from swe_rl.train.openrlhf.config import OpenRLHFTrainConfig
from swe_rl.train.openrlhf.loggers import KEY_PLACEHOLDER, run_name

ENTRY_MODULE = "openrlhf.cli.train_ppo_ray"


def _fmt(value: object) -> str:
    return repr(value) if isinstance(value, float) else str(value)


def _opt(out: list[str], flag: str, *values: object) -> None:
    out.append(flag)
    out.extend(_fmt(v) for v in values)


def _switch(out: list[str], flag: str, on: bool) -> None:
    if on:
        out.append(flag)


def _placement(cfg: OpenRLHFTrainConfig, out: list[str]) -> None:
    c = cfg.cluster
    _opt(out, "--actor.num_nodes", c.nodes)
    _opt(out, "--actor.num_gpus_per_node", c.gpus_per_node)
    if cfg.optim.kl_coef > 0:  # a reference model exists only with a KL term
        _opt(out, "--ref.num_nodes", c.nodes)
        _opt(out, "--ref.num_gpus_per_node", c.gpus_per_node)
    _opt(out, "--vllm.num_engines", c.vllm_engines)
    _opt(out, "--vllm.tensor_parallel_size", c.vllm_tp)
    _opt(out, "--vllm.gpu_memory_utilization", c.gpu_memory_utilization)
    _opt(out, "--vllm.sync_backend", "nccl")
    _switch(out, "--vllm.enable_prefix_caching", True)  # multi-turn: every turn re-reads the whole history
    _switch(out, "--vllm.enforce_eager", c.enforce_eager)
    _switch(out, "--train.colocate_all", c.colocate_all)
    _switch(out, "--vllm.enable_sleep", c.colocate_all)
    _switch(out, "--ds.enable_sleep", c.colocate_all)
    _opt(out, "--ds.zero_stage", c.zero_stage)
    _switch(out, "--ds.adam_offload", c.adam_offload)
    if c.ring_attn_size > 1:
        _opt(out, "--ds.ring_attn_size", c.ring_attn_size)


def _model_and_data(cfg: OpenRLHFTrainConfig, out: list[str], agent_func_path: str) -> None:
    _opt(out, "--actor.model_name_or_path", cfg.model.path)
    _opt(out, "--ds.param_dtype", cfg.model.param_dtype)
    _opt(out, "--ds.attn_implementation", cfg.model.attn_implementation)
    _switch(out, "--actor.gradient_checkpointing_enable", cfg.model.gradient_checkpointing)
    _switch(out, "--ds.packing_samples", cfg.model.packing_samples)
    _opt(out, "--train.agent_func_path", agent_func_path)
    _opt(out, "--data.prompt_dataset", cfg.data.prompt_dataset)
    _opt(out, "--data.input_key", "prompt")
    _opt(out, "--data.label_key", "label")
    if cfg.data.max_samples is not None:
        _opt(out, "--data.max_samples", cfg.data.max_samples)
    if cfg.data.eval_dataset:
        _opt(out, "--eval.dataset", cfg.data.eval_dataset)
        _opt(out, "--eval.steps", cfg.ckpt.eval_steps)


def _rollout(cfg: OpenRLHFTrainConfig, out: list[str]) -> None:
    r = cfg.rollout
    _opt(out, "--rollout.batch_size", r.prompts_per_step)
    _opt(out, "--rollout.n_samples_per_prompt", r.samples_per_prompt)
    _opt(out, "--rollout.micro_batch_size", cfg.optim.rollout_micro_batch_size)
    _opt(out, "--rollout.temperature", r.temperature)
    _opt(out, "--rollout.top_p", r.top_p)
    _opt(out, "--data.max_len", r.max_len)
    _opt(out, "--rollout.max_new_tokens", r.max_new_tokens)
    if r.dynamic_filtering:
        _switch(out, "--algo.dynamic_filtering_enable", True)
        _opt(out, "--algo.dynamic_filtering_range", 0.0, 1.0)
    if r.max_tokens_per_gpu is not None:
        _switch(out, "--train.dynamic_batch_enable", True)
        _opt(out, "--train.max_tokens_per_gpu", r.max_tokens_per_gpu)


def _algo(cfg: OpenRLHFTrainConfig, out: list[str]) -> None:
    o = cfg.optim
    _opt(out, "--algo.advantage.estimator", o.estimator)
    _opt(out, "--algo.advantage.gamma", 1.0)
    _opt(out, "--actor.eps_clip_low_high", o.clip_low, o.clip_high)
    _opt(out, "--actor.loss_agg_mode", o.loss_agg_mode)
    _opt(out, "--algo.kl.init_coef", o.kl_coef)  # upstream default is 0.01: always explicit
    if o.kl_coef > 0:
        _switch(out, "--algo.kl.use_loss", True)
        _opt(out, "--algo.kl.estimator", o.kl_estimator)
    if o.entropy_coef is not None:
        _opt(out, "--actor.entropy_coef", o.entropy_coef)
    _opt(out, "--actor.adam.lr", o.lr)
    _opt(out, "--actor.lr_scheduler", o.lr_scheduler)
    _opt(out, "--actor.lr_warmup_ratio", o.warmup_ratio)
    _opt(out, "--actor.max_norm", o.max_norm)
    _opt(out, "--train.batch_size", o.train_batch_size)
    _opt(out, "--train.micro_batch_size", o.micro_batch_size)
    _opt(out, "--train.max_epochs", o.max_epochs)
    _opt(out, "--train.num_episodes", o.num_episodes)
    _opt(out, "--train.seed", cfg.seed)


def _ckpt_and_logs(cfg: OpenRLHFTrainConfig, out: list[str]) -> None:
    k, lg = cfg.ckpt, cfg.logging
    _opt(out, "--ckpt.path", k.path)
    _opt(out, "--ckpt.output_dir", k.output_dir)
    _opt(out, "--ckpt.save_steps", k.save_steps)
    _switch(out, "--ckpt.save_hf", k.save_hf)
    _switch(out, "--ckpt.load_enable", True)  # resume from ckpt.path when it exists
    _opt(out, "--logger.logging_steps", lg.logging_steps)
    _opt(out, "--logger.wandb.run_name", run_name(cfg))  # also names the TensorBoard subdirectory
    if lg.wandb_project:
        _opt(out, "--logger.wandb.project", lg.wandb_project)
        _opt(out, "--logger.wandb.key", KEY_PLACEHOLDER)  # upstream's switch; launch.py swaps in the key
    if lg.tensorboard_dir:
        _opt(out, "--logger.tensorboard_dir", lg.tensorboard_dir)


def _async_and_is(cfg: OpenRLHFTrainConfig, out: list[str]) -> None:
    a, ic = cfg.async_train, cfg.optim.is_correction
    if a.enabled:
        _switch(out, "--train.async_enable", True)
        _opt(out, "--train.async_queue_size", a.queue_size)
        _switch(out, "--train.partial_rollout_enable", a.partial_rollout)
    if ic.level != "off":
        _opt(out, "--algo.advantage.is_correction_level", ic.level)
        _opt(out, "--algo.advantage.is_correction_mode", ic.mode)
        _opt(out, "--algo.advantage.is_correction_gating", ic.gating)
        _opt(out, "--algo.advantage.is_correction_threshold", *ic.threshold)


def to_argv(cfg: OpenRLHFTrainConfig, agent_func_path: str) -> list[str]:
    """OpenRLHF flags (without the program name) for `cfg`; `agent_func_path` is our executor file."""
    out: list[str] = []
    _placement(cfg, out)
    _model_and_data(cfg, out, agent_func_path)
    _rollout(cfg, out)
    _algo(cfg, out)
    _ckpt_and_logs(cfg, out)
    _async_and_is(cfg, out)
    out.extend(cfg.extra_flags)
    return out


def flag_names(argv: list[str]) -> list[str]:
    """The `--x.y` names in an argv (for the contract test against upstream's parser)."""
    return [a for a in argv if a.startswith("--")]
