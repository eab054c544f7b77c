"""The eval script's editable install (`pip install -e .`), run only when the patch may concern it.

swebench's eval scripts reinstall the repository before the tests; the image already holds that editable install,
so for a patch that only edits source inside a package the line redoes the image's work (6-7 s of a django 5.0
grading whose tests take 2 s). The line is kept, guarded by a check in the sandbox, unless the patch may have
changed what it installs: `guarded(script, touched, packaging_text)` leaves it to run only when
- some path the patch touched (read from the tree by the tree guard) is at the root, is not a source or data file,
  is a build script inside a package (`setup*.py`, e.g. astropy's setup_package.py), or is named by setup.py /
  setup.cfg / pyproject.toml / MANIFEST.in (its path, module or file name), or
- the script has another install step (setup.py develop, build_ext, a non-editable install: those always run), or
- in the sandbox, one of the touched top-level packages does not resolve to /testbed (`python -I` from /, with
  importlib's find_spec: no code of the patch runs; the image's editable install is not in place).
Without the tree guard (what was touched is unknown) the install runs. The graded run (swe_rl.grading.grader) and
the fail-fast pre-run (swe_rl.grading.failfast) both use it; `tests["integrity"]["install"]` says what it did.
"""

from __future__ import annotations

import re
import shlex
from typing import Any

# The repository's editable install, as swebench's specs write it (other install lines always run).
_EDITABLE = re.compile(
    r"^\s*(?:python[\d.]* -m )?pip[\d.]* install(?: -(?!e\b)-?[\w-]+)* (?:-e|--editable) \.(?:\[[\w,-]+\])?"
    r"(?: -(?!e\b)-?[\w-]+)*\s*$"
)
_OTHER_INSTALL = re.compile(r"\b(pip[\d.]* install|setup\.py|conda install|poetry install|build_ext)\b")
# files an editable install of the repository never reads (pure source and data inside a package)
_NEUTRAL_EXT = (".py", ".pyi", ".txt", ".rst", ".md", ".html", ".json", ".yaml", ".yml", ".csv")
PACKAGING = ("setup.py", "setup.cfg", "pyproject.toml", "MANIFEST.in")
NON_PACKAGES = frozenset({"tests", "test", "testing", "docs", "doc", "examples", "benchmarks", "scripts"})
# Runs on the image's Python (3.6+) from / with -I: each named top-level package must import from /testbed.
_IMPORTS_FROM_TESTBED = (
    "import importlib.util as u, sys\n"
    "def ok(n):\n"
    "    s = u.find_spec(n)\n"
    "    locs = list(s.submodule_search_locations or []) + [s.origin or ''] if s else []\n"
    "    return any(str(p).startswith('/testbed/') for p in locs)\n"
    "sys.exit(0 if all(ok(n) for n in sys.argv[1:]) else 1)\n"
)
# shell printing the packaging files (run in the repository after the patch; `packaging_text` of `guarded`)
READ_PACKAGING = f'for f in {" ".join(PACKAGING)}; do [ -f "$f" ] && cat "$f"; done; true'
UNKNOWN = "\0unknown"  # packaging_text when it could not be read: the install runs
_READ_MAX = 90_000  # bytes; sandboxes cap an exec's output at 100 KB


def install_lines(script: str) -> list[str] | None:
    """The editable-install lines before the tests; None when some other install step is there (always run)."""
    before = script.split(": '>>>>> Start Test Output'", 1)[0]
    found = [ln for ln in before.split("\n") if _EDITABLE.match(ln)]
    others = [ln for ln in before.split("\n") if _OTHER_INSTALL.search(ln) and not _EDITABLE.match(ln)]
    return None if others else found


def packages_to_check(touched: list[str] | tuple[str, ...], packaging_text: str) -> list[str] | None:
    """The top-level packages the patch changed, each of which must import from /testbed for the install to be
    skipped; None when the patch touched something the install reads (see the module docstring)."""
    if packaging_text == UNKNOWN:
        return None
    tops: dict[str, None] = {}
    for path in touched:
        parts = path.split("/")
        if len(parts) < 2 or not path.endswith(_NEUTRAL_EXT) or parts[-1].startswith("setup"):
            return None  # the root (setup.py, a new top-level module), a file or script a build step reads
        if parts[0] == "src" and len(parts) < 3:
            return None
        top = parts[1] if parts[0] == "src" else parts[0]
        if _named_by(path, packaging_text):
            return None
        if top not in NON_PACKAGES:
            tops.setdefault(top)
    return list(tops)


def _named_by(path: str, text: str) -> bool:
    """Whether packaging text names the file: its path, its module (`pkg.mod`, `pkg` for pkg/__init__.py) or
    its file name (setup.py reading `release.py` through os.path.join)."""
    rel = path.removeprefix("src/")
    module = rel.rsplit(".", 1)[0].replace("/", ".").removesuffix(".__init__")
    base = rel.rsplit("/", 1)[-1]
    if path in text or base in text:
        return True
    return re.search(rf"(?<![\w.]){re.escape(module)}(?![\w])", text) is not None


def guarded(script: str, touched: list[str] | tuple[str, ...] | None, packaging_text: str) -> tuple[str, str]:
    """(`script` with its editable install guarded by the in-sandbox check, what became of the install:
    "kept" | "none" | "skipped if these import from /testbed: a, b")."""
    found = install_lines(script)
    installs = found or []
    tops = packages_to_check(touched, packaging_text) if found is not None and touched is not None else None
    if not installs or tops is None:  # "none": no install line at all; another install step always runs
        return script, "none" if found == [] else "kept"
    check = shlex.quote(_IMPORTS_FROM_TESTBED)
    names = " ".join(shlex.quote(t) for t in tops)
    head, sep, tail = script.partition(": '>>>>> Start Test Output'")
    lines = [
        f"if (cd / && python -I -c {check} {names}); then : swe-rl: install unchanged; else {ln}; fi"
        if ln in installs
        else ln
        for ln in head.split("\n")
    ]
    return "\n".join(lines) + sep + tail, "skipped if these import from /testbed: " + (
        ", ".join(tops) or "(no package touched)"
    )


async def read_packaging(sb: Any) -> str:
    """The packaging files' text in the patched tree (UNKNOWN when it cannot be read whole)."""
    res = await sb.exec(READ_PACKAGING, cwd="/testbed", timeout=120)
    # exec output is capped (head + tail): a cut text could miss a name, so it decides nothing
    return res.output if res.exit_code == 0 and len(res.output) < _READ_MAX else UNKNOWN
