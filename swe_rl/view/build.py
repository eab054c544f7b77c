"""`build_site(run_dir)`: write the static site into <run>/view/ (or `out`), touching nothing else of the run.

view/index.html, view/index-data.js (one row per episode), view/episodes/<group>/<name>.html (one page per
episode), view/assets/ (stylesheet, the index's script), view/.manifest.json (what each page was built from).
A rerun renders again only the pages whose files changed (size or mtime), drops the pages of episodes that are
gone, and rewrites the index: a run still being written can be viewed and refreshed. Each file is written to a
temporary name and renamed, so a browser reading the site during a rebuild sees whole files.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from swe_rl.evaluation.report import Episode as ReportEpisode
from swe_rl.view.episode import ROW_COLUMNS, Episode, load_episode
from swe_rl.view.episode_page import render_episode
from swe_rl.view.index_page import data_js, render_index, summary
from swe_rl.view.load import RunInfo, Source, scan

ASSETS = Path(__file__).with_name("assets")


def _code_digest() -> str:
    """The viewer's own code: a manifest made by other code renders every page again."""
    h = hashlib.sha256()
    for f in sorted(Path(__file__).parent.glob("*.py")):
        h.update(f.read_bytes())
    return h.hexdigest()[:16]


@dataclass
class BuildResult:
    view: Path
    episodes: int
    rendered: int  # pages written this time (the others were up to date)
    warnings: list[str]
    seconds: float
    report: dict[str, Any]


def atomic_write(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    tmp.write_text(text)
    os.replace(tmp, path)


def _signature(root: Path, src: Source) -> list[Any]:
    sig: list[Any] = [src.line]
    for rel in src.files:
        try:
            st = (root / rel).stat()
            sig.append([rel, st.st_mtime_ns, st.st_size])
        except OSError:
            sig.append([rel, None])
    return sig


def _report_episode(ep: Episode) -> dict[str, Any]:
    """The report's view of an episode; a training run's are grouped by kind (steps, held-out greedy/sampled)
    where an evaluation's are by repository, and only infrastructure failures carry a failure label."""
    group = ep.repo if ep.kind in ("eval", "grade") else f"{ep.kind} {ep.mode}".strip()
    return {"run": ep.sample, "instance_id": ep.instance, "repo": group, "bucket": ep.outcome,
            "exit_status": ep.exit, "steps": ep.steps, "tokens": ep.tokens, "policy_tokens": 0,
            "failure": ep.failure if ep.outcome == "infra_failure" else None, "suspicious": ep.suspicious,
            "patch_caused": ((ep.tests.get("patch_caused") or {}).get("failure")), "error": None,
            "node": ep.node}  # fmt: skip


def _load_manifest(view: Path, code: str) -> dict[str, Any]:
    try:
        data = json.loads((view / ".manifest.json").read_text())
    except (OSError, json.JSONDecodeError):
        return {}
    return data.get("pages", {}) if data.get("code") == code else {}


def build_site(
    run_dir: str | Path,
    out: str | Path | None = None,
    *,
    problems: dict[str, str] | None = None,
    on_page: Callable[[int, int], None] | None = None,
) -> BuildResult:
    """Build (or update) the site of one run; raises load.NotARun for a folder that is not a run. `problems`:
    problem statements by instance id, for runs that keep none (a swe-rl grade output)."""
    t0 = time.monotonic()
    info = scan(run_dir)
    info.problems = problems or {}
    view = Path(out) if out is not None else info.root / "view"
    root_rel = (
        os.path.relpath(info.root.resolve(), (view / "episodes" / "g").resolve()).replace(os.sep, "/") + "/"
    )
    # pages depend on the viewer's code and on the problem statements given (--tasks)
    code = _code_digest() + hashlib.sha256(json.dumps(info.problems, sort_keys=True).encode()).hexdigest()[:8]
    old = _load_manifest(view, code)
    pages, rendered = _pages(info, view, old, root_rel, on_page)
    rows = [p["row"] for p in pages.values()]
    # an episode gone from the run (a folder cleaned, a file renamed): its page goes too
    for key in set(old) - set(pages):
        (view / "episodes" / f"{key}.html").unlink(missing_ok=True)
    report = summary(info, [_as_report(p["report"]) for p in pages.values()])
    _copy_assets(view)
    atomic_write(view / "index-data.js", data_js(ROW_COLUMNS, rows))
    atomic_write(view / "index.html", render_index(info, report, len(rows)))
    atomic_write(view / ".manifest.json", json.dumps({"code": code, "pages": pages}))
    return BuildResult(view, len(rows), rendered, info.warnings, time.monotonic() - t0, report)


def _pages(
    info: RunInfo, view: Path, old: dict[str, Any], root_rel: str, on_page: Callable[[int, int], None] | None
) -> tuple[dict[str, Any], int]:
    """Each episode's manifest entry (signature, index row, report view), rendering the pages that are not up
    to date; the number rendered."""
    pages: dict[str, Any] = {}
    rendered = 0
    cache: dict[str, Any] = {}
    runs_of: dict[str, list[str]] = {}  # an evaluation's instance (file name) -> its pages, one per run
    for src in info.sources:
        if src.how == "eval":
            runs_of.setdefault(src.key.split("/", 1)[1], []).append(src.key)
    for i, src in enumerate(info.sources):
        siblings = [k for k in runs_of.get(src.key.split("/", 1)[-1], []) if k != src.key]
        sig = [*_signature(info.root, src), siblings]
        target = view / "episodes" / f"{src.key}.html"
        prev = old.get(src.key)
        if prev and prev["sig"] == sig and target.is_file():
            pages[src.key] = prev
        else:
            try:
                ep = load_episode(info, src, cache)
            except (ValueError, TypeError, KeyError) as e:  # one unreadable episode: said, the rest is built
                where = src.files[0] if src.files else src.key
                info.warnings.append(f"{where}: left out ({type(e).__name__}: {e})")
                continue
            atomic_write(target, render_episode(ep, info.name, root_rel, siblings))
            pages[src.key] = {"sig": sig, "row": ep.row(), "report": _report_episode(ep)}
            rendered += 1
        if on_page is not None:
            on_page(i + 1, len(info.sources))
    return pages, rendered


def _as_report(d: dict[str, Any]) -> ReportEpisode:
    return ReportEpisode(**{**d, "suspicious": tuple(d["suspicious"])})


def _copy_assets(view: Path) -> None:
    dest = view / "assets"
    dest.mkdir(parents=True, exist_ok=True)
    for f in ASSETS.iterdir():
        if f.is_file() and not f.name.startswith("."):
            shutil.copyfile(f, dest / f.name)
