"""The trusted check must not change what the code under test does (issue 22/25: a real pydicom gold patch had a
passing test fail only under our grader). Probing an assertion operand calls its comparison; a repository's own
`__eq__` may change the object it is called on (pydicom converts a raw element when it is compared), so the check
probes only operands whose class or comparison code the patch touched, and the graded run keeps pytest's
assertion-pass hook off (with it on, pytest reprs every passing operand); a second, probe run does that for
results that would be resolved (swe_rl.tasks.grading._probe). Real pytest, real git, the real plugin, on
this host through a LocalSandbox (no Docker needed for what is under test here)."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

from sandboxes.local import LocalSandbox
from swe_rl.tasks.trusted_check import collect, install

LIB = """
class Element:
    '''Holds a raw value; comparing it with a foreign object converts it (the shape of pydicom's RawDataElement).'''

    def __init__(self, key):
        self.key, self.raw = key, True

    def __eq__(self, other):
        if isinstance(other, Element):
            return self.key == other.key
        self.raw = False
        return NotImplemented

    def __repr__(self):
        self.raw = False
        return f"Element({self.key})"

    __hash__ = None
"""
TEST = """
from rawlib import Element


def test_compare_keeps_raw():
    e = Element(1)
    assert e == Element(1)
    assert e.raw
"""
AGREES = """
class Element:
    def __init__(self, key):
        self.key, self.raw = key, True

    def __eq__(self, other):
        return True

    __hash__ = None
"""


def _repo(tmp_path: Path, lib_after: str | None) -> Path:
    repo = tmp_path / "repo"
    repo.mkdir(parents=True)
    (repo / "rawlib.py").write_text(textwrap.dedent(LIB))
    (repo / "test_raw.py").write_text(textwrap.dedent(TEST))
    git = ["git", "-C", str(repo), "-c", "user.email=t@t", "-c", "user.name=t"]
    subprocess.run([*git, "init", "-q"], check=True)
    subprocess.run([*git, "add", "."], check=True)
    subprocess.run([*git, "commit", "-qm", "base"], check=True)
    if lib_after is not None:  # the "patch": what the grader would find changed in the tree
        (repo / "rawlib.py").write_text(textwrap.dedent(lib_after))
    return repo


async def _run(repo: Path, probe: bool) -> tuple[int, list[str], str]:
    async with LocalSandbox(copy_from=repo) as sb:
        check = await install(sb, workdir=sb.root)
        prefix = check.probe_prefix if probe else check.prefix
        res = await sb.exec(f"{prefix} {sys.executable} -m pytest -q -p no:cacheprovider test_raw.py")
        return res.exit_code, await collect(sb, check, res.output), res.output


async def test_the_graded_run_leaves_side_effecting_comparisons_and_reprs_alone(tmp_path: Path) -> None:
    # the verdict comes from this run: the assertion-pass hook is off (pytest would repr passing operands)
    code, found, log = await _run(_repo(tmp_path, lib_after=None), probe=False)
    assert code == 0, log
    assert found == [], found


async def test_the_probe_does_not_call_an_untouched_eq(tmp_path: Path) -> None:
    # the probe run (verdict unused) formats passing operands, so the repr's side effect shows; the plugin's own
    # probing must not add findings for a class the patch did not touch
    _, found, log = await _run(_repo(tmp_path, lib_after=None), probe=True)
    assert "test session starts" in log or "passed" in log or "failed" in log, log
    assert found == [], found


async def test_the_probe_flags_a_touched_always_equal_class(tmp_path: Path) -> None:
    code, found, log = await _run(_repo(tmp_path, lib_after=AGREES), probe=True)
    assert code == 0, log
    assert any("agrees with any value" in f for f in found), found
    _, found, _ = await _run(_repo(tmp_path / "graded", lib_after=AGREES), probe=False)
    assert not any("agrees with any value" in f for f in found), found  # only the probe run looks
