"""Build the images of an inputs directory (layout: swe_rl.images.swebench_images) and write their task rows.

`build_inputs(inputs, out)`: every row -> its env image (swebench_env.py: the spec's Python from a Debian base
image, requirements, wheels; shared by the rows that need the same and built once) -> its instance image on top
(swebench_stage.py: the source archive unpacked at /testbed and made one root commit there, pre_install, the install, swebench's "SWE-bench"
commit), each built `--network none` and skipped when an image with the same content hash exists -> one Task row in
`out` (JSONL: image, eval_script, log_parser, base_commit = the image's local commit, metadata: upstream commit,
spec and image Python, env image, left-out steps), ready for `swe-rl eval --dataset`, `swe-rl grade`, swebench's
run_evaluation and `swe-rl train data.tasks=`. A row whose build fails gets the reason and the others go on; a
failed env image fails its rows with its error, built once. Every image made here carries BUILDER_LABEL.
"""

from __future__ import annotations

import hashlib
import json
import subprocess
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from sandboxes.docker_sandbox import MIN_CPUS_LABEL
from swe_rl.images.swebench_env import (
    BUILDER_LABEL,
    ENV_LABEL,
    BaseInfo,
    EnvPlan,
    PythonChoice,
    choose_python,
    env_fixes,
    load_overrides,
    plan_env,
)
from swe_rl.images.swebench_images import (
    INPUTS_LABEL,
    ImageInputError,
    Instance,
    SpecTable,
    eval_script,
    image_tag,
    load_spec_table,
    source_of,
    source_sha256,
)
from swe_rl.images.swebench_rules import load_rules, rule_fixes, unittest_startup, with_entry
from swe_rl.images.swebench_stage import (
    StagedSource,
    _commit,
    _requirements,
    base_commit_of,
    dockerfile_labels,
    stage_archive,
    stage_env,
    stage_instance,
)
from swe_rl.images.task_images import (
    BASE_COMMIT_LABEL,
    HISTORY_LABEL,
    REPO_DIR,
    base_image_fix,
    default_builder,
    image_exists,
    image_label,
)

__all__ = ["Built", "_commit", "build_inputs", "read_rows"]


@dataclass
class Built:
    instance_id: str
    image: str
    status: str  # "built" | "present" | "failed"
    seconds: float = 0.0
    error: str = ""
    task: dict[str, Any] | None = None
    env_image: str = ""


class Progress:
    """One line per image: a spinner with the elapsed time while it builds (on a terminal), then its outcome."""

    def __init__(self) -> None:
        from rich.console import Console

        self.console = Console(stderr=True, highlight=False)

    @contextmanager
    def building(self, what: str) -> Iterator[None]:
        with self.console.status(f"building {what}"):
            yield

    def line(self, what: str, status: str, seconds: float, error: str = "") -> None:
        style = {
            "built": "green",
            "filled": "green",
            "present": "dim",
            "checked": "dim",
            "failed": "red",
        }.get(status, "")
        tail = f": {error.splitlines()[0][:200]}" if error else ""
        self.console.print(f"[{style}]{status:>7}[/] {what} ({seconds:.0f} s){tail}", soft_wrap=True)


@dataclass
class Session:
    """One build_inputs run: what it learnt about base and env images (each is probed or built once)."""

    inputs: Path
    table: SpecTable
    overrides: dict[str, Any]
    force: bool
    progress: Progress
    bases: dict[str, BaseInfo | str] = field(default_factory=dict)  # image -> info, or why it is unusable
    envs: dict[str, str] = field(default_factory=dict)  # env key -> "" (usable) or the error
    offline: bool = False  # PyPI locks and wheels from the cache only (a missing one is an error)
    rules: dict[str, Any] = field(default_factory=load_rules)  # swebench_rules.json


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


PROBE = "import sys, platform; print(sys.version.split()[0], platform.libc_ver()[1])"


def apt_base(python: PythonChoice, apt: list[str]) -> tuple[str, list[str]]:
    """(the base image's tag, its Debian packages beyond the plain base's): the suite's base, or for an env that
    needs Debian packages (compilers, C libraries: swebench_overrides.json `apt`) one debootstrapped with them,
    tagged by their hash; built offline like the rest, the packages come from Debian when the base is made."""
    if not apt:
        return python.base_image, []
    pkgs = sorted(set(apt))
    return f"{python.base_image}-apt{hashlib.sha256(' '.join(pkgs).encode()).hexdigest()[:10]}", pkgs


def base_info(image: str, s: Session, apt: list[str] | None = None) -> BaseInfo:
    """The base image's Python and glibc; debootstrapped first when missing (sandboxes.images)."""
    if image not in s.bases:
        t0 = time.monotonic()
        try:
            if not image_exists(image):
                from sandboxes.docker_sandbox import docker_client
                from sandboxes.images import (
                    BASE_PACKAGES,
                    SUITE_PACKAGES,
                    build_base_image,
                    ensure_base_image,
                )

                with s.progress.building(image):
                    if apt:
                        suite = image.rpartition(":")[2].split("-apt")[0]
                        pkgs = [*BASE_PACKAGES, *SUITE_PACKAGES.get(suite, []), *apt]
                        build_base_image(docker_client(), image, suite=suite, packages=pkgs)
                    else:
                        ensure_base_image(docker_client(), image)
                s.progress.line(image, "built", time.monotonic() - t0)
            out = subprocess.run(["docker", "run", "--rm", "--network", "none", image, "python3", "-c", PROBE],
                                 capture_output=True, text=True, check=True, timeout=300).stdout.split()  # fmt: skip
            ident = subprocess.run(["docker", "image", "inspect", "-f", "{{.Id}}", image], capture_output=True,
                                   text=True, check=True).stdout.strip()  # fmt: skip
            s.bases[image] = BaseInfo(image, ident, out[0], out[1])
        except Exception as e:
            s.bases[image] = (
                f"base image {image}: {type(e).__name__}: {e} (build it: {base_image_fix(image)})"
            )
    info = s.bases[image]
    if isinstance(info, str):
        raise ImageInputError(info)
    return info


def ensure_env(plan: EnvPlan, base: BaseInfo, s: Session) -> str:
    """The env image's tag, built unless present; an env that failed once fails again without a rebuild."""
    key = plan.key(base.image_id)
    tag = plan.tag(key)
    if key not in s.envs:
        t0, what = time.monotonic(), f"env {plan.repo} {plan.version} py{base.python} {tag}"
        if not s.force and image_label(tag, ENV_LABEL) == key:
            s.envs[key] = ""
            s.progress.line(what, "present", time.monotonic() - t0)
        else:
            try:
                with tempfile.TemporaryDirectory(prefix="swe-rl-env-") as tmp, s.progress.building(what):
                    stage_env(plan, Path(tmp), base.image, key, f'org.swe-rl.env-python="{base.python}"')
                    default_builder()(tag, Path(tmp) / "Dockerfile", Path(tmp))
                s.envs[key] = ""
            except Exception as e:
                s.envs[key] = f"env image {tag} failed: {type(e).__name__}: {e}"
            s.progress.line(what, "failed" if s.envs[key] else "built", time.monotonic() - t0, s.envs[key])
    if s.envs[key]:
        raise ImageInputError(s.envs[key])
    return tag


def task_row(
    inst: Instance, s: Session, base: str, env: EnvPlan, env_tag: str, py: str, digest: str
) -> dict[str, Any]:
    row = inst.row
    parser = inst.spec.get("log_parser") or s.table.parsers.get(row.get("repo", ""), "")
    if not parser:
        raise ImageInputError(f"{inst.instance_id}: no log parser known for repo {row.get('repo')!r}")
    keep = ("instance_id", "repo", "problem_statement", "patch", "test_patch", "FAIL_TO_PASS", "PASS_TO_PASS",
            "version", "hints_text", "created_at", "environment_setup_commit")  # fmt: skip
    meta = {"upstream_base_commit": row.get("base_commit", ""), "spec_python": inst.spec.get("python", ""),
            "python": py, "python_deviation": env.python.deviation, "base_image": env.base_image,
            "env_image": env_tag, "wheels_from": env.wheels_from, "min_cpus": inst.spec.get("nano_cpus", 0) / 1e9,
            "left_out": [*env.left_out, *inst.notes], "inputs_sha256": digest,
            "source": row.get("source", "")}  # fmt: skip
    return {**{k: row[k] for k in keep if k in row}, "base_commit": base, "image": image_tag(inst.instance_id),
            "eval_script": eval_script(row, inst.spec, base), "log_parser": parser, "metadata": meta}  # fmt: skip


def plan_instance(inst: Instance, s: Session, src: StagedSource) -> tuple[EnvPlan, list[str], BaseInfo]:
    """The env an instance needs, its requirement lines that need the source, the base image."""
    repo, version = str(inst.row.get("repo", "")), str(inst.row.get("version", ""))
    ruled = rule_fixes(inst.row, inst.spec, inst.source, s.offline, s.rules)
    fixes = with_entry(ruled, env_fixes(s.overrides, repo, version))
    python = choose_python(
        str(inst.spec.get("python", "")),
        s.overrides["pythons"],
        fixes.get("python", ""),
        fixes.get("why", ""),
    )
    if "pre_install" in fixes:  # the spec's steps as the overrides give them (the dropped ones named)
        for cmd in inst.spec.get("pre_install", []):
            if cmd not in fixes["pre_install"]:
                inst.notes.append(f"pre_install replaced (swebench_overrides.json): {cmd}")
        inst.spec = {**inst.spec, "pre_install": list(fixes["pre_install"])}
    image, apt = apt_base(python, list(fixes.get("apt", [])))
    info = base_info(image, s, apt)
    reqs = _requirements(inst, s.inputs, s.table)
    env, local = plan_env(inst.instance_id, inst.row, inst.spec, reqs, s.inputs, src.testbed, src.sha, info, python,
                          fixes, s.overrides["pypi_base"]["requirements"], src.unpack, inst.source,
                          s.offline)  # fmt: skip
    sdists = [w.name for w in env.wheels if not w.name.endswith(".whl")]
    if env.wheels_from == "pypi" and sdists and not set(s.rules["compilers"]["apt"]) <= set(apt):
        # swebench_rules.json compilers: pip builds these in the env image (SWE-bench's base has build-essential)
        ruled["rules"].append(f"compilers (sdists: {' '.join(sorted(sdists))})")
        image, apt = apt_base(python, [*apt, *s.rules["compilers"]["apt"]])
        info = base_info(image, s, apt)
    env.base_image, env.headers = image, "python3-dev" in apt
    env.startup = unittest_startup(inst.spec, python, s.table.parsers.get(repo, ""), s.rules)
    if env.startup:
        ruled["rules"].append("unittest_descriptions")
    # an env from the inputs' wheelhouse takes only the rules that do not resolve anything
    applied = [r for r in ruled["rules"] if env.wheels_from == "pypi" or r in ("scm_version", "compilers")]
    if applied:
        env.left_out.append(f"rules applied (swebench_rules.json): {', '.join(applied)}")
    for pkg, why in fixes.get("apt_skipped", {}).items():
        env.left_out.append(f"Debian package of the spec's pre_install not installed: {pkg}: {why}")
    if apt:
        env.left_out.append(
            f"Debian packages in the base image {image} (swebench_rules.json, swebench_overrides.json): {' '.join(apt)}"
        )
    return env, local, info


def extra_files(inst: Instance, s: Session) -> list[Path]:
    """The inputs' extra/ files an overrides entry's `extra` names (matplotlib 3.5: FreeType 2.6.1's source)."""
    names = env_fixes(s.overrides, str(inst.row.get("repo", "")), str(inst.row.get("version", ""))).get(
        "extra", []
    )
    files = [s.inputs / "extra" / n for n in names]
    missing = [str(f) for f in files if not f.is_file()]
    if missing:
        raise ImageInputError(f"{inst.instance_id}: missing from the inputs: {', '.join(missing)} (swebench_overrides.json "
                              "names it; the inputs' README says where it comes from)")  # fmt: skip
    return files


def build_instance(tag: str, ctx: Path, labels: dict[str, str]) -> str:
    """The instance image from its staged context, then its labels on top; returns its base commit (made in the
    image). Without the labels' build the image lacks INPUTS_LABEL, so the next run builds it again."""
    log = default_builder()(tag, ctx / "Dockerfile", ctx)
    base = base_commit_of(log or "")
    if base is None:  # a cached setup layer prints nothing: ask the image
        out = subprocess.run(["docker", "run", "--rm", "--network", "none", tag, "git", "-C", REPO_DIR, "rev-list",
                              "--max-parents=0", "HEAD"], capture_output=True, text=True, check=True)  # fmt: skip
        base = out.stdout.strip()
    (ctx / "labels").mkdir()
    (ctx / "labels" / "Dockerfile").write_text(
        dockerfile_labels(tag, {**labels, BASE_COMMIT_LABEL: base, HISTORY_LABEL: base})
    )
    default_builder()(tag, ctx / "labels" / "Dockerfile", ctx / "labels")
    return base


def build_one(inst: Instance, s: Session) -> Built:
    tag, t0, env_tag = image_tag(inst.instance_id), time.monotonic(), ""
    try:
        with tempfile.TemporaryDirectory(prefix="swe-rl-sweb-") as tmp:
            ctx = Path(tmp) / "ctx"  # what goes to the daemon; a host-side unpack stays beside it
            ctx.mkdir()
            src = StagedSource(inst.source, Path(tmp) / "testbed", source_sha256(inst.source))
            env, local, info = plan_instance(inst, s, src)
            env_tag = ensure_env(env, info, s)
            digest = stage_instance(inst, ctx, env_tag, local, src.sha, env.build_env, extra_files(inst, s))
            base, status = image_label(tag, BASE_COMMIT_LABEL) or "", "present"
            if s.force or not base or image_label(tag, INPUTS_LABEL) != digest:
                status = "built"
                labels = {BUILDER_LABEL: "swebench", INPUTS_LABEL: digest,
                          "org.swe-rl.upstream-commit": str(inst.row.get("base_commit", ""))}  # fmt: skip
                # the CPUs SWE-bench runs it with: our sandboxes raise their quota
                if inst.spec.get("nano_cpus"):
                    labels[MIN_CPUS_LABEL] = f"{int(inst.spec['nano_cpus']) / 1e9:g}"
                stage_archive(inst.source, ctx)
                with s.progress.building(tag):
                    base = build_instance(tag, ctx, labels)
            row = task_row(inst, s, base, env, env_tag, info.python, digest)
    except Exception as e:  # one failed build must not hide the others' results
        return Built(inst.instance_id, tag, "failed", time.monotonic() - t0, f"{type(e).__name__}: {e}",
                     env_image=env_tag)  # fmt: skip
    return Built(inst.instance_id, tag, status, time.monotonic() - t0, task=row, env_image=env_tag)


def open_inputs(inputs: str | Path, ids: list[str] | None = None, *, force: bool = False,
                progress: Progress | None = None, offline: bool = False,
                ) -> tuple[Session, list[tuple[str, Instance | ImageInputError]]]:  # fmt: skip
    """A session over an inputs folder and its (or the named) rows: each an Instance, or the error of its row."""
    inputs = Path(inputs)
    rows = read_rows(inputs, ids)
    table = load_spec_table(inputs / "wheels", inputs / "specs.json")
    s = Session(inputs, table, load_overrides(), force, progress or Progress(), offline=offline)
    out: list[tuple[str, Instance | ImageInputError]] = []
    for row in rows:
        iid = str(row.get("instance_id", "?"))
        try:
            out.append((iid, Instance(row, table.spec(row), source_of(inputs, iid))))
        except ImageInputError as e:
            out.append((iid, e))
    return s, out


def build_inputs(inputs: str | Path, out: str | Path | None = None, *, ids: list[str] | None = None,
                 force: bool = False, progress: Progress | None = None) -> list[Built]:  # fmt: skip
    """Build every (or the named) row's image; write the built ones' task rows to `out` (default
    INPUTS/tasks.jsonl). Bad inputs of one row fail that row only, with the reason."""
    s, instances = open_inputs(inputs, ids, force=force, progress=progress)
    results = []
    for iid, inst in instances:
        if isinstance(inst, ImageInputError):
            results.append(Built(iid, image_tag(iid), "failed", error=str(inst)))
        else:
            results.append(build_one(inst, s))
        r = results[-1]
        s.progress.line(f"image {r.image}", r.status, r.seconds, r.error)
    dest = Path(out) if out else Path(inputs) / "tasks.jsonl"
    dest.write_text("".join(json.dumps(b.task) + "\n" for b in results if b.task is not None))
    return results
