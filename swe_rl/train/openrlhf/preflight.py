"""`swe-rl train-openrlhf --preflight -c RECIPE`: the first minute of a cluster run, before any GPU hour is spent.

On the Ray cluster of `cluster.ray_address` (a local Ray when null) it checks, one line each:
- our actor classes: each one created as a real Ray actor (actors.preflight_actor_check), so the forward and the
  seam that will run are ours;
- the logger (wandb key / packages, TensorBoard), the prompt dataset (rows parse as Tasks) and the GPUs the
  recipe's placement needs against the cluster's;
- on every alive node (a Ray task pinned to it): pinned versions, the agent executor file and the dataset at the
  same path (shared filesystem), Docker and every sandbox image of the dataset, free disk at ckpt.path.
Prints `OK`/`FAIL` per check and exits 1 on any failure. A CPU machine runs all of it; the GPU-only parts fail
with their reason (no GPUs, vLLM / DeepSpeed / flash-attn absent) instead of being skipped.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

from swe_rl.rollout.nodes import node_image_checks, resource_of
from swe_rl.train.openrlhf.config import OpenRLHFTrainConfig
from swe_rl.train.openrlhf.envcheck import PINS, Check, check_disk, check_docker, check_package
from swe_rl.train.openrlhf.loggers import logger_problems, logger_summary


def gpus_needed(cfg: OpenRLHFTrainConfig) -> int:
    """GPUs the placement asks Ray for: the actor group, a reference of the same size when there is a KL term,
    and the vLLM engines unless everything is colocated on the actor's GPUs."""
    c = cfg.cluster
    actor = c.nodes * c.gpus_per_node
    if c.colocate_all:
        return actor
    ref = actor if cfg.optim.kl_coef > 0 else 0
    return actor + ref + c.vllm_engines * c.vllm_tp


def dataset_check(cfg: OpenRLHFTrainConfig) -> tuple[Check, list[str]]:
    """The prompt rows parse as Tasks (and their validation records as such); returns the check and the sorted
    sandbox images they need. With `agent.grade_timeout_gold_factor`, a validated row whose record has no gold
    test time (made before validation timed gold) fails the check: the factor would silently not apply to it,
    and its timeouts would stay masked (docs/grading.md); `swe-rl openrlhf-data` makes the rows again."""
    from swe_rl.grading import validation_of
    from swe_rl.train.openrlhf.data import task_from_label

    path = Path(cfg.data.prompt_dataset)
    if not path.is_file():
        return Check("dataset", False, f"{path} not found (make it with `swe-rl openrlhf-data`)"), []
    images, rows, where, validated, untimed = set(), 0, 0, 0, []
    try:
        for line in path.read_text().splitlines():
            where += 1
            if line.strip():
                task = task_from_label(json.loads(line)["label"])
                images.add(task.image)
                rows += 1
                record = validation_of(task)
                validated += record is not None
                if record is not None and record.get("gold_test_s") is None:
                    untimed.append(task.instance_id)
    except (ValueError, KeyError, TypeError) as e:
        return Check("dataset", False, f"{path} line {where}: {e}"), []
    need = cfg.rollout.prompts_per_step
    detail = f"{rows} tasks, {len(images)} sandbox images, {validated} validated" + (
        "" if rows >= need else f"; need >= {need}"
    )
    factor = cfg.agent.grade_timeout_gold_factor
    stale = factor is not None and bool(untimed)
    if stale:
        detail += (
            f"; agent.grade_timeout_gold_factor={factor:g} needs gold's test time, which {len(untimed)} "
            f"validation records lack (made before it was timed: {', '.join(untimed[:3])}"
            f"{', ...' if len(untimed) > 3 else ''}): make the rows again with `swe-rl openrlhf-data`"
        )
    return Check("dataset", rows >= need and not stale, detail), sorted(i for i in images if i)


def gpu_check(cfg: OpenRLHFTrainConfig, resources: dict[str, float]) -> Check:
    have, need = int(resources.get("GPU", 0)), gpus_needed(cfg)
    return Check(
        "cluster gpus", have >= need, f"Ray cluster has {have} GPUs, the recipe's placement needs {need}"
    )


def node_checks(images: list[str], files: list[str], disk_path: str, disk_gb: float) -> list[Check]:
    """Run on one node: pinned versions, shared files, Docker + images, disk."""
    import platform

    host = platform.node()
    out = [check_package(dist, want) for dist, want in PINS.items()]
    out += [Check(f"file {f}", Path(f).exists(), "present" if Path(f).exists() else "missing") for f in files]
    out += check_docker(images)
    out.append(check_disk(disk_path, disk_gb))
    return [Check(f"{host}: {c.name}", c.ok, c.detail) for c in out]


def cluster_node_checks(images: list[str], files: list[str], disk_path: str, disk_gb: float) -> list[Check]:
    """`node_checks` on every alive Ray node, each as a task pinned to its node."""
    import ray
    from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

    task = ray.remote(num_cpus=0, max_retries=0)(node_checks)
    nodes = [n for n in ray.nodes() if n.get("Alive")]
    refs = [
        task.options(scheduling_strategy=NodeAffinitySchedulingStrategy(n["NodeID"], soft=False)).remote(
            images, files, disk_path, disk_gb
        )
        for n in nodes
    ]
    return [c for checks in ray.get(refs, timeout=600) for c in checks]


def actor_checks() -> list[Check]:
    """Our `ray.remote` actor classes created as real actors (A1's actors.preflight_actor_check)."""
    try:
        from swe_rl.train.openrlhf.actors import install_swe_rl_classes, preflight_actor_check

        install_swe_rl_classes()  # as launch.py does before OpenRLHF's CLI runs
        problems = preflight_actor_check()
    except Exception as e:  # import of OpenRLHF's GPU stack, actor start-up, ...
        return [Check("actors", False, f"{type(e).__name__}: {e}")]
    if not problems:
        return [Check("actors", True, "our policy actor and experience maker run as real Ray actors")]
    return [Check("actors", False, p) for p in problems]


def run_preflight(
    cfg: OpenRLHFTrainConfig,
    *,
    disk_gb: float = 200.0,
    environ: dict[str, str] | None = None,
    echo: Callable[[str], Any] = print,
) -> int:
    """Every check, one line each; 0 when all pass, 1 otherwise."""
    import ray

    from swe_rl.train.openrlhf.launch import agent_func_path, build_runtime_env

    data, images = dataset_check(cfg)
    problems = logger_problems(cfg, environ)
    checks = [data, *(Check("logger", False, p.removeprefix("logger: ")) for p in problems)]
    if not problems:
        checks.append(Check("logger", True, "; ".join(logger_summary(cfg, environ))))
    from sandboxes.raystart import connect_ray

    # cluster.ray_address (or RAY_ADDRESS) joined, else a throwaway private local Ray
    started = connect_ray(
        cfg.cluster.ray_address, purpose="preflight", say=echo, runtime_env=build_runtime_env(cfg, environ)
    )
    try:
        checks.append(gpu_check(cfg, ray.cluster_resources()))
        files = [agent_func_path(), str(Path(cfg.data.prompt_dataset).resolve())]
        ckpt = str(Path(cfg.ckpt.path).resolve())  # workers need not share the driver's cwd
        checks += cluster_node_checks(images, files, ckpt, disk_gb)
        checks += [Check(*c) for c in node_image_checks(images, resource_of(cfg.agent.sandbox, default=None))]
        checks += actor_checks()
    finally:
        if started:
            ray.shutdown()
    for c in checks:
        echo(c.line())
    bad = [c for c in checks if not c.ok]
    echo(
        f"preflight: {len(checks) - len(bad)}/{len(checks)} checks passed"
        + (f", {len(bad)} failed" if bad else "")
    )
    return 1 if bad else 0
