"""Grader integrity, tree side: which test-harness files the applied patch touched, and putting them back.

Shared by every place a reward is computed (swe_rl.grading.grader.grade, hence `swe-rl grade`, the evaluation
harness, rollouts, the OpenRLHF executor and the gateway's external agents; the built-in trainer's CachedGrader
calls the same functions). The log side (what the outer pytest session reported) is swe_rl.integrity.log_rules.

1. Touched paths come from the tree, never from the patch text: the grader lists every file of /testbed (type,
   size, mtime) with `find` before and after the patch is applied and compares the two lists (`comm`), so no
   spelling of a patch (quoted paths, no or mnemonic prefixes, renames, plain `---/+++` diffs) and no git
   configuration changes what is seen. Only `.git/objects`, `.git/logs` and `.git/index` are left out (the apply
   chain's `--3way` writes there); any other write inside `.git` is reported (`git_dir`) and makes the result
   unresolved. Every git command the grader runs afterwards ignores system/global config, hooks and fsmonitor.
2. Harness files the patch touched are reset to the base commit *plus the gold patch's change to them*: every
   `conftest.py`, pytest configuration (pytest.ini, .pytest.ini, tox.ini, setup.cfg, pyproject.toml), new
   `sitecustomize`/`usercustomize`/`.pth`/`.egg-link` files, packaging metadata (`*.dist-info`, `*.egg-info`,
   `*.egg`: an entry point in the `pytest11` group is a plugin pytest loads without a conftest), and new top-level
   modules (at the root or under `src/`) that shadow a module of the image: its standard library and every
   installed distribution, probed inside the image (swe_rl.integrity.shadow), minus the repo's own top-level names.
3. Bytecode: every `.pyc`/`.pyo` or `__pycache__` path the patch added or changed (a symlink included) is removed
   (reset, if the base commit tracks it) and reported (`bytecode`), so the tests read only the image's own
   bytecode; patches are written without bytecode (swe_rl.agent.patch).

Findings go to `tests["integrity"]`: `harness_restored` (paths reset), `bytecode`, `git_dir` (structured, for the
suspicious label and the metrics built on top) and `violations` (each makes the result unresolved).
"""

from __future__ import annotations

import dataclasses
import re
import shlex
import sys
from collections.abc import Iterable
from typing import Any

from swe_rl.tasks.eval_script import patched_paths

CONFIG_FILES = frozenset({"pytest.ini", ".pytest.ini", "tox.ini", "setup.cfg", "pyproject.toml"})
METADATA_SUFFIXES = (".dist-info", ".egg-info", ".egg")
# Fallback shadow set when the image could not be probed. `test` is the standard library's regression-test package
# but also many repos' test folder: pytest never imports it.
DEFAULT_SHADOW = (frozenset(sys.stdlib_module_names) - {"test"}) | {
    "pytest", "_pytest", "pluggy", "py", "iniconfig", "packaging", "exceptiongroup", "tomli", "colorama",
    "xdist", "pytest_xdist", "hypothesis", "coverage", "pytest_cov", "sitecustomize", "usercustomize", "attr",
    "attrs",
}  # fmt: skip
# git as the grader runs it inside a sandbox: no system/global config, no hooks, no fsmonitor, stable quoting
GIT = (
    "env GIT_CONFIG_NOSYSTEM=1 GIT_CONFIG_GLOBAL=/dev/null git -c core.fsmonitor=false "
    "-c core.hooksPath=/dev/null -c core.quotepath=off"
)
_IGNORED_GIT = ("./.git/objects", "./.git/logs", "./.git/index")
TOPS_MARK = b"\0--swe-rl-base-tops--\0"


@dataclasses.dataclass(frozen=True)
class TreeChanges:
    """What applying the patch changed in the tree, as the grader saw it (see the module docstring)."""

    touched: tuple[str, ...]  # every repo path added, removed or changed (outside .git)
    git_dir: tuple[str, ...]  # paths inside .git the patch wrote (never legitimate)
    base_tops: frozenset[str]  # top-level module names of the base commit (root and src/): the repo's own


def snapshot_cmd(dest: str) -> str:
    """Shell (run in the repo) writing every non-directory path with its type, size and mtime, sorted, to dest."""
    prune = " -o ".join(f"-path {p}" for p in _IGNORED_GIT)
    return f"find . \\( {prune} \\) -prune -o ! -type d -printf '%y %s %T@ %P\\0' | LC_ALL=C sort -z > {dest}"


def changes_cmd(before: str, after: str, base: str, dest: str) -> str:
    """Shell (run in the repo after the patch): the records that differ between the two snapshots, then the base
    commit's top-level names (root and src/), into dest; parse it with `parse_changes`."""
    b = shlex.quote(base)
    return (
        f"{snapshot_cmd(after)} && {{ LC_ALL=C comm -z -3 {before} {after}; printf '\\0--swe-rl-base-tops--\\0'; "
        f"{GIT} ls-tree -z --name-only {b}; {GIT} ls-tree -z --name-only {b}:src 2>/dev/null; true; }} > {dest}"
    )


def parse_changes(raw: bytes) -> TreeChanges:
    """The TreeChanges of a `changes_cmd` output."""
    records, _, tops = raw.partition(TOPS_MARK)
    paths: dict[str, None] = {}
    for rec in records.decode("utf-8", errors="surrogateescape").split("\0"):
        fields = rec.lstrip("\t").split(" ", 3)
        if len(fields) == 4:
            paths.setdefault(fields[3])
    inside = tuple(p for p in paths if p == ".git" or p.startswith(".git/"))
    touched = tuple(p for p in paths if p not in inside)
    names = (n.decode("utf-8", errors="surrogateescape") for n in tops.split(b"\0") if n)
    return TreeChanges(touched, inside, frozenset(_module_name(n) for n in names))


def _module_name(name: str) -> str:
    return name.split(".")[0] if name.endswith((".py", ".so", ".pyd", ".pyc")) else name


def is_bytecode(path: str) -> bool:
    return path.endswith((".pyc", ".pyo")) or "__pycache__" in path.split("/")


def _top_module(parts: list[str]) -> str:
    """The importable top-level name a path defines at the repo root or under src/ ('' if none)."""
    if parts[0] == "src" and len(parts) > 1:
        parts = parts[1:]
    return _module_name(parts[0]) if len(parts) == 1 else parts[0]


def harness_kind(
    path: str, shadow: frozenset[str] = DEFAULT_SHADOW, base_tops: frozenset[str] = frozenset()
) -> str | None:
    """'revert' (reset to base + gold), 'remove_if_new' (delete unless it exists at base), 'bytecode' (reset
    to base or delete) or None."""
    parts = path.split("/")
    name = parts[-1]
    if name == "conftest.py" or name in CONFIG_FILES:
        return "revert"
    if is_bytecode(path):
        return "bytecode"
    if name in ("sitecustomize.py", "usercustomize.py") or name.endswith((".pth", ".egg-link")):
        return "remove_if_new"
    if any(p.endswith(METADATA_SUFFIXES) for p in parts):
        return "remove_if_new"
    top = _top_module(parts)
    return "remove_if_new" if top and top in shadow and top not in base_tops else None


def classify(
    paths: list[str] | tuple[str, ...],
    shadow: frozenset[str] = DEFAULT_SHADOW,
    base_tops: frozenset[str] = frozenset(),
) -> dict[str, str]:
    """The test-harness paths among `paths` -> how they are restored (harness_kind)."""
    out = {}
    for p in paths:
        kind = harness_kind(p, shadow, base_tops)
        if kind:
            out[p] = kind
    return out


# The repositories' own test runners and result reporting (django, sympy: no junit record to check them against),
# and the test-support code a repository ships for its own tests (sphinx/testing/, astropy/tests/, ...: the tests
# read their results through it): files a patch could change to make failing tests report success. They are code
# of the repository, and some instances fix a bug in them, so a runner file the gold patch changes stays as the
# patch left it (the probe run watches it); one the gold leaves alone is put back at the base commit, like a
# conftest.py. Scripts the eval script's test command runs are runner files too. A path ending in "/" is a folder.
RUNNER_FILES: dict[str, tuple[str, ...]] = {
    "django/django": ("tests/runtests.py", "django/test/", "django/core/management/commands/test.py"),
    "sympy/sympy": (
        "bin/test", "sympy/testing/", "sympy/utilities/runtests.py", "sympy/utilities/pytest.py",
        "sympy/utilities/randtest.py",
    ),
    "sphinx-doc/sphinx": ("sphinx/testing/",),
    "astropy/astropy": ("astropy/tests/",),
    "matplotlib/matplotlib": ("lib/matplotlib/testing/",),
    "pydata/xarray": ("xarray/testing.py", "xarray/tests/__init__.py"),
    "scikit-learn/scikit-learn": ("sklearn/utils/_testing.py", "sklearn/utils/testing.py"),
}  # fmt: skip
# pytest's own code inside a repository that is not pytest's (a vendored or shadowing copy): runner code
PYTEST_RUNNER = ("_pytest/", "src/_pytest/", "pytest.py", "src/pytest.py")
PYTEST_REPO = "pytest-dev/pytest"


def is_runner_path(path: str, runners: Iterable[str]) -> bool:
    """path is one of the runner files, or lies in one of the runner folders (entries ending in "/")."""
    return any(path == r or (r.endswith("/") and path.startswith(r)) for r in runners)


_SCRIPT_WORD = re.compile(r"^(?:\./)?([\w.-]+(?:/[\w.-]+)*)$")


def runner_files(repo: str, test_command: str) -> set[str]:
    """The runner files of a task: RUNNER_FILES of its repository, and the repo script each line of its test
    command runs (`./tests/runtests.py ...`, `bin/test ...`, `python setup.py test`)."""
    scripts = set()
    for line in test_command.splitlines():
        try:
            words = [w for w in shlex.split(line, comments=True) if not re.match(r"^\w+=", w)]
        except ValueError:  # unbalanced quotes: no script named
            continue
        if words and re.match(r"^python[\d.]*$", words[0]):
            words = [w for w in words[1:] if not w.startswith("-")][:1]
        m = _SCRIPT_WORD.match(words[0]) if words else None
        if m and ("/" in m.group(1) or m.group(1).endswith(".py")):  # a file, not a command found on PATH
            scripts.add(m.group(1))
    own = set(RUNNER_FILES.get(repo, ())) | (set() if repo == PYTEST_REPO else set(PYTEST_RUNNER))
    return own | scripts


def runner_paths(
    touched: list[str] | tuple[str, ...], runners: Iterable[str], gold_paths: Iterable[str]
) -> list[str]:
    """The runner files the patch touched that the gold patch leaves alone (to be put back at base)."""
    runners, gold = set(runners), set(gold_paths)
    return sorted(p for p in touched if is_runner_path(p, runners) and p not in gold)


def test_files_to_remove(
    touched: list[str] | tuple[str, ...], created: Iterable[str], gold_paths: Iterable[str]
) -> list[str]:
    """Files the test patch creates (`created`) that the patch under grading created too (and the gold patch
    leaves alone)."""
    made = set(created) - set(gold_paths)
    return sorted(p for p in touched if p in made)


def harness_paths(patch: str | None) -> dict[str, str]:
    """The harness paths a (trusted) patch text names; the grader itself classifies TreeChanges.touched."""
    return classify(patched_paths(patch))


def restore_script(paths: dict[str, str], base: str, gold_file: str | None, gold_paths: list[str]) -> str:
    """Shell (run in the repo after the agent's patch) that restores `paths`; `gold_file` holds the gold patch,
    whose hunks for `gold_paths` are re-applied on top of the base version."""
    b = shlex.quote(base)
    lines = []
    for p, kind in paths.items():
        q = shlex.quote(p)
        if kind in ("revert", "bytecode"):
            lines.append(
                f"if {GIT} cat-file -e {b}:{q} 2>/dev/null; then {GIT} checkout -q {b} -- {q}; else rm -rf {q}; fi"
            )
        else:
            lines.append(f"{GIT} cat-file -e {b}:{q} 2>/dev/null || rm -rf {q}")
    if gold_file and gold_paths:
        inc = " ".join(f"--include={shlex.quote(p)}" for p in gold_paths)
        lines.append(f"{GIT} apply {inc} {shlex.quote(gold_file)}")
    return "\n".join(lines) + "\n"


_NAME_LINE = re.compile(r"^(?:diff --git |--- |\+\+\+ |rename (?:from|to) |copy (?:from|to) )(.+)$", re.M)


def _unquote(name: str) -> str:
    if len(name) > 1 and name[0] == name[-1] == '"':
        return name[1:-1].encode("latin-1", "backslashreplace").decode("unicode_escape", errors="replace")
    return name


def named_paths(patch: str | None) -> set[str]:
    """Every path a patch could name in any spelling git apply or patch accepts (quoted, with or without a
    prefix, traditional `---`/`+++` headers, renames, a trailing timestamp): over-approximated, for the official
    grader's label, which never sees the tree."""
    out: set[str] = set()
    for rest in _NAME_LINE.findall(patch or ""):
        fields = re.findall(r'"(?:[^"\\]|\\.)*"|\S+', rest.split("\t")[0])
        for name in map(_unquote, fields):
            out.update({name, name.split("/", 1)[-1]})
    return out - {"/dev/null", "dev/null"}


def untrusted_harness_paths(patch: str | None, gold: str | None) -> list[str]:
    """Test-harness paths the patch names that the gold patch does not: the official harness runs them as the
    patch left them, so its verdict on such a patch is no evidence (`--grader official` labels it)."""
    gold_paths = named_paths(gold)
    named = named_paths(patch) - gold_paths
    harness = classify(sorted(named))
    # report git apply's -p1 view of a prefixed name (a/conftest.py -> conftest.py) when that is a harness file too
    return sorted({p.split("/", 1)[-1] if p.split("/", 1)[-1] in harness else p for p in harness})


def check_official(result: Any, task: Any, patch: str | None) -> Any:
    """A RewardResult of swebench's official harness, unresolved with an `integrity` entry in its tests when the
    patch changed test-harness files the gold patch leaves alone (grade with `ours` to judge such patches)."""
    untrusted = untrusted_harness_paths(patch, task.patch)
    if not untrusted or not result.resolved:
        return result
    tests = dict(result.tests, resolved=False)
    tests["integrity"] = {"untrusted_harness_files": untrusted, "official_resolved": True}
    return dataclasses.replace(result, reward=0.0, resolved=False, tests=tests)
