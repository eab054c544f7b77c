"""Every image a test names is one a code path of the project builds, and a test that starts FROM an image builds
it when missing: nothing a test needs may be an image that only earlier work left on the machine, or one a
registry would have to serve (none is reachable here or on a newcomer's machine).

A static check over tests/ (Python sources and Dockerfiles), against the builders:
- `swe-rl/base:<suite>`: the sandbox base image, debootstrapped by `sandboxes.images.ensure_base_image` for the
  Debian suites the instance builder uses (swebench_overrides.json `pythons`). `make setup` builds the Makefile's
  BASE_IMAGE; any other suite must be built by the test file itself (ensure_base_image / build_base_image /
  build_inputs, which debootstraps a missing base).
- `swe-rl/micro:<task>`: a task of the bundled micro suite (its Dockerfile, built by `build_task_images`); a
  Dockerfile starting FROM one must sit in a file that builds the suite (the `tasks_micro_images` fixture).
- `sweb.eval.x86_64.*`: the offline SWE-bench instance builder's names.
- any other `swe-rl/...` tag: a test-only image, built in the same file (build_image, a task-repo builder).
- names a test uses to exercise the missing-image path, listed below with that purpose.
A name whose text is computed at run time (an f-string placeholder that is no module constant) is not checked.
"""

from __future__ import annotations

import ast
import json
import re
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
TESTS = REPO / "tests"

# a bare name needs its tag to be an image (a SWE-bench `repo` field such as "swe-rl/calc" is none)
IMAGE = re.compile(
    r"^(swe-rl/[A-Za-z0-9_.-]+:[A-Za-z0-9_.-]*|sweb\.eval\.x86_64\.[A-Za-z0-9_.-]+(?::[\w.-]+)?)$"
)
# Dockerfile instructions as the project writes them (upper case; `from x import y` in Python text is no FROM)
FROM = re.compile(r"^\s*FROM\s+(?:--platform=\S+\s+)?(\S+)(?:\s+AS\s+(\S+))?", re.MULTILINE)
# names whose absence is the point of the test that uses them (a missing image must be reported, not pulled)
ABSENT_ON_PURPOSE = {
    "swe-rl/missing:never",
    "swe-rl/does-not-exist:never",
    "swe-rl/definitely-missing:v0",
    "swe-rl/no-such-image:1",
    "swe-rl/none:x",
}
BUILDS_BASE = {"ensure_base_image", "build_base_image", "build_inputs"}
BUILDS_MICRO = {"tasks_micro_images", "build_task_images", "prepare_images"}
BUILDS_OWN = {"build_image", "default_builder", "sandboxes_builder", "build_task_images", "build_inputs"}


@dataclass(frozen=True)
class Ref:
    file: Path
    line: int
    image: str
    in_from: bool  # the text is a Dockerfile's FROM line


def setup_base_image() -> str:
    """The base image `make setup` builds (the Makefile's BASE_IMAGE, a prerequisite of every test target)."""
    make = (REPO / "Makefile").read_text()
    assert re.search(r"^setup:.*\bimage\b", make, re.M), "make setup no longer builds the base image"
    return re.search(r"^BASE_IMAGE \?= (\S+)$", make, re.M).group(1)


def builder_suites() -> set[str]:
    (overrides,) = (REPO / "swe_rl").rglob("swebench_overrides.json")
    return set(json.loads(overrides.read_text())["pythons"].values())


def micro_images() -> set[str]:
    (suite,) = {p.parents[1] for p in (REPO / "swe_rl").rglob("micro_suite/tasks/*/Dockerfile")}
    tags = set()
    for d in suite.iterdir():
        meta = d / "task.yaml"
        if meta.is_file():
            tags |= set(re.findall(r"^image:\s*(\S+)", meta.read_text(), re.M))
    assert tags, f"no task image names under {suite}"
    return tags


def _module_strings(tree: ast.Module) -> dict[str, str]:
    out = {}
    for node in tree.body:
        if (
            isinstance(node, ast.Assign)
            and isinstance(node.value, ast.Constant)
            and isinstance(node.value.value, str)
        ):
            for t in node.targets:
                if isinstance(t, ast.Name):
                    out[t.id] = node.value.value
    return out


def _text(node: ast.AST, consts: dict[str, str]) -> str | None:
    """A string constant, or an f-string with its module-constant placeholders filled ('{}' for the others)."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value
    if isinstance(node, ast.JoinedStr):
        parts = []
        for v in node.values:
            if isinstance(v, ast.Constant):
                parts.append(str(v.value))
            elif isinstance(v, ast.FormattedValue) and isinstance(v.value, ast.Name) and v.value.id in consts:
                parts.append(consts[v.value.id])
            else:
                parts.append("{}")
        return "".join(parts)
    return None


def refs_in_text(file: Path, line: int, text: str) -> list[Ref]:
    out, stages = [], set()
    for m in FROM.finditer(text):
        if m.group(2):
            stages.add(m.group(2))
        if "{" not in m.group(1) and m.group(1) not in stages:
            out.append(Ref(file, line + text[: m.start()].count("\n"), m.group(1), True))
    if IMAGE.match(text.strip()):
        out.append(Ref(file, line, text.strip(), False))
    return out


def scan(file: Path, source: str) -> tuple[list[Ref], set[str]]:
    """The image references in a test file and the names it uses (calls, fixtures, attributes)."""
    tree = ast.parse(source)
    consts = _module_strings(tree)
    refs: list[Ref] = []
    names: set[str] = set()
    parts = {id(v) for n in ast.walk(tree) if isinstance(n, ast.JoinedStr) for v in n.values}
    for node in ast.walk(tree):
        if isinstance(node, ast.Name):
            names.add(node.id)
        elif isinstance(node, ast.Attribute):
            names.add(node.attr)
        elif isinstance(node, ast.arg):
            names.add(node.arg)
        elif isinstance(node, ast.alias):
            names.add(node.asname or node.name.rsplit(".", 1)[-1])
        if isinstance(node, ast.JoinedStr | ast.Constant) and id(node) not in parts:
            text = _text(node, consts)
            if text:
                refs += refs_in_text(file, getattr(node, "lineno", 0), text)
    return refs, names


def problems(file: Path, source: str, *, base: str, suites: set[str], micro: set[str]) -> list[str]:
    if file.suffix == ".py":
        refs, names = scan(file, source)
    else:  # a Dockerfile: the test that uses it must build what it starts FROM, which is not checkable here
        refs, names = refs_in_text(file, 1, source), set()
    out = []
    for r in refs:
        where = f"{r.file.relative_to(REPO) if r.file.is_relative_to(REPO) else r.file}:{r.line}: {r.image}"
        repo_name, _, tag = r.image.partition(":")
        if r.image == base or (r.image in ABSENT_ON_PURPOSE and not r.in_from):
            continue
        if repo_name == "swe-rl/base":
            if tag not in suites:
                out.append(f"{where}: no builder makes base suite {tag!r} (builder suites: {sorted(suites)})")
            elif not names & BUILDS_BASE:
                out.append(f"{where}: only `make setup`'s {base} exists on a fresh machine; build this one "
                           f"when missing in the test (sandboxes.images.ensure_base_image)")  # fmt: skip
        elif repo_name == "swe-rl/micro":
            if tag and r.image not in micro:
                out.append(f"{where}: not an image of the micro suite")
            elif r.in_from and not names & BUILDS_MICRO:
                out.append(
                    f"{where}: FROM a micro-suite image without building the suite (tasks_micro_images)"
                )
        elif repo_name.startswith("sweb.eval.x86_64."):
            if r.in_from and not names & BUILDS_BASE:
                out.append(f"{where}: FROM an instance image the test does not build (build_inputs)")
        elif r.in_from:
            out.append(f"{where}: FROM an image that no code path of the project builds")
        elif not names & BUILDS_OWN:
            out.append(
                f"{where}: a test-only image this file never builds (and not listed as absent on purpose)"
            )
    return out


def _context() -> dict:
    return {"base": setup_base_image(), "suites": builder_suites(), "micro": micro_images()}


def test_every_image_a_test_names_is_built_by_the_project():
    ctx = _context()
    files = [p for p in TESTS.rglob("*.py") if "__pycache__" not in p.parts and p != Path(__file__).resolve()]
    files += [p for p in TESTS.rglob("*") if p.is_file() and p.name.startswith("Dockerfile")]
    found = [msg for f in sorted(files) for msg in problems(f, f.read_text(), **ctx)]
    assert not found, "\n".join(found)
    assert len(files) > 100  # the walk saw the test tree


def test_the_check_fails_a_base_image_without_a_build_path(tmp_path):
    """The defect this guards: a test Dockerfile FROM swe-rl/base:bullseye, which only earlier work had built."""
    ctx = _context()
    bare = 'DOCKERFILE = """FROM swe-rl/base:bullseye\\nCOPY site/ /site/\\n"""\n'
    (found,) = problems(tmp_path / "test_x.py", bare, **ctx)
    assert "swe-rl/base:bullseye" in found and "ensure_base_image" in found
    built = bare + "from sandboxes.images import ensure_base_image\n"
    assert problems(tmp_path / "test_x.py", built, **ctx) == []
    through_constant = 'BASE = "swe-rl/base:bullseye"\nD = f"FROM {BASE}\\n"\n'
    assert (
        len(problems(tmp_path / "test_x.py", through_constant, **ctx)) == 2
    )  # the constant and the FROM line
    assert (
        problems(tmp_path / "test_x.py", 'D = "FROM swe-rl/base:bookworm\\n"\n', **ctx) == []
    )  # make setup's
    (own,) = problems(tmp_path / "test_x.py", 'D = "FROM swe-rl/left-over:1\\n"\n', **ctx)
    assert "no code path" in own
    (micro,) = problems(tmp_path / "test_x.py", 'D = "FROM swe-rl/micro:textkit-5\\n"\n', **ctx)
    assert "tasks_micro_images" in micro
    (tag,) = problems(tmp_path / "test_x.py", 'TAG = "swe-rl/scratch:1"\n', **ctx)
    assert "never builds" in tag
    assert problems(tmp_path / "Dockerfile", "FROM swe-rl/base:trixie\n", **ctx)  # a Dockerfile file too
