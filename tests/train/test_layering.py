"""The trainer never imports the experiments built on it (issue 38): swe_rl.experiments registers its data
sources and its CLI commands itself, and the swe-rl CLI is where the two meet."""

from __future__ import annotations

import ast
import json
import os
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
TRAIN = REPO / "swe_rl" / "train"
FAKES = REPO / "tests" / "openrlhf" / "cuda_fakes"  # the tests' named flash_attn fake: actors.py imports it


def imported_names(path: Path) -> list[str]:
    """Every module an `import` / `from ... import` names in the file, at any depth (inside functions too)."""
    names: list[str] = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            names += [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names += [node.module] + [f"{node.module}.{a.name}" for a in node.names]
    return names


def test_no_module_under_swe_rl_train_imports_experiments():
    files = sorted(TRAIN.rglob("*.py"))
    assert len(files) > 25  # the scan sees the package, its openrlhf backend included
    bad = {
        str(p.relative_to(REPO)): [
            n for n in imported_names(p) if n.split(".")[:2] == ["swe_rl", "experiments"]
        ]
        for p in files
    }
    assert {k: v for k, v in bad.items() if v} == {}


def test_the_scan_sees_an_import_inside_a_function(tmp_path):
    probe = tmp_path / "probe.py"
    probe.write_text(
        "def f():\n    from swe_rl.experiments.demo import run_demo\n    import swe_rl.experiments\n"
    )
    assert imported_names(probe) == [
        "swe_rl.experiments.demo", "swe_rl.experiments.demo.run_demo", "swe_rl.experiments"
    ]  # fmt: skip


def test_importing_every_trainer_module_loads_no_experiment():
    code = (
        "import importlib, json, pkgutil, sys, swe_rl.train as t\n"
        "mods = [m.name for m in pkgutil.walk_packages(t.__path__, 'swe_rl.train.')]\n"
        "for m in mods: importlib.import_module(m)\n"
        "from swe_rl.train.sources import DATA_SOURCES\n"
        "print(json.dumps([mods, sorted(DATA_SOURCES), [m for m in sys.modules if 'swe_rl.experiments' in m]]))\n"
    )
    env = {**os.environ, "PYTHONPATH": f"{FAKES}{os.pathsep}{REPO}"}
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    mods, sources, experiments = json.loads(proc.stdout.strip().splitlines()[-1])
    assert "swe_rl.train.cli" in mods and "swe_rl.train.openrlhf.actors" in mods and len(mods) > 25
    assert sources == ["generated", "tasks"]  # the trainer's own; toy and decisions are the experiments'
    assert experiments == []


def test_the_swe_rl_command_brings_the_experiments_in():
    # the composition root: `swe-rl train` knows toy/decisions, and demo/compare are commands, from the experiments
    code = (
        "import json, sys, swe_rl.cli as c, swe_rl.train.sources as s\n"
        "names = [x.name or x.callback.__name__ for x in c.app.registered_commands]\n"
        "print(json.dumps([sorted(s.DATA_SOURCES), names, 'torch' in sys.modules]))\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=120
    )
    sources, names, torch = json.loads(out.stdout.strip().splitlines()[-1])
    assert sources == ["decisions", "toy"]  # generated / tasks join when swe_rl.train.run loads, at `train`
    assert {"demo", "compare", "train", "sft"} <= set(names)
    assert torch is False  # registering stays light: `swe-rl --help` imports no torch
