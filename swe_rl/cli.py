"""`swe-rl` command line. Each command imports its heavy dependencies inside the function, so --help is fast."""

from __future__ import annotations

import typer

app = typer.Typer(
    name="swe-rl",
    help="RL for software-engineering agents: rollouts in Docker sandboxes, GRPO + AEM/EMPG/EPO, SWE-bench eval.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)


@app.callback()
def main() -> None:
    """swe-rl: train and evaluate coding agents."""


@app.command()
def version() -> None:
    """Print versions of swe-rl and its key dependencies."""
    from importlib.metadata import PackageNotFoundError
    from importlib.metadata import version as v

    for pkg in ("swe-rl", "torch", "transformers", "ray", "swebench", "docker", "openrlhf", "vllm"):
        try:
            typer.echo(f"{pkg:14s} {v(pkg)}")
        except PackageNotFoundError:
            typer.echo(f"{pkg:14s} (not installed)")


# evaluation harness (swe_rl/evaluation/cli.py)
from swe_rl.evaluation.cli import eval_command, report_command  # noqa: E402

app.command("eval")(eval_command)
app.command("report")(report_command)

# OpenRLHF backend (swe_rl/train/openrlhf/cli.py)
from swe_rl.train.openrlhf.cli import data_command as openrlhf_data_command  # noqa: E402
from swe_rl.train.openrlhf.cli import train_openrlhf_command  # noqa: E402

app.command("train-openrlhf")(train_openrlhf_command)
app.command("openrlhf-data")(openrlhf_data_command)

# SWE tasks and their images (swe_rl/images/cli.py), grading (swe_rl/grading/cli.py)
from swe_rl.grading.cli import grade_command, validate_command  # noqa: E402
from swe_rl.images.cli import images_app, tasks_app  # noqa: E402

tasks_app.command("validate")(
    validate_command
)  # grading's: it grades each gold once (images never import grading)
app.add_typer(tasks_app, name="tasks")
app.add_typer(images_app, name="images")
app.command("grade")(grade_command)

# Built-in trainer: train (default backend), sft (swe_rl/train/cli.py).
from swe_rl.train.cli import sft_command  # noqa: E402
from swe_rl.train.cli import train_command as builtin_train_command  # noqa: E402

app.command("train")(builtin_train_command)
app.command("sft")(sft_command)

# Experiments built on the trainer: demo, compare (swe_rl/experiments/cli.py). Importing the package registers its
# data sources (toy, decisions) with `swe-rl train`, so the trainer never imports them.
from swe_rl.experiments.cli import register as register_experiments  # noqa: E402

register_experiments(app)


# agent: render a trajectory
from swe_rl.agent.show import show_command  # noqa: E402

app.command("show")(show_command)

# gateway: OpenAI-compatible endpoint recording agent sessions as token trajectories (swe_rl/gateway/cli.py)
from swe_rl.gateway.cli import gateway_command  # noqa: E402

app.command("gateway")(gateway_command)

# view: a run's static HTML viewer (swe_rl/view/cli.py)
from swe_rl.view.cli import view_command  # noqa: E402

app.command("view")(view_command)


if __name__ == "__main__":
    app()
