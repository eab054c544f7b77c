"""Helpers of the cluster tests: the eval command line as users type it, and what ran where (the GCS actor table)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[2]
SWE_RL = ".venv/bin/swe-rl"  # relative to the repo root, as users run it


def eval_cmd(tmp: Path, name: str, *args: str) -> list[str]:
    """`swe-rl eval -c configs/eval/micro.yaml` (the scripted gold policy) into tmp/runs/<name>."""
    out = ["--output-dir", str(tmp / "runs"), "--name", name, "pool.progress=false"]
    return [SWE_RL, "eval", "-c", "configs/eval/micro.yaml", *out, *args]


def trajectory_files(tmp: Path, name: str) -> list[Path]:
    return sorted((tmp / "runs" / name / "trajectories").rglob("*.json"))


def new_actors(cluster: Any, before: set[str]) -> dict[str, dict[str, Any]]:
    """Actors the cluster's GCS knows (alive or dead) whose id is not in `before`."""
    table = cluster.cluster.global_state.actor_table(None)
    return {aid: a for aid, a in table.items() if aid not in before}


def actors_by_class(cluster: Any, actors: dict[str, dict[str, Any]]) -> dict[str, list[dict[str, Any]]]:
    out: dict[str, list[dict[str, Any]]] = {}
    for a in actors.values():
        out.setdefault(a["ActorClassName"], []).append({"node": a["Address"]["NodeID"], "state": a["State"]})
    return out
