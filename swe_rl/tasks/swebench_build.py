"""Build the images of an inputs directory (layout: swe_rl.tasks.swebench_images) and write their task rows.

`build_inputs(inputs, out)`: every row -> its image (built `--network none` from a staged context, skipped when
an image with the same inputs hash exists) -> one Task row in `out` (JSONL: image, eval_script, log_parser,
base_commit = the image's local commit, metadata: upstream commit, spec python, source sha256, left-out steps),
ready for `swe-rl eval --dataset`, `swe-rl grade`, swebench's run_evaluation and `swe-rl train data.tasks=`.
"""

from __future__ import annotations

import hashlib
import json
import shlex
import shutil
import subprocess
import tarfile
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from swe_rl.tasks.images import BASE_COMMIT_LABEL, HISTORY_LABEL, REPO_DIR, default_builder, image_label
from swe_rl.tasks.swebench_images import (
    ACTIVATE,
    ENV_DIR,
    GIT_ENV,
    INPUTS_LABEL,
    WHEELS_DIR,
    ImageInputError,
    Instance,
    SpecTable,
    eval_script,
    image_tag,
    load_spec_table,
    source_of,
)  # fmt: skip

BASE_IMAGE = "swe-rl/base:bookworm"
# why: with more loose objects than gc.auto (6700; django's ~6,800 files), `git commit` starts a detached
# background `git gc` that goes on writing .git after we return: the staged context's cleanup then fails
# ("Directory not empty: '.git'") or docker copies a half-packed .git. No automatic gc in our own git calls.
NO_AUTO_GC = ["-c", "gc.auto=0", "-c", "maintenance.auto=false"]


@dataclass
class Built:
    instance_id: str
    image: str
    status: str  # "built" | "present" | "failed"
    seconds: float = 0.0
    error: str = ""
    task: dict[str, Any] | None = None


def read_rows(inputs: Path, ids: list[str] | None = None) -> list[dict[str, Any]]:
    path = inputs / "rows.jsonl"
    if not path.is_file():
        raise ImageInputError(f"{path}: missing (expected one SWE-bench row per line)")
    rows = [json.loads(x) for x in path.read_text().splitlines() if x.strip()]
    if ids:
        missing = sorted(set(ids) - {r.get("instance_id") for r in rows})
        if missing:
            raise ImageInputError(f"{path}: instance id(s) not found: {', '.join(missing)}")
        rows = [r for r in rows if r.get("instance_id") in ids]
    return rows


def setup_script(inst: Instance, reqs: bool) -> str:
    """The image's install steps (swebench's env + repo scripts minus conda and network)."""
    spec, pip = inst.spec, f"{ENV_DIR}/bin/python -m pip install -q"
    lines = [
        "set -euxo pipefail",
        "source /opt/miniconda3/bin/activate",
        "conda activate testbed",
        f"cd {REPO_DIR}",
    ]
    for cmd in spec.get("pre_install", []):
        if "apt-get" in cmd or "locale-gen" in cmd or "/etc/locale.gen" in cmd:
            inst.notes.append(f"pre_install left out (offline): {cmd}")
        else:
            lines.append(cmd)
    pkgs = str(spec.get("packages", "")).strip()
    if pkgs == "environment.yml":
        raise ImageInputError(
            f"{inst.instance_id}: spec packages=environment.yml (conda) is not supported offline"
        )
    if reqs:
        lines.append(f"{pip} -r /opt/swe-rl-requirements.txt")
    elif pkgs and pkgs != "requirements.txt":
        lines.append(f"{pip} {pkgs}")
    if spec.get("pip_packages"):
        lines.append(f"{pip} {' '.join(shlex.quote(p) for p in spec['pip_packages'])}")
    if spec.get("install"):
        lines.append(spec["install"])
    # as swebench's setup: what the install changed is committed, so the eval script's `git show` prints one
    # small commit (not the whole source tree of the base commit) and `git diff` shows only the agent's edits
    lines.append(
        f"git {' '.join(NO_AUTO_GC)} -c user.email=setup@swebench.config -c user.name=SWE-bench "
        "commit -q --allow-empty -am SWE-bench"
    )
    return "\n".join(lines) + "\n"


def base_packages(wheels: Path) -> str:
    """What a fresh conda env has besides python: pip, and setuptools/wheel when the wheelhouse holds them (old
    repos import pkg_resources at run time; setuptools >= 81 no longer ships it: pick the wheelhouse's version)."""
    return " ".join(["pip", *(n for n in ("setuptools", "wheel") if any(wheels.glob(f"{n}-*.whl")))])


def dockerfile(base_image: str, pip_wheel: str, labels: dict[str, str], packages: str = "pip") -> str:
    label_line = " ".join(f'{k}="{v}"' for k, v in labels.items())
    return f"""FROM {base_image}
COPY wheels/ {WHEELS_DIR}/
COPY activate /opt/miniconda3/bin/activate
RUN python3 -m venv --without-pip {ENV_DIR} \\
 && {ENV_DIR}/bin/python {WHEELS_DIR}/{pip_wheel}/pip install -q --no-index --find-links {WHEELS_DIR} {packages}
ENV PIP_NO_INDEX=1 PIP_FIND_LINKS={WHEELS_DIR} PIP_DISABLE_PIP_VERSION_CHECK=1
COPY requirements.txt /opt/swe-rl-requirements.txt
COPY testbed/ {REPO_DIR}/
COPY setup.sh /opt/swe-rl-setup.sh
RUN bash /opt/swe-rl-setup.sh && git config --global --add safe.directory {REPO_DIR}
WORKDIR {REPO_DIR}
LABEL {label_line}
"""


def _unpack(source: Path, dest: Path) -> None:
    if source.is_dir():
        shutil.copytree(source, dest, symlinks=True, ignore=shutil.ignore_patterns(".git"))
        return
    with tarfile.open(source) as tar:
        tar.extractall(dest, filter="tar")


def _commit(repo: Path) -> str:
    """One commit of the source with fixed identity and dates: the same source always gives the same sha."""
    for args in (["init", "-q"], ["add", "-A", "-f"], ["commit", "-q", "--no-verify", "-m", "base"]):
        subprocess.run(["git", *NO_AUTO_GC, *args], cwd=repo, env=GIT_ENV, check=True, capture_output=True)
    out = subprocess.run(["git", "rev-parse", "HEAD"], cwd=repo, env=GIT_ENV, check=True, capture_output=True)
    return out.stdout.decode().strip()


def _requirements(inst: Instance, inputs: Path, table: SpecTable, testbed: Path) -> str:
    given = inputs / "requirements" / f"{inst.instance_id}.txt"
    if given.is_file():
        return given.read_text()
    if str(inst.spec.get("packages", "")).strip() != "requirements.txt":
        return ""
    for rel in table.reqs_paths.get(inst.row.get("repo", ""), []):
        if (testbed / rel).is_file():
            return (testbed / rel).read_text()
    raise ImageInputError(f"{inst.instance_id}: spec packages=requirements.txt but none of "
                          f"{table.reqs_paths.get(inst.row.get('repo', ''), [])} is in the source and "
                          f"{given} is missing")  # fmt: skip


def _digest(ctx: Path, source: Path) -> str:
    """sha256 over the staged context: Dockerfile, scripts, requirements, source files, wheel names and sizes."""
    h = hashlib.sha256()
    for p in sorted(ctx.rglob("*")):
        if p.is_file() and ".git" not in p.relative_to(ctx).parts:
            rel = str(p.relative_to(ctx))
            h.update(rel.encode())
            h.update(str(p.stat().st_size).encode() if rel.startswith("wheels/") else p.read_bytes())
    return h.hexdigest()


def stage(inst: Instance, inputs: Path, table: SpecTable, ctx: Path, base_image: str) -> tuple[str, str, str]:
    """Write the build context; returns (local base commit, inputs hash, Dockerfile text)."""
    wheels = inputs / "wheels"
    pips = sorted(w.name for w in wheels.glob("pip-*.whl"))
    if not pips:
        raise ImageInputError(f"{wheels}: no pip-*.whl (the image's venv installs pip from the wheelhouse)")
    _unpack(inst.source, ctx / "testbed")
    base = _commit(ctx / "testbed")
    shutil.copytree(wheels, ctx / "wheels", copy_function=_link_or_copy)
    (ctx / "activate").write_text(ACTIVATE)
    reqs = _requirements(inst, inputs, table, ctx / "testbed")
    (ctx / "requirements.txt").write_text(reqs)
    (ctx / "setup.sh").write_text(setup_script(inst, bool(reqs)))
    (ctx / "Dockerfile").write_text(dockerfile(base_image, pips[-1], {}, base_packages(wheels)))
    digest = _digest(ctx, inst.source)
    labels = {INPUTS_LABEL: digest, BASE_COMMIT_LABEL: base, HISTORY_LABEL: base,
              "org.swe-rl.upstream-commit": str(inst.row.get("base_commit", ""))}  # fmt: skip
    text = dockerfile(base_image, pips[-1], labels, base_packages(wheels))
    (ctx / "Dockerfile").write_text(text)
    return base, digest, text


def _link_or_copy(src: str, dst: str) -> None:
    try:
        Path(dst).hardlink_to(src)  # a big wheelhouse is not copied per instance
    except OSError:
        shutil.copy2(src, dst)


def task_row(inst: Instance, table: SpecTable, base: str, digest: str) -> dict[str, Any]:
    row = inst.row
    parser = inst.spec.get("log_parser") or table.parsers.get(row.get("repo", ""), "")
    if not parser:
        raise ImageInputError(f"{inst.instance_id}: no log parser known for repo {row.get('repo')!r}")
    keep = ("instance_id", "repo", "problem_statement", "patch", "test_patch", "FAIL_TO_PASS", "PASS_TO_PASS",
            "version", "hints_text", "created_at", "environment_setup_commit")  # fmt: skip
    meta = {"upstream_base_commit": row.get("base_commit", ""), "spec_python": inst.spec.get("python", ""),
            "inputs_sha256": digest, "left_out": inst.notes, "source": row.get("source", "")}  # fmt: skip
    return {**{k: row[k] for k in keep if k in row}, "base_commit": base, "image": image_tag(inst.instance_id),
            "eval_script": eval_script(row, inst.spec, base), "log_parser": parser, "metadata": meta}  # fmt: skip


def build_one(inst: Instance, inputs: Path, table: SpecTable, *, base_image: str, force: bool) -> Built:
    tag, t0 = image_tag(inst.instance_id), time.monotonic()
    try:
        with tempfile.TemporaryDirectory(prefix="swe-rl-sweb-") as tmp:
            ctx = Path(tmp)
            base, digest, _ = stage(inst, inputs, table, ctx, base_image)
            row = task_row(inst, table, base, digest)
            if not force and image_label(tag, INPUTS_LABEL) == digest:
                return Built(inst.instance_id, tag, "present", time.monotonic() - t0, task=row)
            default_builder()(tag, ctx / "Dockerfile", ctx)
    except Exception as e:  # one failed build must not hide the others' results
        return Built(inst.instance_id, tag, "failed", time.monotonic() - t0, f"{type(e).__name__}: {e}")
    return Built(inst.instance_id, tag, "built", time.monotonic() - t0, task=row)


def build_inputs(inputs: str | Path, out: str | Path | None = None, *, ids: list[str] | None = None,
                 base_image: str = BASE_IMAGE, force: bool = False) -> list[Built]:  # fmt: skip
    """Build every (or the named) row's image; write the built ones' task rows to `out` (default
    INPUTS/tasks.jsonl). Bad inputs of one row fail that row only, with the reason."""
    inputs = Path(inputs)
    rows = read_rows(inputs, ids)
    table = load_spec_table(inputs / "wheels", inputs / "specs.json")
    results = []
    for row in rows:
        iid = str(row.get("instance_id", "?"))
        try:
            inst = Instance(row, table.spec(row), source_of(inputs, iid))
        except ImageInputError as e:
            results.append(Built(iid, image_tag(iid), "failed", error=str(e)))
            continue
        results.append(build_one(inst, inputs, table, base_image=base_image, force=force))
    dest = Path(out) if out else inputs / "tasks.jsonl"
    dest.write_text("".join(json.dumps(b.task) + "\n" for b in results if b.task is not None))
    return results
