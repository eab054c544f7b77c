"""`swe-rl eval` and `swe-rl report` (registered in swe_rl/cli.py)."""

from __future__ import annotations

from pathlib import Path

import typer

from swe_rl.config import ConfigError


def eval_command(
    overrides: list[str] = typer.Argument(None, help="dotted overrides, e.g. agent.max_steps=20 runs=4"),
    config: list[str] = typer.Option([], "--config", "-c", help="YAML config file(s), merged in order"),
    override: list[str] = typer.Option(
        [], "--override", "-o", help="dotted KEY=VALUE override, as swe-rl train takes them"
    ),
    name: str | None = typer.Option(
        None, "--name", help="run directory name (rerun the same name to resume)"
    ),
    dataset: str | None = typer.Option(
        None, "--dataset", help="'micro', an HF name, a .jsonl/.parquet or task repo"
    ),
    split: str | None = typer.Option(None, "--split", help="dataset split"),
    instances: list[str] = typer.Option([], "--instance", "-i", help="instance id or glob (repeatable)"),
    runs: int | None = typer.Option(None, "--runs", "-k", help="k independent runs (Pass@1 mean, Pass@k)"),
    workers: int | None = typer.Option(None, "--workers", help="Ray rollout actors"),
    backend: str | None = typer.Option(None, "--backend", help="pool backend: ray or local"),
    ray_address: str | None = typer.Option(
        None, "--ray-address", help="join this Ray cluster instead of a local one"
    ),
    grader: str | None = typer.Option(None, "--grader", help="ours or official (swebench run_evaluation)"),
    output_dir: str | None = typer.Option(None, "--output-dir", help="parent folder of run directories"),
) -> None:
    """Run the agent over a dataset k times; write predictions, grading, report.json/report.md with plots."""
    from sandboxes.base import EngineUnreachableError
    from swe_rl.config import load_config
    from swe_rl.evaluation.config import EvalConfig
    from swe_rl.evaluation.harness import run_eval
    from swe_rl.policy.model_dir import check_policy_paths

    flags = {
        "name": name,
        "dataset.source": dataset,
        "dataset.split": split,
        "runs": runs,
        "pool.num_actors": workers,
        "pool.backend": backend,
        "pool.ray_address": ray_address,
        "grader": grader,
        "output_dir": output_dir,
    }
    extra = [f"{k}={v}" for k, v in flags.items() if v is not None]
    if instances:
        extra.append(f"dataset.instances=[{', '.join(repr(i) for i in instances)}]")
    try:
        files: list[str | Path] = list(config)
        cfg = load_config(EvalConfig, files=files, overrides=[*extra, *(overrides or []), *override])
        check_policy_paths(cfg.policy, "policy")  # a bad model folder: one line here, not a worker traceback
        report = run_eval(cfg)
    except (ConfigError, ValueError) as e:  # ConfigError, TaskLoadError: one message naming the input
        typer.echo(f"error: {e}", err=True)
        raise typer.Exit(2) from None
    except EngineUnreachableError as e:  # sandbox.backend docker on this host, and no engine answers
        typer.echo(f"error: sandbox.backend docker: {e}", err=True)
        raise typer.Exit(1) from None
    except KeyboardInterrupt:
        typer.echo("interrupted: finished episodes are saved; rerun the same command to resume", err=True)
        raise typer.Exit(130) from None
    _summary(report, f"{cfg.output_dir}/{cfg.name}")


def report_command(run_dir: str = typer.Argument(..., help="an evaluation run directory")) -> None:
    """Rebuild report.json, report.md and the plots of an evaluation run from its files."""
    from swe_rl.evaluation.harness import report_from_dir

    try:
        report = report_from_dir(run_dir)
    except ConfigError as e:
        typer.echo(f"error: {e}", err=True)
        raise typer.Exit(2) from None
    _summary(report, run_dir)


def _summary(report: dict, run_dir: str) -> None:
    lo, hi = report["resolve_rate_ci95"]
    c = report["counts"]
    typer.echo(
        f"resolve rate {report['resolve_rate']:.1%} (95% CI {lo:.1%}-{hi:.1%}) over {report['episodes']} episodes; "
        f"resolved {c['resolved']}, unresolved {c['unresolved']}, empty patch {c['empty_patch']}, "
        f"infra failure {c['infra_failure']}"
    )
    if report["pass@k"]:
        typer.echo("  " + "  ".join(f"pass@{k}={v:.1%}" for k, v in report["pass@k"].items()))
    for label, n in report.get("infra_failure_labels", {}).items():
        first = (report.get("infra_failure_examples") or {}).get(label)
        typer.echo(f"  infra failure {label} x{n}" + (f"; the first: {first}" if first else ""))
    typer.echo(f"report: {run_dir}/report/report.md")
