"""The shadow set of a task image: every top-level module name a new file at the repo root could shadow.

`python -m pytest` puts the repo root first on sys.path, so a new `attr.py` or `pluggy/` there replaces a module
pytest imports at start-up. Which names matter depends on the image: its standard library and every installed
distribution. `probe_cmd` lists them inside the image (run in the pristine grading sandbox, before the patch is
applied, with `python -I` from `/` so the repository is not on the path), for every interpreter the eval script
may use; results are cached per image id in memory and on disk. Paths under /testbed are not probed (an editable
install of the repo itself is the repo's own code, not a dependency).
"""

from __future__ import annotations

import json
import os
from pathlib import Path

from swe_rl.integrity.tree import DEFAULT_SHADOW

# Runs on the image's Python (3.6+): standard library only, no f-strings beyond 3.6.
_SNIPPET = r"""
import os, sys
names = set(getattr(sys, "stdlib_module_names", ())) | set(sys.builtin_module_names)
def scan(d):
    try:
        entries = os.listdir(d)
    except OSError:
        return
    for e in entries:
        p = os.path.join(d, e)
        if e.endswith((".dist-info", ".egg-info")):
            try:
                with open(os.path.join(p, "top_level.txt")) as f:
                    names.update(l.strip().split("/")[0] for l in f if l.strip())
            except OSError:
                pass
        elif e.endswith(".py"):
            names.add(e[:-3])
        elif e.endswith((".so", ".pyd")):
            names.add(e.split(".")[0])
        elif os.path.isdir(p) and e.isidentifier() and e != "__pycache__":
            names.add(e)
for d in sys.path:
    if d and os.path.isdir(d) and not os.path.abspath(d).startswith("/testbed"):
        scan(d)
print("\n".join(sorted(n for n in names if n)))
"""
PYTHONS = (
    "$(command -v python3 python 2>/dev/null) /opt/miniconda3/bin/python /opt/miniconda3/envs/*/bin/python "
    "/opt/conda/envs/*/bin/python /usr/local/bin/python3"
)
# Names that are also common repo folders and that pytest never imports at start-up (a fix adding a file under
# its own `tests/` is not shadowing anything)
NOT_SHADOWING = frozenset({"test", "tests", "testing", "doc", "docs", "examples", "benchmarks", "scripts"})
_CACHE: dict[str, frozenset[str]] = {}


def probe_cmd(dest: str) -> str:
    """Shell writing the image's module names (one a line) to dest; empty when no Python answers."""
    snippet = _SNIPPET.replace("'", "'\\''")
    return (
        f'for py in {PYTHONS}; do [ -x "$py" ] && (cd / && "$py" -I -c \'{snippet}\') 2>/dev/null; done '
        f"| LC_ALL=C sort -u > {dest}; true"
    )


def parse_probe(text: str) -> frozenset[str]:
    names = frozenset(n.strip() for n in text.splitlines() if n.strip().isidentifier())
    return (names | {"sitecustomize", "usercustomize"}) - NOT_SHADOWING if names else DEFAULT_SHADOW


def image_key(image: str) -> str:
    """The image's id when the Docker engine knows it (names move, ids do not), else its name."""
    try:
        from sandboxes.engine import docker_client

        return str(docker_client().images.get(image).id)
    except Exception:  # no engine, unknown image, another backend: the name is the best key there is
        return image


def _cache_file(key: str) -> Path:
    root = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
    return root / "swe-rl" / "shadow" / f"{key.replace('/', '_').replace(':', '_')}.json"


def cached(key: str) -> frozenset[str] | None:
    """The shadow set of an image id probed before (this process or an earlier one), else None."""
    if key in _CACHE:
        return _CACHE[key]
    try:
        names = frozenset(json.loads(_cache_file(key).read_text()))
    except (OSError, ValueError, TypeError):
        return None
    _CACHE[key] = names
    return names


def store(key: str, names: frozenset[str]) -> None:
    _CACHE[key] = names
    path = _cache_file(key)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(f".{os.getpid()}.tmp")
        tmp.write_text(json.dumps(sorted(names)))
        tmp.replace(path)
    except OSError:  # a read-only home: the in-memory cache still holds it
        pass
