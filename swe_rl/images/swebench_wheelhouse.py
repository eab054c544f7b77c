"""`swe-rl images wheelhouse`: the PyPI wheels every instance of an inputs folder needs, for each instance's
Python, filled into the cache outside the repository (~/.cache/swe-rl: locks/ and wheels/) on a machine that reaches
PyPI, or checked there without network (`check=True`). It plans each instance's env exactly as the image builder does
(swebench_build.py: same overrides, same lock keys), so a filled cache lets `swe-rl images build` run offline: what
a user preparing an air-gapped cluster runs on a connected machine before copying the cache over. An env whose
Python the inputs' own wheels/ is built for needs nothing from PyPI. Sdists (no wheel for that Python on PyPI) are
kept as sdists and built into wheels in the env image, offline, by pip."""

from __future__ import annotations

import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from swe_rl.images.swebench_build import Progress, Session, open_inputs, plan_instance
from swe_rl.images.swebench_images import ImageInputError, Instance, source_sha256
from swe_rl.images.swebench_stage import StagedSource
from swe_rl.images.swebench_wheels import cache_dir


@dataclass
class Filled:
    instance_id: str
    status: str  # "ok" | "failed"
    wheels_from: str = ""  # "pypi" | "inputs"
    files: int = 0  # files the env's wheelhouse holds
    sdists: int = 0  # of them, sdists pip builds in the image
    downloaded: int = 0  # fetched from PyPI by this run
    downloaded_bytes: int = 0
    seconds: float = 0.0
    error: str = ""


def _cached() -> dict[str, int]:
    d = cache_dir() / "wheels"
    return {p.name: p.stat().st_size for p in d.iterdir() if p.is_file()} if d.is_dir() else {}


def fill_one(inst: Instance, s: Session) -> Filled:
    t0, before = time.monotonic(), _cached()
    try:
        with tempfile.TemporaryDirectory(prefix="swe-rl-wheelhouse-") as tmp:
            src = StagedSource(inst.source, Path(tmp) / "testbed", source_sha256(inst.source))
            env, _, _ = plan_instance(inst, s, src)
    except Exception as e:
        return Filled(
            inst.instance_id, "failed", seconds=time.monotonic() - t0, error=f"{type(e).__name__}: {e}"
        )
    after = _cached()
    new = [n for n in after if before.get(n) != after[n]]
    sdists = sum(1 for w in env.wheels if not w.name.endswith(".whl"))
    return Filled(inst.instance_id, "ok", env.wheels_from, len(env.wheels), sdists, len(new),
                  sum(after[n] for n in new), time.monotonic() - t0)  # fmt: skip


def fill_wheelhouse(inputs: str | Path, ids: list[str] | None = None, *, check: bool = False,
                    progress: Progress | None = None) -> list[Filled]:  # fmt: skip
    """Fill (or with `check`, verify offline) the cached locks and wheels of every (or the named) row; one line
    per instance on stderr. Bad inputs of one row fail that row only, with the reason."""
    s, instances = open_inputs(inputs, ids, progress=progress, offline=check)
    out = []
    for iid, inst in instances:
        if isinstance(inst, ImageInputError):
            out.append(Filled(iid, "failed", error=str(inst)))
        else:
            with s.progress.building(f"wheels of {iid}"):
                out.append(fill_one(inst, s))
        r = out[-1]
        detail = (f"{r.files} files from {r.wheels_from} ({r.sdists} sdists), {r.downloaded} downloaded "
                  f"({r.downloaded_bytes / 2**20:.1f} MiB)") if r.status == "ok" else ""  # fmt: skip
        done = ("checked" if check else "filled") if r.status == "ok" else "failed"
        s.progress.line(f"wheels {iid}: {detail}", done, r.seconds, r.error)
    return out
