"""Staging for the offline SWE-bench builder (swebench_build.py): a row's source as one reproducible commit, its
requirements, the env and instance build contexts (Dockerfile + scripts + files) and their content hashes.

The instance context carries the source archive itself (`ADD` unpacks it in the daemon) and the base commit is
made inside the image by the same git commands as `_commit` on the host: shipping an unpacked tree and its fresh
.git of loose objects through the build context cost a django build ~25 of its ~50 s."""

from __future__ import annotations

import hashlib
import re
import shlex
import shutil
import subprocess
import tarfile
from dataclasses import dataclass
from pathlib import Path

from swe_rl.images.swebench_env import MAKE_ENV, EnvPlan, dockerfile_env
from swe_rl.images.swebench_images import (
    ACTIVATE,
    ENV_DIR,
    GIT_ENV,
    ImageInputError,
    Instance,
    SpecTable,
    read_source_file,
)
from swe_rl.images.task_images import REPO_DIR

# why: with more loose objects than gc.auto (6700; django's ~6,800 files), `git commit` starts a detached
# background `git gc` that goes on writing .git after we return: the staged context's cleanup then fails
# ("Directory not empty: '.git'") or docker copies a half-packed .git. No automatic gc in our own git calls.
NO_AUTO_GC = ["-c", "gc.auto=0", "-c", "maintenance.auto=false"]
OFFLINE_STEPS = ("apt-get", "locale-gen", "/etc/locale.gen")
# the base commit: the same commands on the host (`_commit`) and in the image (`base_commit_lines`), so the same
# tree gives the same sha; the branch is named here, not by the image's init.defaultBranch
BASE_COMMIT_STEPS = (("-c", "init.defaultBranch=master", "init", "-q"), ("add", "-A", "-f"),
                     ("commit", "-q", "--no-verify", "-m", "base"))  # fmt: skip
BASE_MARK = "SWE_RL_BASE_COMMIT="
# what names the instance image's layout in its inputs hash: a new layout rebuilds every image made by the old one
EXTRA_DIR = "/opt/swe-rl-extra"
LAYOUT = "instance layout 2: source archive ADDed, base commit made in the image"


def base_commit_lines() -> list[str]:
    """The base commit in the image's setup script, with `_commit`'s fixed identity and dates; it prints the sha
    on a line of its own (BASE_MARK), which the builder reads from the build log."""
    env = " ".join(f"{k}={shlex.quote(v)}" for k, v in GIT_ENV.items() if k.startswith("GIT_"))
    lines = [f"{env} git {' '.join(NO_AUTO_GC)} {' '.join(args)}" for args in BASE_COMMIT_STEPS]
    return [*lines, f"printf '{BASE_MARK}%s\\n' \"$(git rev-parse HEAD)\""]


def base_commit_of(log: str) -> str | None:
    """The sha the setup script printed; None when the log has none (Docker reused a cached layer). Not anchored:
    the daemon's log puts colour codes before a line; the xtrace of the printf shows `%s`, not a sha."""
    found = re.findall(rf"{BASE_MARK}([0-9a-f]{{40}})\b", log)
    return found[-1] if found else None


def instance_script(inst: Instance, local_reqs: bool) -> str:
    """swebench's repo script minus the clone and the network: pre_install, the install, the setup commit."""
    lines = [
        "set -euxo pipefail",
        "source /opt/miniconda3/bin/activate",
        "conda activate testbed",
        f"cd {REPO_DIR}",
        *base_commit_lines(),
    ]
    for cmd in inst.spec.get("pre_install", []):
        if any(x in cmd for x in OFFLINE_STEPS):
            inst.notes.append(f"pre_install left out (offline): {cmd}")
        else:
            lines.append(cmd)
    if local_reqs:  # the requirements file's lines that name the source (`-e .[testutils]`)
        lines.append(f"{ENV_DIR}/bin/python -m pip install -q -r /opt/swe-rl-env/local-requirements.txt")
    if inst.spec.get("install"):
        lines.append(inst.spec["install"])
    # as swebench's setup: what the install changed is committed, so the eval script's `git show` prints one
    # small commit (not the whole source tree of the base commit) and `git diff` shows only the agent's edits
    lines.append(f"git {' '.join(NO_AUTO_GC)} -c user.email=setup@swebench.config -c user.name=SWE-bench "
                 "commit -q --allow-empty -am SWE-bench")  # fmt: skip
    return "\n".join(lines) + "\n"


def dockerfile_instance(
    env_tag: str, archive: str, env: dict[str, str] | None = None, extra: bool = False
) -> str:
    # safe.directory first: an archive's files keep the owner its tar names, and git refuses another's repo.
    # `env` (SETUPTOOLS_SCM_PRETEND_VERSION): set for the install and for the eval script's reinstall too.
    # `extra`: the inputs' extra/ files an overrides entry names, outside /testbed (its pre_install uses them)
    envs = "".join(f"ENV {k}={shlex.quote(v)}\n" for k, v in (env or {}).items())
    envs += f"COPY extra/ {EXTRA_DIR}/\n" if extra else ""
    return f"""FROM {env_tag}
{envs}COPY local-requirements.txt /opt/swe-rl-env/local-requirements.txt
ADD {archive} {REPO_DIR}/
COPY setup.sh /opt/swe-rl-setup.sh
RUN git config --global --add safe.directory {REPO_DIR} && bash /opt/swe-rl-setup.sh
WORKDIR {REPO_DIR}
"""


def dockerfile_labels(tag: str, labels: dict[str, str]) -> str:
    """The labels, in a build of their own on top: the base commit is known only once the image is built."""
    return f"FROM {tag}\nLABEL " + " ".join(f'{k}="{v}"' for k, v in labels.items()) + "\n"


def archive_name(source: Path) -> str:
    return "source.tar.gz" if source.name.endswith(".gz") else "source.tar"


def stage_archive(source: Path, ctx: Path) -> None:
    """The source as one archive in the context: a .tar/.tar.gz linked as it is, a directory tarred (no .git,
    owned by root, as `git archive` writes it)."""
    dest = ctx / archive_name(source)
    if not source.is_dir():
        _link_or_copy(source, dest)
        return

    def as_root(info: tarfile.TarInfo) -> tarfile.TarInfo | None:
        if ".git" in Path(info.name).parts:
            return None
        info.uid = info.gid = 0
        info.uname = info.gname = "root"
        return info

    with tarfile.open(dest, "w") as tar:
        for p in sorted(source.iterdir()):
            tar.add(p, arcname=p.name, filter=as_root)


def _unpack(source: Path, dest: Path) -> None:
    if source.is_dir():
        shutil.copytree(source, dest, symlinks=True, ignore=shutil.ignore_patterns(".git"))
        return
    with tarfile.open(source) as tar:
        tar.extractall(dest, filter="tar")


def _commit(repo: Path) -> str:
    """One commit of the source with fixed identity and dates: the same source always gives the same sha."""
    for args in BASE_COMMIT_STEPS:
        subprocess.run(["git", *NO_AUTO_GC, *args], cwd=repo, env=GIT_ENV, check=True, capture_output=True)
    out = subprocess.run(["git", "rev-parse", "HEAD"], cwd=repo, env=GIT_ENV, check=True, capture_output=True)
    return out.stdout.decode().strip()


def _requirements(inst: Instance, inputs: Path, table: SpecTable) -> str:
    given = inputs / "requirements" / f"{inst.instance_id}.txt"
    if given.is_file():
        return given.read_text()
    if str(inst.spec.get("packages", "")).strip() != "requirements.txt":
        return ""
    for rel in table.reqs_paths.get(inst.row.get("repo", ""), []):
        try:
            return read_source_file(inst.source, rel).decode()
        except ImageInputError:
            continue
    raise ImageInputError(f"{inst.instance_id}: spec packages=requirements.txt but none of "
                          f"{table.reqs_paths.get(inst.row.get('repo', ''), [])} is in the source and "
                          f"{given} is missing")  # fmt: skip


def _link_or_copy(src: Path, dst: Path) -> None:
    try:
        dst.hardlink_to(src)  # a big wheelhouse is not copied per image
    except OSError:
        shutil.copy2(src, dst)


def stage_env(plan: EnvPlan, ctx: Path, base_image: str, key: str, labels: str) -> None:
    """The env image's context: its wheelhouse (hard links), the conda shim, make_env.sh and the env script."""
    (ctx / "wheels").mkdir(parents=True)
    for w in plan.wheels:
        _link_or_copy(w, ctx / "wheels" / w.name)
    (ctx / "activate").write_text(ACTIVATE)
    shutil.copyfile(MAKE_ENV, ctx / "make_env.sh")
    (ctx / "env").mkdir()
    (ctx / "env" / "env.sh").write_text(plan.script())
    (ctx / "env" / "requirements.txt").write_text("".join(f"{r}\n" for r in plan.requirements))
    (ctx / "env" / "lock.txt").write_text("".join(f"{r}\n" for r in plan.lock))
    text = dockerfile_env(base_image, key, plan.pip_wheel(), plan.base_packages(), labels)
    (ctx / "Dockerfile").write_text(text)


@dataclass
class StagedSource:
    """A row's source: named by its hash at once; unpacked and committed on the host only when something there
    needs the files (a PyPI lock resolving the project; the image makes its own commit)."""

    source: Path
    testbed: Path
    sha: str
    base: str = ""  # the local commit, once unpacked

    def unpack(self) -> str:
        if not self.base:
            _unpack(self.source, self.testbed)
            self.base = _commit(self.testbed)
        return self.base


def stage_instance(
    inst: Instance,
    ctx: Path,
    env_tag: str,
    local: list[str],
    source_sha: str,
    env: dict[str, str] | None = None,
    extra: list[Path] | None = None,
) -> str:
    """The instance image's scripts and Dockerfile on top of its env; the content hash of what goes into it (the
    source by its hash: its archive need not be in ctx yet; extra files by name and sha256)."""
    (ctx / "local-requirements.txt").write_text("".join(f"{r}\n" for r in local))
    (ctx / "setup.sh").write_text(instance_script(inst, bool(local)))
    (ctx / "Dockerfile").write_text(dockerfile_instance(env_tag, archive_name(inst.source), env, bool(extra)))
    h = hashlib.sha256(f"{LAYOUT}\nsource {source_sha}\n".encode())
    for name in ("local-requirements.txt", "setup.sh", "Dockerfile"):
        h.update(name.encode() + b"\0" + (ctx / name).read_bytes())
    if extra:
        (ctx / "extra").mkdir()
        for f in extra:
            _link_or_copy(f, ctx / "extra" / f.name)
            h.update(f"extra {f.name} {hashlib.sha256(f.read_bytes()).hexdigest()}\n".encode())
    return h.hexdigest()
