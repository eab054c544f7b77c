"""Read a run folder for the viewer, never writing to it: which kind of run it is, where its episodes are, and each
episode as one `Episode` (what a page shows). Three kinds, by what the folder holds:

    eval   swe-rl eval:   trajectories/run_NN/<id>.json (+ grading/run_NN/<id>.json), config.yaml
    train  swe-rl train:  metrics.jsonl, trajectories/step_NNNNNN.jsonl, eval_episodes/step_NNNNNN.jsonl
    grade  swe-rl grade:  <instance>/{report.json | failure.json, patch.diff, test_output.txt}, summary.json

A run still being written is read as far as it is: an episode file not there yet is not shown, a JSONL line cut
mid-write (a run killed, or one writing it now) is left out with one warning naming the file and the line.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

KINDS = ("eval", "train", "grade")
_RUN_DIR = re.compile(r"run_(\d+)$")
_STEP_FILE = re.compile(r"step_(\d+)\.jsonl$")
_UNSAFE = re.compile(r"[^A-Za-z0-9._-]")
_SWEBENCH_ID = re.compile(r"^(.+?)__(.+)-\d+$")  # owner__repo-NNNN: SWE-bench's instance ids


class NotARun(ValueError):
    """The folder is not a run the viewer can show (one line, naming the folder and what was expected)."""


@dataclass
class Source:
    """Where one episode is read from: files relative to the run root, and how (`how` names a reader)."""

    key: str  # page path under view/episodes/, without .html
    how: str  # "eval" | "train_line" | "heldout_line" | "grade"
    files: tuple[str, ...]  # relative paths (the first is the episode's own file)
    line: int = 0  # JSONL line number (1-based) for line readers
    step: int | None = None
    sample: int = 0
    extra: dict[str, Any] = field(default_factory=dict)


@dataclass
class RunInfo:
    root: Path
    kind: str
    name: str
    config: dict[str, Any]
    sources: list[Source]
    warnings: list[str]
    metrics: list[dict[str, Any]] = field(default_factory=list)  # training: metrics.jsonl rows
    summary: dict[str, Any] = field(default_factory=dict)  # grade: summary.json
    problems: dict[str, str] = field(default_factory=dict)  # instance -> problem statement (view --tasks)


def safe_key(name: str) -> str:
    """A file name for a page (instance ids are mostly safe already)."""
    return _UNSAFE.sub("_", name)


def repo_of(instance_id: str, fallback: str = "") -> str:
    """owner/repo from a SWE-bench style id (the micro suite's ids follow it too); else `fallback`."""
    m = _SWEBENCH_ID.match(instance_id)
    return f"{m.group(1)}/{m.group(2)}" if m else fallback


def read_jsonl(path: Path, root: Path, warnings: list[str]) -> Iterator[tuple[int, dict[str, Any]]]:
    """(line number, object) of each good line; a bad line is left out with one warning naming it."""
    try:
        text = path.read_text(errors="replace")
    except OSError as e:
        warnings.append(f"{path.relative_to(root)}: unreadable ({e.strerror})")
        return
    lines = text.split("\n")
    for n, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            obj = json.loads(line)
        except json.JSONDecodeError:
            last = n == len(lines) and not text.endswith("\n")
            why = "cut off mid-write (the run was killed, or is writing it now)" if last else "not valid JSON"
            warnings.append(
                f"{path.relative_to(root)}:{n}: a truncated JSON line, {why}; that line is left out"
            )
            continue
        if isinstance(obj, dict):
            yield n, obj
        else:
            warnings.append(f"{path.relative_to(root)}:{n}: expected a JSON object, got {type(obj).__name__}")


def _yaml(path: Path) -> dict[str, Any]:
    try:
        data = yaml.safe_load(path.read_text()) if path.is_file() else None
    except (OSError, yaml.YAMLError):
        return {}
    return data if isinstance(data, dict) else {}


def detect_kind(root: Path) -> str:
    if not root.exists():
        raise NotARun(f"{root}: no such folder")
    if not root.is_dir():
        raise NotARun(f"{root}: not a folder (RUN_DIR is a run's folder, e.g. runs/<name>)")
    kind = _kind_of(root)
    if kind is not None:
        return kind
    inside = _runs_inside(root)
    if inside:  # e.g. swe-rl demo's folder: its training run and its evaluations are runs of their own
        raise NotARun(f"{root}: not a run folder itself; the runs in it: {', '.join(str(p) for p in inside)}")
    raise NotARun(
        f"{root}: not a run folder: expected an evaluation run (trajectories/run_NN/ from swe-rl eval), a "
        "training run (metrics.jsonl, trajectories/step_*.jsonl from swe-rl train) or a swe-rl grade output "
        "(summary.json, <instance>/report.json)"
    )


def _kind_of(root: Path) -> str | None:
    traj = root / "trajectories"
    if any(p.is_dir() and _RUN_DIR.match(p.name) for p in _ls(traj)):
        return "eval"
    if any(_STEP_FILE.match(p.name) for p in _ls(traj)) or (root / "metrics.jsonl").is_file():
        return "train"
    if (root / "eval_episodes").is_dir():
        return "train"
    if (root / "summary.json").is_file() or any(_grade_dir(p) for p in _ls(root)):
        return "grade"
    return None


def _runs_inside(root: Path, depth: int = 2) -> list[Path]:
    """Run folders up to `depth` levels below `root` (at most 10, in name order)."""
    found: list[Path] = []
    for d in _ls(root):
        if len(found) >= 10:
            break
        if d.is_dir() and d.name != "view":
            found += [d] if _kind_of(d) else _runs_inside(d, depth - 1) if depth > 1 else []
    return found[:10]


def _ls(d: Path) -> list[Path]:
    try:
        return sorted(p for p in d.iterdir() if not p.name.startswith("."))
    except OSError:
        return []


def _grade_dir(d: Path) -> bool:
    """swe-rl grade's <instance>/ folder: the graded patch and a report (or an infrastructure failure)."""
    has_result = (d / "report.json").is_file() or (d / "failure.json").is_file()
    return d.is_dir() and has_result and (d / "patch.diff").is_file()


def scan(root: str | Path) -> RunInfo:
    """The run's kind, config and the list of its episodes (cheap: no episode is parsed here)."""
    root = Path(root)
    kind = detect_kind(root)
    warnings: list[str] = []
    config = _yaml(root / "config.yaml")
    info = RunInfo(root, kind, str(config.get("name") or root.resolve().name), config, [], warnings)
    if kind == "eval":
        info.sources = _eval_sources(root)
    elif kind == "train":
        info.sources, info.metrics = _train_sources(root, config, warnings)
    else:
        info.sources, info.summary = _grade_sources(root, warnings)
    return info


def _eval_sources(root: Path) -> list[Source]:
    out = []
    for d in _ls(root / "trajectories"):
        m = _RUN_DIR.match(d.name)
        if not (m and d.is_dir()):
            continue
        for f in _ls(d):
            if f.suffix == ".json":
                rel = f"trajectories/{d.name}/{f.name}"
                out.append(Source(f"{d.name}/{f.stem}", "eval", (rel, f"grading/{d.name}/{f.name}"),
                                  sample=int(m.group(1))))  # fmt: skip
    return out


def _train_sources(root: Path, config: dict[str, Any], warnings: list[str]):
    n = int((config.get("rollout") or {}).get("n_samples") or 1)  # records are task-major, n per task
    out = []
    for sub, how in (("trajectories", "train_line"), ("eval_episodes", "heldout_line")):
        for f in _ls(root / sub):
            m = _STEP_FILE.match(f.name)
            if not m:
                continue
            step = int(m.group(1))
            for i, (line, rec) in enumerate(read_jsonl(f, root, warnings)):
                sample = int(rec.get("sample", i % n if how == "train_line" else 0))
                tag = "step" if how == "train_line" else f"heldout_{rec.get('mode') or 'eval'}"
                key = f"{tag}_{step:06d}/{i:04d}"
                out.append(Source(key, how, (f"{sub}/{f.name}",), line, step, sample))
    metrics = [row for _, row in read_jsonl(root / "metrics.jsonl", root, warnings)] if (
        root / "metrics.jsonl").is_file() else []  # fmt: skip
    return out, metrics


def _grade_sources(root: Path, warnings: list[str]):
    summary: dict[str, Any] = {}
    if (root / "summary.json").is_file():
        try:
            summary = json.loads((root / "summary.json").read_text())
        except (OSError, json.JSONDecodeError) as e:
            warnings.append(f"summary.json: unreadable ({e}); counts come from the instance folders")
    out = [
        Source(f"graded/{safe_key(d.name)}", "grade", tuple(f"{d.name}/{n}" for n in ("report.json", "failure.json", "patch.diff",
                                                                 "test_output.txt")))
        for d in _ls(root) if _grade_dir(d)
    ]  # fmt: skip
    for iid in summary.get("empty_patch_ids") or []:  # swe-rl grade runs nothing for these: no folder
        if not (root / iid).is_dir():
            out.append(Source(f"graded/{safe_key(iid)}", "grade", (), extra={"empty_patch": True, "id": iid}))
    return out, summary
