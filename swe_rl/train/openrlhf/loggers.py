"""Which OpenRLHF logger a run gets, and the wandb key that enables it without ever being printed.

Upstream creates its wandb logger only when `--logger.wandb.key` is set and its TensorBoard logger only when
`--logger.tensorboard_dir` is (ppo_trainer.py, BasePPOTrainer.__init__); both can be on. The key comes from
WANDB_API_KEY: the flags carry the placeholder `$WANDB_API_KEY` (what a dry run and openrlhf_command.sh show), and
the launcher swaps in a `RedactedKey`, a str whose repr is the placeholder, because upstream prints its whole
argument namespace (`strategy.print(args)` in train_ppo_ray.train) and would print the key with it.
Beside upstream's loggers, `logging.metrics_jsonl` gives a run its own metrics file: swe-rl's trainer classes
(actors.py) append one line per step (`write_metrics_line`), also with no logger package installed.
"""

from __future__ import annotations

import importlib.util
import json
import os
import time
from pathlib import Path
from typing import Any

from swe_rl.train.openrlhf.config import OpenRLHFTrainConfig

WANDB_ENV = "WANDB_API_KEY"
METRICS_ENV = "SWE_RL_METRICS_JSONL"  # logging.metrics_jsonl made absolute by launch.py (unset: no file)
KEY_PLACEHOLDER = f"${WANDB_ENV}"


class MissingKeyError(ValueError):
    """wandb was asked for but WANDB_API_KEY is not set (the launch refuses rather than log to stdout only)."""


class RedactedKey(str):
    """The wandb key as upstream's parser receives it: equal to the key, shown as `$WANDB_API_KEY`.
    `str()` returns the object itself so argparse's `type=str` keeps it; it pickles to Ray workers by class."""

    def __repr__(self) -> str:
        return repr(KEY_PLACEHOLDER)

    def __str__(self) -> str:
        return self


def run_name(cfg: OpenRLHFTrainConfig) -> str:
    return cfg.logging.wandb_run_name or cfg.name


def wandb_key(environ: dict[str, str] | None = None) -> str | None:
    key = (os.environ if environ is None else environ).get(WANDB_ENV, "").strip()
    return key or None


def secret_argv(argv: list[str], environ: dict[str, str] | None = None) -> list[str]:
    """`argv` with the key placeholder replaced by the redacted key (in-process argv only, never written)."""
    key = wandb_key(environ)
    if KEY_PLACEHOLDER in argv and key is None:
        raise MissingKeyError(
            f"logging.wandb_project is set but {WANDB_ENV} is not: upstream would log to stdout only "
            f"(export {WANDB_ENV}, or set logging.wandb_project: null)"
        )
    return [RedactedKey(key) if a == KEY_PLACEHOLDER and key else a for a in argv]


def logger_summary(cfg: OpenRLHFTrainConfig, environ: dict[str, str] | None = None) -> list[str]:
    """One line per logger saying whether it will be active (for the dry run and the preflight)."""
    lg = cfg.logging
    lines = []
    if lg.wandb_project:
        state = "set" if wandb_key(environ) else "NOT SET: the launch refuses to start"
        lines.append(
            f"wandb: project {lg.wandb_project}, run {run_name(cfg)} (key from ${WANDB_ENV}: {state})"
        )
    else:
        lines.append("wandb: off (logging.wandb_project is null)")
    if lg.tensorboard_dir:
        lines.append(f"tensorboard: {Path(lg.tensorboard_dir) / run_name(cfg)}")
    else:
        lines.append("tensorboard: off (logging.tensorboard_dir is null)")
    if lg.metrics_jsonl:
        lines.append(f"metrics.jsonl: {lg.metrics_jsonl} (one line per step, written by swe-rl's trainer)")
    if not lg.wandb_project and not lg.tensorboard_dir and not lg.metrics_jsonl:
        lines.append("metrics go to stdout only (aem_alpha_* / swe_rl_* in the job log)")
    return lines


def logger_problems(cfg: OpenRLHFTrainConfig, environ: dict[str, str] | None = None) -> list[str]:
    """Why the configured loggers would not come up in OpenRLHF's trainer actor (empty = they will)."""
    lg, out = cfg.logging, []
    if lg.wandb_project:
        if wandb_key(environ) is None:
            out.append(f"logger: logging.wandb_project is {lg.wandb_project!r} but {WANDB_ENV} is not set")
        if importlib.util.find_spec("wandb") is None:
            out.append("logger: wandb is not installed (upstream imports it in the trainer actor)")
    if lg.tensorboard_dir and importlib.util.find_spec("tensorboard") is None:
        out.append("logger: tensorboard is not installed (torch.utils.tensorboard needs it)")
    return out


def write_metrics_line(step: int, logs: dict | None, states: dict | None, prompts: list[str] | None) -> None:
    """One JSON line per trainer step (upstream's logged status: its scalars; the episode, consumed prompts and
    this step's prompts), appended to $SWE_RL_METRICS_JSONL: the run's curves without wandb or TensorBoard."""
    path = os.environ.get(METRICS_ENV)
    if not path:
        return
    row: dict[str, Any] = {"step": int(step), "time": time.time()}
    for k in ("episode", "total_consumed_prompts"):
        if states and k in states:
            row[k] = int(states[k])
    row |= {
        k: float(v)
        for k, v in (logs or {}).items()
        if isinstance(v, (int, float)) and not isinstance(v, bool)
    }
    if prompts is not None:
        row["prompts"] = list(prompts)  # one per sample: a task's n samples repeat its prompt
    with open(path, "a") as f:
        f.write(json.dumps(row) + "\n")
