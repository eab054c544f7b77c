"""`swe-rl train` (built-in backend): build model, environment and evaluator from a TrainConfig, then train.

`data.source` is a name in DATA_SOURCES (swe_rl.train.sources: one name -> DataSource table): `generated` = the
micro-task generator through the real pipeline (agent loop, tools in sandbox slots, real tests); `tasks` = any task
dataset in data.tasks (swe_rl.train.tasks_env: a fresh sandbox at each task's image, the project's grader). Experiment
environments register themselves with `register_source` when swe_rl.experiments is imported (`toy`, `decisions`;
the `swe-rl` CLI imports it), so the trainer itself imports no experiment.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any, cast

from swe_rl.runs import RunDir
from swe_rl.train.config import TrainConfig
from swe_rl.train.progress import (
    CountingGrader,
    CountingSlots,
    EpisodeTally,
    ProgressRollouter,
    resumed_step,
    step_progress,
)
from swe_rl.train.sources import DATA_SOURCES as DATA_SOURCES  # re-exported: callers read the table here
from swe_rl.train.sources import DataSource, Env, data_source, register_source


def load_policy_model(cfg: TrainConfig) -> tuple[Any, Any]:
    """(model, tokenizer): a HF folder from model.init (e.g. an SFT checkpoint), or a fresh tiny model, on
    train.device (swe_rl.train.device)."""
    from swe_rl.train.device import resolve_device

    source = data_source(cfg)
    device = resolve_device(cfg.device, cuda_ok=source.cuda, source=cfg.data.source)
    model, tok = _load_policy_model(cfg, source)
    if device.type != "cpu":  # in place: the rollout policy built next holds this very object
        model.to(device)
    return model, tok


def _load_policy_model(cfg: TrainConfig, source: DataSource) -> tuple[Any, Any]:
    import torch

    if cfg.model.threads:
        torch.set_num_threads(cfg.model.threads)
    start = source.start
    if not cfg.model.init and start is not None:  # the source's own start (decisions: SFT on demonstrations)
        cfg = cfg.model_copy(deep=True)
        cfg.model.init = start(cfg)
    if cfg.model.init:
        from transformers import AutoModelForCausalLM

        from swe_rl.policy.model_dir import check_model_dir
        from swe_rl.policy.tiny import load_tokenizer

        path = Path(cfg.model.init)
        check_model_dir(
            cfg.model.init, "model.init", local_only=True
        )  # one line (ModelPathError), no traceback

        tok = load_tokenizer(path)
        model = AutoModelForCausalLM.from_pretrained(path, dtype=torch.float32)
        model.eval()
        return model, tok
    from swe_rl.policy.tiny import build_tiny_model, build_tokenizer

    tok = build_tokenizer(vocab_size=cfg.model.vocab_size)
    return build_tiny_model(tok, arch=cfg.model.arch, size=cfg.model.size, seed=cfg.model.seed), tok


def build_env(cfg: TrainConfig, model: Any, tok: Any, progress: Any = None) -> Env:
    """The training environment of cfg.data.source; with `progress` (a RunProgress) every rollout call, training
    or held-out, is a phase bar advanced per finished episode."""
    return data_source(cfg).build(cfg, model, tok, progress)


def generated_env(cfg: TrainConfig, model: Any, tok: Any, progress: Any = None) -> Env:
    """The generated micro tasks through the real pipeline (sandbox slots, CachedGrader)."""
    if cfg.eval.split != "test":
        raise ValueError(
            "eval.split=validation: data.source=generated has one held-out split (test); "
            "use data.source=decisions for a validation split"
        )
    from swe_rl.policy.hf import HFLocalPolicy
    from swe_rl.tasks.generator import generate_tasks, sample_batch
    from swe_rl.train.device import autocast_dtype
    from swe_rl.train.env import PipelineRollouter, SandboxSlots, demo_agent_config
    from swe_rl.train.evaluate import HeldOutEval
    from swe_rl.train.sft import prompts_dir

    r = cfg.rollout
    agent_cfg = demo_agent_config(prompts_dir(), max_new_tokens=r.max_new_tokens, max_steps=r.max_turns,
                                  temperature=r.temperature)  # fmt: skip
    slots = SandboxSlots(r.slots, cfg.sandbox)
    slots.run(slots.start())  # on the loop every rollout runs on: a slot that cannot start stops us here
    tally = EpisodeTally()  # finished and resolved episodes of the running rollout call, for the bars
    grader, counted = CountingGrader(slots, tally=tally), cast(SandboxSlots, CountingSlots(slots, tally))
    rollouter: Any
    if r.engine == "vllm":  # vLLM generates, weights synced in place every step (swe_rl.train.vllm_engine)
        from swe_rl.train.vllm_engine import vllm_rollout

        rollouter = vllm_rollout(model, tok, agent_cfg, counted, grader, cfg.model.init)
        policy: Any = rollouter.provider.policy
    else:
        policy = HFLocalPolicy(model, tok, max_batch=r.max_batch, autocast=autocast_dtype(cfg.autocast))
        rollouter = PipelineRollouter(policy, tok, agent_cfg, counted, grader, model=model)
    d = cfg.data
    tasks = generate_tasks(d.n_train, "train", d.seed, d.n_funcs)
    held = generate_tasks(cfg.eval.n_tasks, "held_out", d.seed, d.n_funcs)
    held_roll = (
        ProgressRollouter(rollouter, progress, "held-out", tally) if progress is not None else rollouter
    )
    evaluator = HeldOutEval(held_roll, held, sampled=cfg.eval.sampled)
    if progress is not None:
        rollouter = ProgressRollouter(rollouter, progress, tally=tally)

    def close() -> None:
        slots.run(policy.close())  # the batching worker lives on the slots' loop: stop it there first
        slots.close()

    return Env(rollouter, tasks, sample_batch, evaluator, close=close)


def _tasks_env(cfg: TrainConfig, model: Any, tok: Any, progress: Any = None) -> Env:
    from swe_rl.train.tasks_env import tasks_env

    return cast(Env, tasks_env(cfg, model, tok, progress))


register_source("generated", DataSource(generated_env, engines=("hf", "vllm"), cuda=True))
register_source("tasks", DataSource(_tasks_env, cuda=True))


# what a resumed run may change: its length, bookkeeping, evaluation and where it runs; everything else (algo, optim,
# rollout sampling, data, model, sandbox, seed) would mix two setups in one run's curves and checkpoints
RESUME_MAY_CHANGE = (
    "steps", "save_every", "keep_checkpoints", "tensorboard", "log_trajectories", "eval", "device", "autocast",
    "model.threads", "rollout.slots", "rollout.max_batch", "rollout.max_unscored_steps",
)  # fmt: skip


def _flat(d: Any, prefix: str = "") -> dict[str, Any]:
    if not isinstance(d, dict):
        return {prefix: d}
    out: dict[str, Any] = {}
    for k, v in d.items():
        out.update(_flat(v, f"{prefix}{k}.") if isinstance(v, dict) and v else {f"{prefix}{k}": v})
    return out


def changed_settings(config_file: Path, cfg: Any, may: tuple[str, ...]) -> list[str]:
    """Each setting of `cfg` (a pydantic model) that differs from the run's config.yaml, as "key: old -> new",
    except those under a prefix in `may` (a dotted key or its parent)."""
    import yaml

    old = _flat(yaml.safe_load(config_file.read_text()) or {})
    new = _flat(cfg.model_dump(mode="json"))
    return [
        f"{k}: {old[k]!r} -> {new[k]!r}"
        for k in sorted(set(old) & set(new))
        if old[k] != new[k] and not any(k == m or k.startswith(m + ".") for m in may)
    ]


def check_run_dir(cfg: TrainConfig, resume: bool) -> None:
    """ConfigError where this command would mix two runs in runs/<name>: a fresh run into a folder that holds a
    run's checkpoints or metrics (its newest checkpoint would be the other run's), or `--resume` with settings the
    run was not trained with. A run's own config.yaml is what it was started with."""
    from swe_rl.config import ConfigError
    from swe_rl.train.checkpoint import latest

    run = RunDir(Path(cfg.out_dir) / cfg.name)
    ckpt = latest(run.checkpoints)
    rows = len(run.read_metrics())
    if not resume and (ckpt is not None or rows):
        parts = (f"{rows} metrics rows" if rows else "", f"checkpoint {ckpt.name}" if ckpt else "")
        held = ", ".join(x for x in parts if x)
        raise ConfigError(
            f"run directory {run.root} already holds a run ({held}): --resume continues it; to start another, "
            "pass another name (-o name=...) or delete the directory"
        )
    if not resume or not run.config.is_file():
        return
    # a run folder moved elsewhere holds the same run
    changed = changed_settings(run.config, cfg, (*RESUME_MAY_CHANGE, "out_dir", "name"))
    if changed:
        raise ConfigError(
            f"--resume of {run.root} with settings it was not trained with ({'; '.join(changed)}): a run's curves "
            f"and checkpoints come from one setup. Resume with its settings ({run.config}), or start another run "
            f"(-o name=...); a resumed run may change only {', '.join(RESUME_MAY_CHANGE)}"
        )


def train_command(
    config_files: list[str | Path], overrides: list[str], resume: bool, console: Any = None
) -> RunDir:
    """Load the config, train, evaluate on held-out tasks at the end; returns the run directory. Progress bars
    (plain lines when not on a terminal) go to `console` (default: stderr)."""
    from swe_rl.config import load_config
    from swe_rl.rollout.progress import RunProgress
    from swe_rl.train.loop import train

    cfg = load_config(TrainConfig, files=config_files, overrides=overrides)
    check_run_dir(cfg, resume)
    run = RunDir.create(cfg.out_dir, cfg.name)
    run.save_config(cfg)
    model, tok = load_policy_model(cfg)
    with RunProgress(console) as bars:
        env = build_env(cfg, model, tok, bars)
        if env.evaluator is not None:  # every evaluation's per-task rewards and episodes stay in the run
            env.evaluator.keep_in(run)
        on_step = step_progress(bars, cfg.steps, resumed_step(run.checkpoints, resume))
        try:
            state = train(cfg, run, model, tok, env.rollouter, env.tasks, sample_tasks=env.sample_tasks,
                          evaluate=env.evaluator, resume=resume, on_step=on_step)  # fmt: skip
            if env.evaluator is not None and not (cfg.eval.every and state.step % cfg.eval.every == 0):
                final = env.evaluator(state.step)
                run.log_metrics(state.step, {f"eval/{k}": v for k, v in final.items()})
        except KeyboardInterrupt:  # Ctrl-C: say what is kept and how to go on (the CLI exits 130)
            from swe_rl.train.checkpoint import latest

            ckpt = latest(run.checkpoints)
            kept = (
                f"the newest checkpoint is {ckpt.name}"
                if ckpt
                else "no checkpoint yet (a resume starts over)"
            )
            print(f"interrupted: {kept}; metrics and episodes so far are in {run.root}; the same command with "
                  "--resume continues", file=sys.stderr, flush=True)  # fmt: skip
            raise
        finally:
            env.close()
    from swe_rl.train.device import model_device

    on = f"{model_device(model)}" + (f", {cfg.autocast} autocast" if cfg.autocast != "off" else "")
    print(f"train: {state.step} steps on {on}, metrics in {run.metrics}, checkpoints in {run.checkpoints}")
    return run
