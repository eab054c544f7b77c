"""Offline SWE-bench instance images: row + source at base_commit + wheelhouse -> `sweb.eval.x86_64.<id>:latest`.

Users on air-gapped clusters (and our tests, which cannot pull) supply an inputs directory:

    INPUTS/rows.jsonl        SWE-bench rows (upstream fields: repo, version, base_commit, test_patch, F2P/P2P ...)
    INPUTS/src/<id>.tar[.gz] the repository at base_commit (`git archive <base_commit>`; or a directory src/<id>/)
    INPUTS/wheels/           a wheelhouse: pip, setuptools, what the spec installs, and swebench-4.1.0's wheel
    INPUTS/specs.json        optional {repo: {version: spec}} added to / overriding the spec table
    INPUTS/requirements/<id>.txt  optional: the requirements a `packages: requirements.txt` spec installs

The per-repo/version install specs (pre_install, packages, pip_packages, install, eval_commands, test_cmd) are
swebench 4.1.0's MAP_REPO_VERSION_TO_SPECS, read from its wheel in the wheelhouse (5.x dropped the table). The
image keeps SWE-bench's layout: the repo at /testbed (the source as one root commit, then swebench's "SWE-bench"
commit of what the install changed: no upstream history to leak), a Python prefix with the dependencies at
/opt/miniconda3/envs/testbed and an /opt/miniconda3/bin/activate that makes the harness's
`source /opt/miniconda3/bin/activate && conda activate testbed` work. It is built `--network none` in two layers
(swebench_build.py): an env image per Python + requirements + wheels on the Debian base image whose python3 is the
spec's (swebench_env.py), then the instance's source and install. apt-get lines of pre_install cannot run offline
and are left out (recorded in the task row). Images are cached by a hash of everything that goes into them.
"""

from __future__ import annotations

import gzip
import hashlib
import json
import re
import tarfile
import zipfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from swe_rl.images.task_images import REPO_DIR

ENV_DIR = "/opt/miniconda3/envs/testbed"
WHEELS_DIR = "/opt/swe-rl-wheels"
INPUTS_LABEL = "org.swe-rl.inputs-sha256"
SPEC_WHEEL = "swebench-4.1.0-py3-none-any.whl"
START, END = ">>>>> Start Test Output", ">>>>> End Test Output"
NON_TEST_EXTS = (".json", ".png", "csv", ".txt", ".md", ".jpg", ".jpeg", ".pkl", ".yml", ".yaml", ".toml")
# why: SWE-bench's images run `git commit` and the harness's git calls as root in /testbed
GIT_ENV = {"GIT_AUTHOR_NAME": "SWE-bench", "GIT_AUTHOR_EMAIL": "setup@swebench.config",
           "GIT_COMMITTER_NAME": "SWE-bench", "GIT_COMMITTER_EMAIL": "setup@swebench.config",
           "GIT_AUTHOR_DATE": "2000-01-01T00:00:00Z", "GIT_COMMITTER_DATE": "2000-01-01T00:00:00Z",
           "PATH": "/usr/bin:/bin"}  # fmt: skip
ACTIVATE = """# swe-rl: SWE-bench's `source /opt/miniconda3/bin/activate; conda activate testbed`, without conda
conda() {
  if [ "${1:-}" = activate ]; then
    export CONDA_DEFAULT_ENV="${2:-testbed}" CONDA_PREFIX="/opt/miniconda3/envs/${2:-testbed}"
    export PATH="$CONDA_PREFIX/bin:$PATH"
    hash -r
  else echo "conda $*: not available here (the env is a plain Python prefix, no conda)" >&2; return 1; fi
}
"""


class ImageInputError(ValueError):
    """A missing or bad input: the message names the file / row field and what was expected."""


@dataclass
class SpecTable:
    specs: dict[str, dict[str, dict[str, Any]]]
    reqs_paths: dict[str, list[str]]
    parsers: dict[str, str]  # repo -> swebench log parser name

    def spec(self, row: dict[str, Any]) -> dict[str, Any]:
        repo, version = row.get("repo", ""), str(row.get("version", ""))
        try:
            return self.specs[repo][version]
        except KeyError:
            raise ImageInputError(f"{row.get('instance_id')}: no install spec for repo {repo!r} version "
                                  f"{version!r} (swebench 4.1.0's table or INPUTS/specs.json)") from None  # fmt: skip


def load_spec_table(wheels: Path, extra: Path | None = None) -> SpecTable:
    """swebench 4.1.0's python spec table, executed from its wheel's constants file (a module of plain dicts)."""
    ns: dict[str, Any] = {}
    parsers: dict[str, str] = {}
    wheel = wheels / SPEC_WHEEL
    if wheel.is_file():
        with zipfile.ZipFile(wheel) as z:
            exec(z.read("swebench/harness/constants/python.py").decode(), ns)
            text = z.read("swebench/harness/log_parsers/python.py").decode()
        parsers = dict(re.findall(r'^\s*"([\w.-]+/[\w.-]+)": (parse_log_\w+),', text, flags=re.M))
    specs = {r: dict(v) for r, v in ns.get("MAP_REPO_VERSION_TO_SPECS_PY", {}).items()}
    if extra is not None and extra.is_file():
        for repo, versions in json.loads(extra.read_text()).items():
            specs.setdefault(repo, {}).update(versions)
            parsers.setdefault(repo, next(iter(versions.values())).get("log_parser", "parse_log_pytest"))
    if not specs:
        raise ImageInputError(
            f"{wheels}: no {SPEC_WHEEL} (pip download --no-deps swebench==4.1.0) and no specs.json"
        )
    return SpecTable(specs, dict(ns.get("MAP_REPO_TO_REQS_PATHS", {})), parsers)


def image_tag(instance_id: str) -> str:
    """swebench's local instance image key (TestSpec.instance_image_key, no namespace)."""
    return f"sweb.eval.x86_64.{instance_id.lower()}:latest"


def directives_of(row: dict[str, Any]) -> list[str]:
    """The test files of test_patch, as swebench's get_test_directives (Django: dotted module names)."""
    files = re.findall(r"diff --git a/.* b/(.*)", row.get("test_patch", ""))
    files = [f for f in files if not f.endswith(NON_TEST_EXTS)]
    if row.get("repo") == "django/django":
        files = [f.removesuffix(".py").removeprefix("tests/").replace("/", ".") for f in files]
    return files


def eval_script(row: dict[str, Any], spec: dict[str, Any], base: str) -> str:
    """swebench 4.1.0's make_eval_script_list_py, line for line, against the image's one local commit `base`."""
    test_files = re.findall(r"diff --git a/.* b/(.*)", row.get("test_patch", ""))
    reset = f"git checkout {base} {' '.join(test_files)}"
    patch = f"git apply -v - <<'EOF_114329324912'\n{row.get('test_patch', '')}\nEOF_114329324912"
    cmds = ["source /opt/miniconda3/bin/activate", "conda activate testbed", f"cd {REPO_DIR}"]
    cmds += list(spec.get("eval_commands", []))
    cmds += [f"git config --global --add safe.directory {REPO_DIR}", f"cd {REPO_DIR}", "git status", "git show",
             f"git -c core.fileMode=false diff {base}", "source /opt/miniconda3/bin/activate",
             "conda activate testbed"]  # fmt: skip
    if "install" in spec:
        cmds.append(spec["install"])
    test_cmd = " ".join([spec["test_cmd"], *directives_of(row)])
    cmds += [reset, patch, f": '{START}'", test_cmd, f": '{END}'", reset]
    return "#!/bin/bash\nset -uxo pipefail\n" + "\n".join(cmds) + "\n"


@dataclass
class Instance:
    """One row's build: where its inputs are and what the image and task row are."""

    row: dict[str, Any]
    spec: dict[str, Any]
    source: Path
    notes: list[str] = field(default_factory=list)

    @property
    def instance_id(self) -> str:
        return str(self.row["instance_id"])


def source_of(inputs: Path, iid: str) -> Path:
    for cand in (inputs / "src" / f"{iid}.tar", inputs / "src" / f"{iid}.tar.gz", inputs / "src" / iid):
        if cand.exists():
            return cand
    raise ImageInputError(f"{inputs}/src/{iid}.tar: missing (expected `git archive <base_commit>` of the repo, "
                          "a .tar/.tar.gz or a directory)")  # fmt: skip


def read_source_file(source: Path, rel: str) -> bytes:
    """One file of a source (a .tar, a .tar.gz or a directory), by its path in the repository."""
    rel = rel.removeprefix("./")
    if source.is_dir():
        if (source / rel).is_file():
            return (source / rel).read_bytes()
    else:
        with tarfile.open(source) as tar:  # mode "r:*": plain or gzip, whichever it is
            for name in (rel, f"./{rel}"):
                try:
                    member = tar.extractfile(name)
                except KeyError:
                    continue
                if member is not None:
                    return member.read()
    raise ImageInputError(f"{source}: no file {rel!r} in the source")


def source_tar_sha256(source: Path) -> str | None:
    """sha256 of the uncompressed tar (what `git archive --format=tar` wrote, before any gzip); None for a
    directory, which has no tar bytes to compare."""
    if source.is_dir():
        return None
    h = hashlib.sha256()
    with gzip.open(source) if source.name.endswith(".gz") else source.open("rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def source_sha256(source: Path) -> str:
    """What names a source in the image hashes, so a present image is found without unpacking it: the
    uncompressed tar's sha256 (a .tar and its .tar.gz name one source), a directory's paths and file bytes."""
    if (digest := source_tar_sha256(source)) is not None:
        return digest
    h = hashlib.sha256()
    files = sorted(x for x in source.rglob("*") if x.is_file() and ".git" not in x.relative_to(source).parts)
    for p in files:
        h.update(str(p.relative_to(source)).encode() + b"\0" + p.read_bytes())
    return h.hexdigest()
