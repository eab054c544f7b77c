"""`swe-rl train --backend openrlhf`: typed config → `ray.init` with our runtime env → OpenRLHF's CLI in-process.

OpenRLHF's parser lives under `if __name__ == "__main__"` of `openrlhf.cli.train_ppo_ray`, so we run that module
with runpy after setting sys.argv. It skips its own `ray.init` when Ray is up, so our runtime env wins (env vars
carry the AEM and agent configs); `actors.install_swe_rl_classes()` puts our `ray.remote` subclasses in place of
OpenRLHF's actor and trainer names before its CLI module is run. The wandb key enters only that in-process argv
(loggers.py); what is printed or saved shows `$WANDB_API_KEY`.
"""

from __future__ import annotations

import json
import os
import shlex
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import yaml

from swe_rl.train.openrlhf.config import OpenRLHFTrainConfig
from swe_rl.train.openrlhf.flags import ENTRY_MODULE, to_argv
from swe_rl.train.openrlhf.loggers import KEY_PLACEHOLDER, METRICS_ENV, logger_summary, secret_argv

AGENT_ENV = "SWE_RL_AGENT_CONFIG"
AEM_ENV = "SWE_RL_AEM_CONFIG"  # read by actors.aem_config in the policy and trainer actors


def agent_func_path() -> str:
    """Absolute path of the file passed as --train.agent_func_path (must exist on every rollout node)."""
    return str(Path(__file__).with_name("agent_func.py").resolve())


def build_env_vars(cfg: OpenRLHFTrainConfig, environ: dict[str, str] | None = None) -> dict[str, str]:
    env = os.environ if environ is None else environ
    out = {  # upstream's three defaults (train_ppo_ray.train), then our sections for the actors and the executor
        "TOKENIZERS_PARALLELISM": env.get("TOKENIZERS_PARALLELISM", "true"),
        "NCCL_DEBUG": env.get("NCCL_DEBUG", "WARN"),
        "RAY_ENABLE_ZERO_COPY_TORCH_TENSORS": env.get("RAY_ENABLE_ZERO_COPY_TORCH_TENSORS", "1"),
        AEM_ENV: cfg.aem.model_dump_json(),
        AGENT_ENV: cfg.agent.model_dump_json(),
    }
    if cfg.logging.metrics_jsonl:  # absolute: Ray workers need not start in this directory
        out[METRICS_ENV] = str(Path(cfg.logging.metrics_jsonl).resolve())
    return out


def build_runtime_env(cfg: OpenRLHFTrainConfig, environ: dict[str, str] | None = None) -> dict[str, Any]:
    return {"env_vars": build_env_vars(cfg, environ)}


def build_command(cfg: OpenRLHFTrainConfig) -> list[str]:
    return ["python", "-m", ENTRY_MODULE, *to_argv(cfg, agent_func_path())]


def format_command(cmd: list[str]) -> str:
    """One flag (with its values) per line, shell-quoted, so the dry run can be pasted into a shell."""
    lines: list[list[str]] = [[]]
    for tok in cmd:
        if tok.startswith("--"):
            lines.append([])
        lines[-1].append(f'"{KEY_PLACEHOLDER}"' if tok == KEY_PLACEHOLDER else shlex.quote(tok))
    return " \\\n  ".join(" ".join(parts) for parts in lines if parts)


def resume_status(cfg: OpenRLHFTrainConfig) -> str:
    """Whether OpenRLHF will resume: it loads `ckpt.path/_actor` when that exists (--ckpt.load_enable is always
    on), else starts at step 0. DeepSpeed's `latest` file names the saved tag (global_step<N>)."""
    actor = Path(cfg.ckpt.path) / "_actor"
    if not actor.is_dir():
        return f"fresh run: no checkpoint at {actor} (as seen from this node); training starts at step 0"
    latest = actor / "latest"
    tag = latest.read_text().strip() if latest.is_file() else "no `latest` tag file"
    return f"resuming from {actor} ({tag}): OpenRLHF restores weights, optimizer, step and data position"


def render_dry_run(cfg: OpenRLHFTrainConfig, environ: dict[str, str] | None = None) -> str:
    runtime_env = build_runtime_env(cfg, environ)
    shown = {**runtime_env, "env_vars": dict(runtime_env["env_vars"])}
    for key in (AEM_ENV, AGENT_ENV):  # show the JSON configs parsed, not as escaped strings
        shown["env_vars"][key] = json.loads(shown["env_vars"][key])
    return "\n".join(
        [
            "# OpenRLHF 0.11.2 command (swe-rl runs it in-process after ray.init with the runtime env below)",
            format_command(build_command(cfg)),
            "",
            f"# ray.init(address={cfg.cluster.ray_address or 'local'!r}, runtime_env=...)",
            json.dumps(shown, indent=2),
            "",
            "# trainer: " + ("PPOTrainerAsync" if cfg.async_train.enabled else "PPOTrainer (synchronous)"),
            "# " + resume_status(cfg),
            *(f"# logger {line}" for line in logger_summary(cfg, environ)),
            "",
            "# resolved config",
            yaml.safe_dump(cfg.model_dump(mode="json"), sort_keys=False).rstrip(),
        ]
    )


def dry_run_nodes(cfg: OpenRLHFTrainConfig, environ: dict[str, str] | None = None) -> list[str]:
    """With a cluster to join (cluster.ray_address or RAY_ADDRESS), each sandbox node and the dataset's images it
    lacks (a driver joins and runs one zero-CPU probe per node; no training actor starts). Without one, --dry-run
    starts no Ray and says so: `--preflight` starts a private one and checks this machine."""
    address = cfg.cluster.ray_address or (os.environ if environ is None else environ).get("RAY_ADDRESS")
    if not address or address == "local":
        return [
            "# sandbox nodes: not checked (no cluster.ray_address / RAY_ADDRESS to join); --preflight checks them"
        ]
    import ray

    from sandboxes.raystart import connect_ray
    from swe_rl.rollout.nodes import node_image_checks, resource_of
    from swe_rl.train.openrlhf.preflight import dataset_check

    data, images = dataset_check(cfg)
    if not images:
        return [f"# sandbox nodes: not checked ({data.detail})"]
    lines: list[str] = []
    started = connect_ray(
        address, purpose="dry-run", say=lambda m: lines.append(f"# {m}"), log_to_driver=False
    )
    try:
        checks = node_image_checks(images, resource_of(cfg.agent.sandbox, default=None))
    finally:
        if started:
            ray.shutdown()
    return lines + [f"# {'OK  ' if ok else 'FAIL'} {name}: {detail}" for name, ok, detail in checks]


def _save_resolved(cfg: OpenRLHFTrainConfig, runs_dir: str) -> Path:
    from swe_rl.runs import RunDir

    run = RunDir.create(runs_dir, cfg.name)
    run.save_config(cfg)
    (run.root / "openrlhf_command.sh").write_text(format_command(build_command(cfg)) + "\n")
    return run.root


def run_openrlhf(
    cfg: OpenRLHFTrainConfig,
    dry_run: bool = False,
    *,
    runs_dir: str = "runs",
    echo: Callable[[str], Any] = print,
) -> int:
    """Launch OpenRLHF for `cfg` (blocks until training ends). With dry_run, print what would run and return."""
    if dry_run:
        echo(render_dry_run(cfg))
        for line in dry_run_nodes(cfg):
            echo(line)
        return 0
    if not Path(cfg.data.prompt_dataset).exists() and "://" not in cfg.data.prompt_dataset:
        raise FileNotFoundError(
            f"data.prompt_dataset: {cfg.data.prompt_dataset} not found (make it with `swe-rl openrlhf-data`)"
        )
    argv = secret_argv(build_command(cfg)[2:])  # drop "python -m"; argv[0] is the module name
    import runpy

    try:
        from swe_rl.train.openrlhf.actors import install_swe_rl_classes
    except ImportError as e:  # before any run dir or Ray exists
        raise ImportError(
            f"OpenRLHF's trainer stack does not import here ({e}): training needs `pip install -e .[gpu]` on a "
            "CUDA machine; `swe-rl train-openrlhf --preflight -c RECIPE` lists what is missing"
        ) from e
    root = _save_resolved(cfg, runs_dir)
    if cfg.logging.metrics_jsonl:
        Path(cfg.logging.metrics_jsonl).parent.mkdir(parents=True, exist_ok=True)
    echo(f"run dir: {root}")
    echo(resume_status(cfg))
    for line in logger_summary(cfg):
        echo(f"logger {line}")
    from sandboxes.raystart import connect_ray

    # cluster.ray_address (or RAY_ADDRESS under `ray job submit`) joined, else a private local Ray on purpose
    connect_ray(
        cfg.cluster.ray_address, purpose="train-openrlhf", say=echo, runtime_env=build_runtime_env(cfg)
    )
    from swe_rl.train.openrlhf.placement import controller_node

    # the driver's node, so that a lost sandbox node does not take the trainer's controllers with it
    node = controller_node()
    echo(f"trainer controllers on node {node or '(none with a CPU: Ray places them)'}")
    # our ray.remote subclasses under OpenRLHF's names, before its CLI module runs
    install_swe_rl_classes(node)
    old_argv = sys.argv
    sys.argv = argv
    try:
        runpy.run_module(ENTRY_MODULE, run_name="__main__", alter_sys=True)
    finally:
        sys.argv = old_argv
    return 0
