"""The grader's rooms import one way: grading -> integrity, images -> tasks (docs/how-it-fits.md).

Every import counts, the ones inside functions too: a lazy import is still a door between rooms.
"""

from __future__ import annotations

import ast
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2] / "swe_rl"
ROOMS = ("tasks", "images", "integrity", "grading")
# what each room may import of the others (sandboxes and third-party libraries are free to all)
MAY_IMPORT = {
    "tasks": set(),
    "images": {"tasks"},
    "integrity": {"tasks"},
    "grading": {"tasks", "images", "integrity"},
}
# shipped alone into an image's Python: the standard library only (and pytest's own modules, for the plugin;
# the image's own sitecustomize, which the runner probe imports after itself)
OBSERVERS = {
    "trusted_check_plugin.py": {"pytest", "_pytest", "py"},
    "runner_probe_site.py": {"sitecustomize"},
    "trusted_values.py": set(),
}


def _imports(path: Path) -> set[str]:
    names: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            names.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            names.add(node.module)
            names.update(f"{node.module}.{a.name}" for a in node.names)
    return names


def _room_of(name: str) -> str | None:
    parts = name.split(".")
    return parts[1] if len(parts) > 1 and parts[0] == "swe_rl" and parts[1] in ROOMS else None


def _modules(room: str) -> list[Path]:
    return [p for p in (ROOT / room).rglob("*.py") if "micro_suite" not in p.parts]


def test_rooms_import_one_way():
    wrong = []
    for room in ROOMS:
        for path in _modules(room):
            for name in _imports(path):
                other = _room_of(name)
                if other and other != room and other not in MAY_IMPORT[room]:
                    wrong.append(f"{path.relative_to(ROOT.parent)} imports {name}")
    assert not wrong, "\n".join(sorted(wrong))


def test_room_graph_has_no_cycle():
    # the allowed graph itself: a cycle there would let two rooms grow into one
    seen: dict[str, int] = {}

    def visit(room: str) -> None:
        assert seen.get(room) != 1, f"cycle through {room}"
        if room in seen:
            return
        seen[room] = 1
        for other in MAY_IMPORT[room]:
            visit(other)
        seen[room] = 2

    for room in ROOMS:
        visit(room)


def test_observers_ship_alone():
    for name, extra in OBSERVERS.items():
        tops = {n.split(".")[0] for n in _imports(ROOT / "integrity" / name)}
        foreign = tops - set(sys.stdlib_module_names) - extra - {"__future__"}
        assert not foreign, f"{name} imports {sorted(foreign)}: it must run alone in an image's Python"


def test_every_room_has_its_readme():
    for room in ROOMS:
        text = (ROOT / room / "README.md").read_text()
        assert len(text.splitlines()) <= 45, f"swe_rl/{room}/README.md is longer than a screen"
        assert "May import" in text


def test_how_it_fits_draws_every_room():
    # the one-screen map of the rooms (docs/how-it-fits.md) names each of them; the arrows are MAY_IMPORT above
    text = (ROOT.parent / "docs" / "how-it-fits.md").read_text()
    section = text.split("## The grader's rooms", 1)[-1]
    assert section != text and all(f"swe_rl.{room}" in section for room in ROOMS)
