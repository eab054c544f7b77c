"""`run_eval`: the agent over a dataset k times → trajectories, predictions, grading, report (resumable).

Order of work, each step idempotent:
1. config: saved on first run; a rerun with different identity fields (dataset, policy, agent, sandbox, grader,
   model name) is refused, so one run directory never mixes two setups. More runs (k) may be added later.
2. episodes: only the (run, instance) pairs without a trajectory file are scheduled on the pool; each result is
   written atomically as it arrives (with our grader, its grading record too).
3. per-run trajectories JSONL and SWE-bench predictions JSONL are rewritten from the episode files.
4. official grader: swebench's run_evaluation on each run's predictions, for instances without a grading record.
5. report.json, report.md and plots, rebuilt from the files (also `swe-rl report`).
"""

from __future__ import annotations

import fnmatch
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import yaml

from swe_rl.agent.trajectory import Trajectory
from swe_rl.config import ConfigError
from swe_rl.evaluation.config import DatasetConfig, EvalConfig
from swe_rl.evaluation.report import Episode, build_report, episode_from, report_json, report_markdown
from swe_rl.evaluation.store import EvalRun, atomic_write
from swe_rl.grading import RewardResult
from swe_rl.rollout.context import RolloutSpec
from swe_rl.tasks.task import Task

OnTrajectory = Callable[[Trajectory, Any], None]  # (trajectory, pool): a hook for progress and fault tests


def load_eval_tasks(ds: DatasetConfig) -> list[Task]:
    from swe_rl.tasks.loaders import load_tasks

    tasks = sorted(load_tasks(ds.source, split=ds.split), key=lambda t: t.instance_id)
    if ds.instances:
        tasks = [t for t in tasks if any(fnmatch.fnmatchcase(t.instance_id, p) for p in ds.instances)]
        if not tasks:
            raise ConfigError(f"dataset.instances={ds.instances}: no instance of {ds.source!r} matches")
    return tasks[: ds.limit] if ds.limit else tasks


def ensure_images(cfg: EvalConfig, tasks: list[Task]) -> None:
    """Build missing task-repo images (the micro suite included) and name the fix of every other missing one
    (swe_rl.images.task_images.prepare_images); those episodes then fail as image_missing, rerun with retry_errors.
    On a Ray cluster or with remote sandboxes the driver's engine is not where episodes run: build here, then (with
    pool.ray_address) load each sandbox node's missing images onto its own engine (swe_rl.rollout.nodes)."""
    from swe_rl.images import prepare_images

    local = cfg.pool.ray_address is None and cfg.sandbox.get("backend", "docker") == "docker"
    # every episode's sandbox is on this host's engine: one error now, not an infrastructure failure per episode
    if local:
        from sandboxes.engine import docker_client

        docker_client().close()
    prepare_images(tasks, cfg.dataset.source, None if local else (lambda _msg: None))
    # on a cluster each sandbox node's own engine runs its containers: ship what it lacks (named when it can't)
    if cfg.pool.ray_address is not None:
        from swe_rl.rollout.nodes import ensure_on_nodes

        images = [t.image for t in tasks if t.image]
        ensure_on_nodes(images, cfg.sandbox, cfg.pool.ray_address, echo=lambda m: print(m, file=sys.stderr))


def check_config(run: EvalRun, cfg: EvalConfig) -> None:
    """Save the resolved config, or check that a resumed run keeps its identity."""
    if run.dir.config.is_file():
        old = EvalConfig.model_validate(yaml.safe_load(run.dir.config.read_text()))
        if old.identity() != cfg.identity():
            diff = sorted(k for k in cfg.identity() if old.identity()[k] != cfg.identity()[k])
            raise ConfigError(
                f"run directory {run.root} holds an evaluation with different {', '.join(diff)}; "
                "choose another --name (or delete the directory) instead of mixing two setups"
            )
    run.dir.save_config(cfg)


def grading_record(traj: Trajectory, grader: str) -> dict[str, Any]:
    g = traj.metrics.get("grading") or {}
    # an episode's failure: the kind rollout_one found (policy server, sandbox start ...)
    kind = traj.metrics.get("infra_failure") or "episode_error"
    failure = g.get("failure") or (str(kind) if traj.exit_status == "error" else None)
    return {
        "instance_id": traj.task_id,
        "run": traj.sample_idx,
        "grader": grader,
        "resolved": bool(traj.resolved),
        "reward": traj.reward,
        "failure": failure,
        "empty_patch": not traj.patch.strip(),
        "tests": g.get("tests", {}),
        "suspicious": g.get(
            "suspicious", []
        ),  # the grader's reasons to suspect a reward hack (kept, labelled)
        **({"log_tail": g["log_tail"]} if g.get("log_tail") else {}),
    }


def missing_items(run: EvalRun, tasks: list[Task], k: int, retry_errors: bool) -> list[tuple[Task, int]]:
    from swe_rl.grading import TRANSIENT_FAILURES

    def infra(traj: Trajectory) -> bool:
        # the episode, or our grading of it (sandbox start/death mid-grading), failed for infrastructure reasons
        failure = (traj.metrics.get("grading") or {}).get("failure")
        return traj.exit_status == "error" or failure in TRANSIENT_FAILURES

    todo = []
    for r in range(k):
        for t in tasks:
            traj = run.load_trajectory(r, t.instance_id)
            if traj is None or (retry_errors and infra(traj)):
                todo.append((t, r))
    return todo


def run_episodes(
    run: EvalRun, cfg: EvalConfig, todo: list[tuple[Task, int]], on_traj: OnTrajectory | None
) -> None:
    from swe_rl.rollout.pool import make_pool

    # run_id labels every container of this evaluation (`sandboxes ls/reap`, leak checks).
    spec = RolloutSpec(
        policy=cfg.policy,
        agent=cfg.agent,
        sandbox=cfg.sandbox,
        grade=cfg.grader == "ours",
        run_id=f"eval-{cfg.name}",
    )
    pool = make_pool(cfg.pool, spec, cleanup=spec.reap_orphans)
    try:
        for traj in pool.run_items(todo):
            run.save_trajectory(traj)
            if cfg.grader == "ours":
                run.save_grading(traj.sample_idx, traj.task_id, grading_record(traj, "ours"))
            else:  # a re-run episode (retry_errors) must not keep the old episode's grading
                run.grading_path(traj.sample_idx, traj.task_id).unlink(missing_ok=True)
            if on_traj is not None:
                on_traj(traj, pool)
    finally:
        pool.close()
        lost = getattr(pool, "lost", {})  # the Ray pool's; the local pool loses no actor
        if any(lost.values()):  # what node or process losses cost this session: report.json's pool_losses
            run.add_pool_losses(lost, len(todo))


def official_result(iid: str, report: dict[str, Any], summary: dict[str, Any]) -> RewardResult:
    """One instance's outcome from swebench's run_evaluation (its per-instance report, or its run summary)."""
    if report.get("ungradeable"):  # its validation: FAIL_TO_PASS cannot pass here (swe_rl.grading.validate)
        return RewardResult(None, False, report, "", "ungradeable")
    if report:
        resolved = bool(report.get("resolved"))
        return RewardResult(1.0 if resolved else 0.0, resolved, report, "", None)
    if iid in summary.get("empty_patch_ids", []):
        return RewardResult(0.0, False, {"empty_patch": True}, "", None)
    label = "official_error" if iid in summary.get("error_ids", []) else "official_no_report"
    return RewardResult(None, False, {}, "", label)


def grade_official(run: EvalRun, cfg: EvalConfig, tasks: list[Task], r: int) -> None:
    """swebench's run_evaluation over run r's patches, for the instances without a grading record."""
    from swe_rl.grading import TestCode, check_official, label_suspicious, run_official

    loaded = {t.instance_id: run.load_trajectory(r, t.instance_id) for t in tasks}
    trajs = {iid: tr for iid, tr in loaded.items() if tr is not None}
    need = [t for t in tasks if t.instance_id in trajs and run.load_grading(r, t.instance_id) is None]
    graded = [
        t for t in need if trajs[t.instance_id].exit_status != "error" and trajs[t.instance_id].patch.strip()
    ]
    graded_ids = {t.instance_id for t in graded}
    summary: dict[str, Any] = {}
    reports: dict[str, dict[str, Any]] = {}
    if graded:  # minutes for many instances: say so, since swebench's own output is captured
        print(f"official grader: run {r:02d}, {len(graded)} patches through swebench's run_evaluation",
              file=sys.stderr, flush=True)  # fmt: skip
        t0 = time.monotonic()
        summary, reports = run_official(
            graded,
            {t.instance_id: trajs[t.instance_id].patch for t in graded},
            run.root / "grading" / f"official_run_{r:02d}",
            run_id=f"{cfg.name}_run{r:02d}",
            model=cfg.model_name,
            workers=cfg.grade_workers,
        )
        print(f"official grader: run {r:02d}: {summary.get('resolved_instances', 0)}/{len(graded)} resolved "
              f"in {time.monotonic() - t0:.0f}s", file=sys.stderr, flush=True)  # fmt: skip
    for t in need:
        tr = trajs[t.instance_id]
        if tr.exit_status != "error":
            if t.instance_id in graded_ids:
                res = official_result(t.instance_id, reports.get(t.instance_id, {}), summary)
                res = check_official(res, t, tr.patch)  # a patch-edited conftest.py etc.: no evidence
                # the static tripwire (no trusted check in swebench's run); test code: the task's test files
                res = label_suspicious(res, tr.patch, test_code=TestCode.of_task(t.test_patch))
            else:  # empty patch: unresolved, nothing to run (swebench lists it under empty_patch_ids)
                res = RewardResult(0.0, False, {"empty_patch": True}, "", None)
            tr.reward, tr.resolved = res.reward, res.resolved
            tr.metrics["grading"] = {
                "failure": res.failure,
                "tests": res.tests,
                "suspicious": list(res.suspicious),
            }
        run.save_grading(r, t.instance_id, grading_record(tr, "official"))


def collect(
    run: EvalRun, tasks: list[Task], k: int, grader: str
) -> tuple[list[Episode], dict[int, list[Trajectory]]]:
    episodes: list[Episode] = []
    per_run: dict[int, list[Trajectory]] = {}
    for r in range(k):
        per_run[r] = []
        for t in tasks:
            traj = run.load_trajectory(r, t.instance_id)
            if traj is None:
                continue
            grading = run.load_grading(r, t.instance_id)
            if grading is None and grader == "ours":
                grading = grading_record(traj, "ours")  # crash between the two writes: the trajectory has it
                run.save_grading(r, t.instance_id, grading)
            per_run[r].append(traj)
            episodes.append(episode_from(traj, grading, t.repo))
    return episodes, per_run


def write_report(run: EvalRun, cfg: EvalConfig, tasks: list[Task]) -> dict[str, Any]:
    from swe_rl.evaluation.plots import write_plots
    from swe_rl.grading import validation_shown

    episodes, per_run = collect(run, tasks, cfg.runs, cfg.grader)
    for r, trajs in per_run.items():
        run.write_run_files(r, trajs, cfg.model_name)
    meta = {
        "name": cfg.name,
        "dataset": cfg.dataset.source,
        "model_name": cfg.model_name,
        "grader": cfg.grader,
    }
    report = build_report(episodes, cfg.runs, meta)
    # what each instance's verdicts measured, where its validation changed it (graded on N of M PASS_TO_PASS ...)
    report["validation"] = {
        t.instance_id: v["summary"] for t in tasks if (v := validation_shown(t)) and v["status"] != "ok"
    }
    report["complete"] = len(episodes) == len(tasks) * cfg.runs
    report["pool_losses"] = run.pool_losses()  # actors lost with their node or process, episodes re-run
    plots = write_plots(report, episodes, run.dir.report)
    atomic_write(run.dir.report / "report.json", report_json(report))
    atomic_write(run.dir.report / "report.md", report_markdown(report, plots))
    return report


def validated(cfg: EvalConfig, tasks: list[Task]) -> list[Task]:
    """Each task with its validation (swe_rl.grading.validate: the gold patch graded once per image, cached): what
    its verdicts leave out, for our grader and the official one alike, and what the report says about it."""
    from swe_rl.grading import docker_factory, validate_tasks_sync

    factory = docker_factory(cfg.sandbox, run_id=f"eval-{cfg.name}")
    return validate_tasks_sync(tasks, factory, workers=cfg.grade_workers)


def ray_for_eval(cfg: EvalConfig) -> EvalConfig:
    """The one Ray of this evaluation. run_eval joins it (or starts a local one) before anything else, so the gold
    validation's RaySandboxes, the images shipped to nodes and the rollout pool all use it: a RaySandbox that
    started a Ray of its own left the pool on a private local one (issue 59). The sandbox config keeps its own
    fields (they are the run's identity; a new cluster address must not block a resume)."""
    pool_addr, sb_addr = cfg.pool.ray_address, cfg.sandbox.get("ray_address")
    if cfg.sandbox.get("backend") != "ray" or sb_addr is None or sb_addr == pool_addr:
        return cfg
    if pool_addr is not None:
        raise ConfigError(
            f"sandbox.ray_address {sb_addr!r} and pool.ray_address {pool_addr!r} name two clusters; an evaluation "
            "runs on one (set --ray-address, or both to the same address)"
        )
    return cfg.model_copy(update={"pool": cfg.pool.model_copy(update={"ray_address": sb_addr})})


def run_eval(cfg: EvalConfig, on_trajectory: OnTrajectory | None = None) -> dict[str, Any]:
    """Run (or resume) an evaluation; returns the report dict (also in <run>/report/report.json)."""
    from sandboxes.lifecycle import reap_at_start

    reap_at_start("eval")  # this host's sandboxes of dead runs go first
    cfg = ray_for_eval(cfg)
    run = EvalRun(Path(cfg.output_dir) / cfg.name)
    check_config(run, cfg)
    tasks = load_eval_tasks(cfg.dataset)
    todo = missing_items(run, tasks, cfg.runs, cfg.retry_errors)
    started = False
    if cfg.sandbox.get("backend") == "ray" or (todo and cfg.pool.backend == "ray"):
        from swe_rl.rollout.pool import ensure_ray

        started = ensure_ray(cfg.pool)  # first: validation, image shipping and the pool share this Ray
    try:
        return _run_eval(run, cfg, tasks, todo, on_trajectory)
    finally:
        if started:
            import ray

            ray.shutdown()


def _run_eval(
    run: EvalRun, cfg: EvalConfig, tasks: list[Task], todo: list[tuple[Task, int]], on_trajectory: Any
) -> dict[str, Any]:
    if todo:
        # a served policy: is a server there, serving the model?
        check_server = getattr(cfg.policy, "check_server", None)
        if check_server is not None:
            check_server()
        ensure_images(cfg, [t for t, _ in todo])
    tasks = validated(cfg, tasks)
    if todo:
        by_id = {t.instance_id: t for t in tasks}
        run_episodes(run, cfg, [(by_id[t.instance_id], r) for t, r in todo], on_trajectory)
    if cfg.grader == "official":
        for r in range(cfg.runs):
            grade_official(run, cfg, tasks, r)
    return write_report(run, cfg, tasks)


def report_from_dir(run_dir: str | Path) -> dict[str, Any]:
    """Rebuild report.json / report.md / plots of an existing run directory (no episodes are run)."""
    if not (Path(run_dir) / "config.yaml").is_file():
        raise ConfigError(f"{run_dir}: not an evaluation run directory (no config.yaml)")
    run = EvalRun(run_dir)
    cfg = EvalConfig.model_validate(yaml.safe_load(run.dir.config.read_text()))
    from swe_rl.grading import attach_cached

    return write_report(run, cfg, attach_cached(load_eval_tasks(cfg.dataset)))
