"""Commands whose every step needs this host's Docker engine stop with one error naming it when none answers, before
the first grading or episode (they ran on: `swe-rl grade` counted one infrastructure failure per instance after
5 s of retries each, `swe-rl eval` ran and reported every episode). The engine is the real Docker client pointed,
through DOCKER_HOST, at a socket where nothing listens; the commands run from the repository root as users run
them, with the bundled micro suite."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
SWE_RL = str(Path(sys.executable).with_name("swe-rl"))
ONE = "swe-rl-micro__confini-1"


@pytest.mark.parametrize(
    "argv",
    [
        ["grade", "--tasks", "micro", "--predictions", "gold", "--out", "{tmp}/g", "--id", ONE],
        ["tasks", "validate", "--tasks", "micro", "--id", ONE],
        ["eval", "-c", "configs/eval/micro.yaml", "-i", ONE, "--output-dir", "{tmp}/e", "pool.backend=local",
         "pool.episodes_per_actor=1"],
    ],
    ids=["grade", "validate", "eval"],
)  # fmt: skip
def test_no_docker_engine_is_one_error_before_any_work(argv, tmp_path):
    sock = tmp_path / "nothing-listens.sock"
    env = {**os.environ, "DOCKER_HOST": f"unix://{sock}"}
    args = [a.replace("{tmp}", str(tmp_path)) for a in argv]
    res = subprocess.run([SWE_RL, *args], cwd=REPO, env=env, capture_output=True, text=True, timeout=300)
    assert res.returncode == 1, res.stdout[-2000:] + res.stderr[-2000:]
    err = [x for x in res.stderr.splitlines() if x.startswith("error: ")]
    assert len(err) == 1 and f"Docker engine at unix://{sock} is unreachable" in err[0], res.stderr[-2000:]
    assert "Traceback" not in res.stderr
    assert not (tmp_path / "g" / ONE).exists()  # no grading record
    assert not [
        p for p in (tmp_path / "e").rglob("*") if p.is_file() and "trajectories" in p.parts
    ]  # no episode
