"""Every command in README.md and docs/*.md is run (issue 38), so a renamed flag, target or file fails CI.

Each fenced shell block (```bash / ```sh / ```shell / ```console) runs as one bash script from a scratch copy of
the repository root (a symlink to every top-level entry, a fresh runs/: outputs never land in the checkout), with
`.venv/bin` first on PATH as `source .venv/bin/activate` leaves it. A command that needs a GPU, a cluster, a
model server or hours runs in the cheaper form FORMS gives it, or is listed there with its reason; FORMS is the one
place for that. A failure names the file and line of the block and of the command.
"""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

from tests.docs.blocks import Block, Command, blocks, program, repo_paths

pytestmark = pytest.mark.docker

REPO = Path(__file__).resolve().parents[2]
DOCS = [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]

# (pattern on the command without leading VAR=value, form, reason). Forms: "help" appends --help (click and typer
# parse every option before --help exits, so an unknown flag still fails), "dry-run" appends --dry-run, "make"
# runs `make -n` (the target needs a rule in the Makefile; nothing is set up), "one" / "one-id" append `-i ONE` /
# `--id ONE` (one instance through the same path), "listed" runs nothing. In every form the repository paths a
# command names (configs/, scripts/, ...) must exist. Anything else runs as is.
ONE = "swe-rl-micro__confini-1"
# fmt: off
FORMS: list[tuple[str, str, str]] = [
    (r"^swe-rl eval -c configs/eval/micro\.yaml$", "one", "the whole suite takes 1-2 min; one instance, same path"),
    (r"^swe-rl grade --tasks micro\b(?!.*--id)", "one-id", "15 gradings; one, same path (all 15 after removing"
     " their images: tests/tasks/test_preconditions.py, 2 of them)"),
    (r"^make\b", "make", "targets install the machine or run whole suites (the suites are what CI runs)"),
    (r"^swe-rl (demo|compare|sft|train)\b(?!-)", "help", "CPU training: minutes to hours"),
    (r"^swe-rl train-openrlhf\b(?!.*--dry-run)", "dry-run", "starts a GPU cluster run"),
    (r"^swe-rl gateway\b", "help", "a server that runs until Ctrl-C"),
    (r"^swe-rl images build\b", "help", "needs a folder of real SWE-bench inputs (make test-real builds them)"),
    (r"^swe-rl eval .*swe_bench_verified", "help", "needs a served model and SWE-bench images"),
    (r"^bash scripts/gpu_smoke\.sh$", "help", "needs a GPU (its CPU mode: tests/openrlhf/test_scripts.py)"),
    (r"^bash scripts/gpu_check\.sh --allow-cpu$", "help", "5 CPU-minutes of gpu tests and two RL steps"),
    (r"^bash scripts/gpu_pack\.sh\b", "help", "downloads 21 wheels (kept out of CI's time)"),
    (r"^bash scripts/gpu_dry_env\.sh\b", "help", "downloads ~3 GB of CUDA torch (kept out of CI's time)"),
    (r"^scripts/cluster/cleanup_sandboxes\.sh$", "dry-run", "removes every sandbox of this host, live ones too"),
    (r"^scripts/cluster/prepull_images\.sh\b", "listed", "pulls from a registry, and CI has none"),
    (r"^scripts/cluster/env_check\.sh$", "listed", "a node check: fails by design without GPUs"),
    (r"^scripts/cluster/env_check\.sh \S+\.yaml", "listed", "the preflight joins a running GPU cluster"),
    (r"^scripts/cluster/ray_(head|worker)\.sh\b", "listed", "starts a Ray node after the GPU node check"),
    (r"^scripts/cluster/submit\.sh\b", "listed", "submits to a Ray cluster's job server"),
    (r"^sbatch\b", "listed", "SLURM"),
    (r"^vllm serve\b", "listed", "a GPU model server that runs until stopped"),
]
# fmt: on


def form_of(cmd: Command) -> tuple[str, str]:
    """(form, reason) of one command; ("run", "") when FORMS has no entry for it."""
    prog = program(cmd.text)
    for pattern, form, reason in FORMS:
        if re.search(pattern, prog):
            return form, reason
    return "run", ""


def as_run(cmd: Command) -> str | None:
    """The shell text that exercises `cmd`, or None when it is listed."""
    form, _ = form_of(cmd)
    if form == "listed":
        return None
    if form == "make":
        return re.sub(r"(^|\s)make\b", r"\1make -n", cmd.text, count=1)
    extra = {"help": " --help", "dry-run": " --dry-run", "one": f" -i {ONE}", "one-id": f" --id {ONE}"}
    return cmd.text + extra.get(form, "")


def script(block: Block) -> str:
    """One bash script for the block: a failing command stops it with its file and line."""
    rel = block.path.relative_to(REPO)
    lines = ["set -o pipefail"]
    for cmd in block.commands:
        text = as_run(cmd)
        if text is not None:
            lines.append(f"{{ {text}\n}} || {{ rc=$?; echo 'docs-test: {rel}:{cmd.line} failed (exit '$rc')' >&2; exit $rc; }}")  # fmt: skip
    return "\n".join(lines) + "\n"


ALL_BLOCKS = [b for path in DOCS for b in blocks(path)]


@pytest.fixture(scope="module")
def root(tmp_path_factory):
    """A scratch repository root: symlinks to the checkout's entries, its own runs/ (gitignored outputs)."""
    scratch = tmp_path_factory.mktemp("docs-root")
    for entry in REPO.iterdir():
        if entry.name != "runs":
            (scratch / entry.name).symlink_to(entry)
    return scratch


def _env() -> dict[str, str]:
    venv_bin = str(Path(sys.executable).parent)  # the venv running the tests is the one the docs activate
    path = f"{venv_bin}{os.pathsep}{os.environ.get('PATH', '')}"
    return {**os.environ, "PATH": path, "PYTHONPATH": str(REPO), "CI": os.environ.get("CI", "true")}


def make_targets(cmd: Command) -> list[str]:
    """The targets a `make ...` command names (VAR=value and options left out)."""
    words = shlex.split(program(cmd.text))
    return [w for w in words[1:] if not w.startswith("-") and "=" not in w] if words[:1] == ["make"] else []


def _has_rule(target: str) -> bool:
    # `make -n` alone passes a .PHONY name whose rule is gone ("Nothing to be done"): the rule itself must exist
    return re.search(rf"^{re.escape(target)}\s*:(?!=)", (REPO / "Makefile").read_text(), re.M) is not None


@pytest.mark.parametrize("block", ALL_BLOCKS, ids=[b.where(REPO) for b in ALL_BLOCKS])
def test_documented_commands_run(block, root):
    missing = [(c.line, p) for c in block.commands for p in repo_paths(c.text) if not (REPO / p).exists()]
    assert not missing, f"{block.where(REPO)}: no such file in the repository: {missing}"
    no_rule = [(c.line, t) for c in block.commands for t in make_targets(c) if not _has_rule(t)]
    assert not no_rule, f"{block.where(REPO)}: no such target in the Makefile: {no_rule}"
    body = script(block)
    proc = subprocess.run(
        ["bash", "-c", body], cwd=root, env=_env(), capture_output=True, text=True, timeout=900
    )
    assert proc.returncode == 0, (
        f"{block.where(REPO)}: a documented command failed\n--- ran ---\n{body}"
        f"--- stdout (tail) ---\n{proc.stdout[-2000:]}\n--- stderr (tail) ---\n{proc.stderr[-4000:]}"
    )


def test_every_form_entry_still_matches_a_documented_command():
    # a FORMS entry nothing matches is a command that left the docs: drop it, so the list stays the truth
    used = {p for b in ALL_BLOCKS for c in b.commands for p, _, _ in FORMS if re.search(p, program(c.text))}
    assert [p for p, _, _ in FORMS if p not in used] == []


def test_the_docs_hold_commands_and_the_readme_stays_short():
    assert len(ALL_BLOCKS) >= 10 and all(b.commands for b in ALL_BLOCKS), [b.where(REPO) for b in ALL_BLOCKS]
    assert len((REPO / "README.md").read_text()) <= 12_000  # issue 38: guides go to docs/, linked from it
