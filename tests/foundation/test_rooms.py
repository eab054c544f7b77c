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
    "trusted_asserts.py": set(),
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


# the rest of the pipeline reaches the rooms through these doors only (swe_rl/cli.py registers the rooms' commands)
DOORS = {"swe_rl.grading", "swe_rl.images", "swe_rl.tasks.task", "swe_rl.tasks.loaders", "swe_rl.tasks.generator",
         "swe_rl.tasks.adapters"}  # fmt: skip
CLI_DOORS = {"swe_rl.grading.cli", "swe_rl.images.cli"}


def _imported_modules(path: Path) -> dict[str, list[str]]:
    """module -> the names imported from it (an `import m` gives m with no names)."""
    out: dict[str, list[str]] = {}
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            for a in node.names:
                out.setdefault(a.name, [])
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            out.setdefault(node.module, []).extend(a.name for a in node.names)
    return out


def test_the_pipeline_reaches_grading_through_its_public_surface():
    """Trainers, evaluation, rollout and the gateway import grading's names from `swe_rl.grading` (its __all__),
    images' from `swe_rl.images`, and nothing from integrity: what the guards and observers are is grading's
    business."""
    import swe_rl.grading as grading
    import swe_rl.images as images

    wrong = []
    for path in sorted(ROOT.rglob("*.py")):
        rel = path.relative_to(ROOT)
        if rel.parts[0] in ROOMS:
            continue
        for module, names in _imported_modules(path).items():
            if _room_of(module) is None or (module in CLI_DOORS and rel.name == "cli.py"):
                continue
            if module not in DOORS:
                wrong.append(f"{rel}: imports {module} (not a door: {sorted(DOORS)})")
            for name in names:
                surface = {"swe_rl.grading": grading.__all__, "swe_rl.images": images.__all__}.get(module)
                if surface is not None and name not in surface:
                    wrong.append(f"{rel}: {module}.{name} is not in its __all__")
    assert not wrong, "\n".join(wrong)
    assert sorted(grading.__all__) == sorted(grading._SURFACE) and sorted(images.__all__) == sorted(
        images._SURFACE
    )
    for name in grading.__all__:  # every door opens
        assert getattr(grading, name) is not None
    for name in images.__all__:
        assert getattr(images, name) is not None
