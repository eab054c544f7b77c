"""Task images: build a task repo's Dockerfiles locally (no network at build time), check what exists.

A task directory's Dockerfile is built with the task directory as its context (swebench's `task_paths`),
unless task.yaml's `metadata.build_context` names another directory relative to it: the bundled micro suite
uses "../.." so that its tasks share one copy of each repo.

Every task image is then cut at its base commit (`scrub_history.sh` run in a derived layer, tagged the same and
labelled HISTORY_LABEL): no commit, object, tag, ref, reflog entry, stash or remote newer than `base_commit` is
left in /testbed, so no agent can read the fix from git history (SWE-bench issue 465). The lower layers still hold
the old .git files, but a container sees only the merged filesystem; `docker save` of the image does show them.
"""

from __future__ import annotations

import shutil
import subprocess
import tempfile
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

# (tag, Dockerfile path, context dir) -> the build log (what its RUN steps printed); raises on failure
Builder = Callable[[str, Path, Path], str]


@dataclass(frozen=True)
class BuildResult:
    instance_id: str
    image: str
    status: str  # "built" | "present" | "failed"
    error: str = ""


def image_exists(tag: str) -> bool:
    proc = subprocess.run(["docker", "image", "inspect", tag], capture_output=True)
    return proc.returncode == 0


BASE_COMMIT_LABEL = "org.swe-rl.base-commit"  # set by task Dockerfiles that want staleness detection


def image_label(tag: str, key: str) -> str | None:
    """A label of a local image; None when the image is missing, "" when it lacks the label."""
    fmt = '{{ index .Config.Labels "' + key + '" }}'
    proc = subprocess.run(["docker", "image", "inspect", "-f", fmt, tag], capture_output=True, text=True)
    if proc.returncode != 0:
        return None
    value = proc.stdout.strip()
    return "" if value == "<no value>" else value


def is_current(tag: str, dockerfile: Path, base_commit: str) -> bool:
    """The image exists and, when its Dockerfile declares the base-commit label, was built for this commit."""
    label = image_label(tag, BASE_COMMIT_LABEL)
    if label is None:
        return False
    declares = BASE_COMMIT_LABEL in dockerfile.read_text() if dockerfile.is_file() else False
    return not declares or label == base_commit


HISTORY_LABEL = (
    "org.swe-rl.history-cut-at"  # the base commit (or "HEAD") the image's /testbed history ends at
)
REPO_DIR = "/testbed"  # where SWE-bench-style images keep the task repo
SCRUB_SCRIPT = Path(__file__).with_name("scrub_history.sh")


def is_scrubbed(tag: str, base_commit: str) -> bool:
    return image_label(tag, HISTORY_LABEL) == (base_commit or "HEAD")


def _image_user(tag: str) -> str:
    proc = subprocess.run(
        ["docker", "image", "inspect", "-f", "{{.Config.User}}", tag], capture_output=True, text=True
    )
    return proc.stdout.strip()


def scrub_image(tag: str, base_commit: str, builder: Builder | None = None) -> None:
    """Rebuild `tag` as itself plus one layer that cuts /testbed's git history at `base_commit` (see the module
    docstring); raises when the repo's HEAD is not the base commit or the build fails."""
    build = builder or default_builder()
    user = _image_user(tag)
    lines = [
        f"FROM {tag}",
        "USER root",
        "COPY scrub_history.sh /tmp/swe_rl_scrub_history.sh",
        f"RUN bash /tmp/swe_rl_scrub_history.sh {REPO_DIR} {base_commit} && rm -f /tmp/swe_rl_scrub_history.sh",
        f'LABEL {HISTORY_LABEL}="{base_commit or "HEAD"}"',
    ]
    if user:
        lines.append(f"USER {user}")
    with tempfile.TemporaryDirectory(prefix="swe-rl-scrub-") as tmp:
        ctx = Path(tmp)
        shutil.copyfile(SCRUB_SCRIPT, ctx / "scrub_history.sh")
        (ctx / "Dockerfile").write_text("\n".join(lines) + "\n")
        build(tag, ctx / "Dockerfile", ctx)


def docker_cli_builder(tag: str, dockerfile: Path, context: Path) -> str:
    """`docker build --network none`: the fallback when the sandboxes builder is unavailable."""
    cmd = ["docker", "build", "--network", "none", "-t", tag, "-f", str(dockerfile), str(context)]
    proc = subprocess.run(cmd, capture_output=True, text=True)
    if proc.returncode != 0:
        raise RuntimeError(f"docker build {tag} failed:\n{proc.stderr.strip()[-2000:]}")
    return proc.stdout + proc.stderr


def sandboxes_builder(tag: str, dockerfile: Path, context: Path) -> str:
    """The sandboxes package's builder (`build_image`, --network none). It wants the Dockerfile at the context
    root, so a task whose context is elsewhere (the micro suite's shared root) is staged in a temp copy."""
    from sandboxes.docker_sandbox import docker_client
    from sandboxes.images import build_image

    client = docker_client()
    if dockerfile.resolve() == (context / "Dockerfile").resolve():
        return build_image(client, tag, context_dir=str(context))
    with tempfile.TemporaryDirectory(prefix="swe-rl-build-") as tmp:
        staged = Path(tmp) / "ctx"
        ignore = shutil.ignore_patterns("__pycache__", "*.pyc", ".pytest_cache", ".git")
        shutil.copytree(context, staged, ignore=ignore)
        shutil.copyfile(dockerfile, staged / "Dockerfile")
        return build_image(client, tag, context_dir=str(staged))


def default_builder() -> Builder:
    """The sandboxes package's image builder when it is importable, else the docker CLI."""
    try:
        import sandboxes.docker_sandbox
        import sandboxes.images  # noqa: F401
    except ImportError:
        return docker_cli_builder
    return sandboxes_builder


def build_context(task_dir: Path, metadata: dict) -> Path:
    rel = (metadata or {}).get("build_context") or "."
    return (task_dir / rel).resolve()


def build_task_images(
    repo_path: str | Path,
    instance_ids: list[str] | None = None,
    *,
    force: bool = False,
    workers: int = 2,
    builder: Builder | None = None,
) -> list[BuildResult]:
    """Build every (or the named) task's image from its Dockerfile; skip current images unless `force`
    (an image whose base-commit label differs from the task's base_commit is stale and rebuilt)."""
    from swebench.task.repo import load_task_repo, task_paths

    build = builder or default_builder()
    instances = load_task_repo(repo_path, instance_ids)
    dirs = task_paths(repo_path, [i["instance_id"] for i in instances])

    def one(inst: dict) -> BuildResult:
        iid, tag, base = inst["instance_id"], inst["image"], inst.get("base_commit", "")
        task_dir = dirs[iid]
        current = not force and is_current(tag, task_dir / "Dockerfile", base)
        if current and is_scrubbed(tag, base):
            return BuildResult(iid, tag, "present")
        try:
            if not current:
                build(tag, task_dir / "Dockerfile", build_context(task_dir, inst.get("metadata", {})))
            scrub_image(tag, base, build)
        except Exception as e:  # one failed build must not hide the others' results
            return BuildResult(iid, tag, "failed", f"{type(e).__name__}: {e}")
        return BuildResult(iid, tag, "built")

    with ThreadPoolExecutor(max_workers=max(1, workers)) as pool:
        return list(pool.map(one, instances))


def ensure_images(tasks: list) -> list[BuildResult]:
    """Prebuilt-image sources (HF rows, R2E-Gym, SWE-Gym): pull each missing image where its registry answers
    (through the sandboxes package's guarded pull), else report it as failed with the reason; then cut each
    image's /testbed history at the task's base commit (scrub_image), once per image."""
    from sandboxes.docker_sandbox import docker_client
    from sandboxes.images import ensure_image

    client = docker_client()
    results = []
    for t in tasks:
        present = image_exists(t.image)
        # generated tasks write their repo into the sandbox at start (metadata.files): their image holds none
        if present and (t.metadata.get("files") or is_scrubbed(t.image, t.base_commit)):
            results.append(BuildResult(t.instance_id, t.image, "present"))
            continue
        try:
            if not present:
                ensure_image(client, t.image, pull="missing")
            scrub_image(t.image, t.base_commit)  # a pulled image carries the repo's whole history
            results.append(BuildResult(t.instance_id, t.image, "present" if present else "pulled"))
        except Exception as e:  # registry unreachable, image unknown: say which and why, keep going
            results.append(BuildResult(t.instance_id, t.image, "failed", f"{type(e).__name__}: {e}"))
    return results


def local_images() -> set[str]:
    """Every repo:tag present in the local engine (one `docker images` call, not one inspect per task)."""
    proc = subprocess.run(
        ["docker", "images", "--format", "{{.Repository}}:{{.Tag}}"], capture_output=True, text=True
    )
    return set(proc.stdout.split()) if proc.returncode == 0 else set()


def _tagged(image: str) -> str:
    return image if ":" in image.rsplit("/", 1)[-1] else image + ":latest"


def base_image_fix(tag: str) -> str:
    """The command that builds a Debian base image without a registry (make setup runs it for bookworm)."""
    suite = tag.split(":", 1)[1] if tag.startswith("swe-rl/base:") else "bookworm"
    return f"sandboxes build-base --suite {suite} --tag {tag}"


def image_fix(task: Any, source: str = "") -> str:
    """The command that builds or pulls `task.image`, for where the task came from: a task repo (the micro suite
    included), an inputs folder built by `swe-rl images build`, a generated task (the base image) or a
    prebuilt-image source (HF rows, R2E-Gym, SWE-Gym). Every missing-image message carries it."""
    from swe_rl.tasks.loaders import MICRO_SUITE

    meta, iid = task.metadata or {}, task.instance_id
    if meta.get("task_dir"):
        repo = Path(meta["task_dir"]).parent.parent
        name = "micro" if repo.resolve() == MICRO_SUITE.resolve() else str(repo)
        return f"swe-rl tasks build-images --tasks {name} --id {iid}"
    if meta.get("inputs_sha256"):
        parent = Path(source).parent if source else None
        if parent is not None and (parent / "rows.jsonl").is_file():
            return f"swe-rl images build --inputs {parent} --id {iid}"
        return f"swe-rl images build --inputs DIR --id {iid} (DIR: the inputs folder of its row: rows.jsonl, src/)"
    if meta.get("files"):  # generated tasks write their repo into a sandbox of the base image
        return base_image_fix(task.image)
    return (
        f"swe-rl tasks build-images --tasks {source or 'SOURCE'} --id {iid} (pulls it where its registry "
        "answers; on a registry-less machine `docker load -i` its tarball first)"
    )


def _from_image(dockerfile: Path) -> str:
    for line in dockerfile.read_text().splitlines() if dockerfile.is_file() else []:
        if line.strip().upper().startswith("FROM "):
            return line.split()[1]
    return ""


def prepare_images(tasks: list, source: str = "", say: Callable[[str], None] | None = None) -> dict[str, str]:
    """Before a run: build the task-repo images that are missing or not cut at their base commit (as `swe-rl
    tasks build-images` does), then name the fix of every image still missing. Returns {instance_id: fix}."""
    import sys

    say = say or (lambda msg: print(msg, file=sys.stderr, flush=True))
    present = local_images()
    fixes: dict[str, str] = {}
    by_repo: dict[Path, list[str]] = {}
    for t in tasks:
        task_dir = Path(t.metadata.get("task_dir") or ".")
        if not t.metadata.get("task_dir") or not t.image or is_scrubbed(t.image, t.base_commit):
            continue
        base = _from_image(task_dir / "Dockerfile")
        if base.startswith("swe-rl/base:") and _tagged(base) not in present:
            fixes[t.instance_id] = f"base image {base} missing: {base_image_fix(base)}"
            continue
        by_repo.setdefault(task_dir.parent.parent, []).append(t.instance_id)
    for repo, ids in by_repo.items():
        say(f"building {len(ids)} task image(s) of {repo.name} (--network none)")
        for r in build_task_images(repo, ids):
            if r.status == "failed":
                fixes[r.instance_id] = f"build failed ({r.error.splitlines()[0][:200]})"
    present = local_images()
    for t in tasks:
        if t.image and _tagged(t.image) not in present and t.instance_id not in fixes:
            fixes[t.instance_id] = f"image {t.image} missing: {image_fix(t, source)}"
    for line in list(fixes.items())[:10]:
        say(f"  {line[0]}: {line[1]}")
    if len(fixes) > 10:
        say(f"  ... and {len(fixes) - 10} more task(s) without their image")
    return fixes
