"""dockerd restarted in the middle of an evaluation (slow: ~1-2 min).

The engine restarted here is a real dockerd of its own (own socket, data root and containerd), started by this
test, so the machine's shared engine, which other test sessions use at the same time, is never disturbed. The
base image is copied into it with `docker save | docker load`; the harness builds the task images there. All
of this process's Docker traffic goes to it through DOCKER_HOST.

What must hold: the episodes in flight when the engine goes away come back as labelled infrastructure failures
(reward None), the run returns, a rerun with retry_errors runs only those (nothing already finished is run or
written again) and completes the evaluation, and no container is left on the engine. "Those" are episodes that
ended in an error and episodes whose grading hit the outage (a sandbox that died or did not start, twice).
"""

from __future__ import annotations

import contextlib
import os
import shutil
import subprocess
import tempfile
import threading
import time
from pathlib import Path

import pytest

pytestmark = [pytest.mark.docker, pytest.mark.slow]

BASE = os.environ.get("SANDBOXES_TEST_IMAGE", "swe-rl/base:bookworm")


class PrivateDockerd:
    """A dockerd under `root` (own socket, data root, exec root, containerd, bridge); start, stop, restart.

    It gets a bridge of its own, made here: `--bridge=none` would make dockerd delete the host's docker0 at start
    (moby's removeDefaultBridgeInterface), breaking the shared engine's default network for everyone."""

    def __init__(self, root: str) -> None:
        self.root = root
        self.host = f"unix://{root}/docker.sock"
        self.proc: subprocess.Popen | None = None
        self.log = open(os.path.join(root, "dockerd.log"), "ab")  # noqa: SIM115 (closed in close())
        self.bridge = f"sbxd{os.getpid() % 100000}"  # <= 15 characters, unique per test process
        subprocess.run(["ip", "link", "delete", self.bridge], capture_output=True)  # a crashed run's, if any
        subprocess.run(
            ["ip", "link", "add", "name", self.bridge, "type", "bridge"], check=True, capture_output=True
        )
        subprocess.run(["ip", "addr", "add", "10.213.77.1/24", "dev", self.bridge], check=True)

    def start(self, timeout: float = 60) -> None:
        argv = ["dockerd", "-H", self.host, "--data-root", f"{self.root}/data", "--exec-root", f"{self.root}/x",
                "--pidfile", f"{self.root}/dockerd.pid", f"--bridge={self.bridge}", "--iptables=false",
                "--ip6tables=false", "--ip-masq=false"]  # fmt: skip
        self.proc = subprocess.Popen(argv, stdout=self.log, stderr=self.log, start_new_session=True)
        deadline = time.monotonic() + timeout
        while not self.up():
            assert self.proc.poll() is None and time.monotonic() < deadline, self.tail()
            time.sleep(0.2)

    def up(self) -> bool:
        env = os.environ | {"DOCKER_HOST": self.host}
        return subprocess.run(["docker", "info"], env=env, capture_output=True).returncode == 0

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()  # what `systemctl restart docker` does: containers are stopped with it
            self.proc.wait(timeout=120)

    def restart(self) -> None:
        self.stop()
        self.start()

    def tail(self) -> str:
        return Path(self.root, "dockerd.log").read_text(errors="replace")[-3000:]

    def close(self) -> None:
        self.stop()
        self.log.close()
        subprocess.run(["ip", "link", "delete", self.bridge], capture_output=True)
        mounted = any(self.root in line for line in Path("/proc/mounts").read_text().splitlines())
        if not mounted:  # never delete below a live mount
            shutil.rmtree(self.root, ignore_errors=True)


@pytest.fixture
def private_dockerd(monkeypatch):
    if shutil.which("dockerd") is None or shutil.which("ip") is None:
        pytest.skip("dockerd or iproute2 is not installed")
    had_docker0 = _link_exists("docker0")
    d = PrivateDockerd(tempfile.mkdtemp(prefix="sbxd-", dir="/tmp"))  # short: unix socket paths are limited
    try:
        d.start()
        env = os.environ | {"DOCKER_HOST": d.host}
        save = subprocess.Popen(["docker", "save", BASE], stdout=subprocess.PIPE)
        subprocess.run(["docker", "load", "-q"], stdin=save.stdout, env=env, check=True, capture_output=True)
        assert save.wait() == 0
        monkeypatch.setenv("DOCKER_HOST", d.host)
        yield d
    finally:
        d.close()
    assert _link_exists("docker0") == had_docker0, "the shared engine's bridge changed"


def _link_exists(name: str) -> bool:
    return subprocess.run(["ip", "link", "show", name], capture_output=True).returncode == 0


def test_dockerd_restart_mid_evaluation(private_dockerd, eval_config_factory, tmp_path):
    from sandboxes.docker_sandbox import docker_client
    from sandboxes.lifecycle import list_managed
    from swe_rl.evaluation.harness import run_eval

    # The gold policy's test run marks its sandbox and takes a few seconds: a watcher restarts the engine the
    # moment it sees an agent in the middle of its episode.
    test_cmd = "touch /tmp/in_flight; sleep 6; python3 -m pytest -q"
    overrides = ["dataset.limit=2", "runs=3", "pool.backend=local", "pool.num_actors=1",
                 "pool.episodes_per_actor=3", "sandbox.backend=docker", "sandbox.start_backoff=0.5",
                 "policy.kind=scripted", f"policy.test_command={test_cmd}"]  # fmt: skip
    cfg = eval_config_factory(tmp_path, "restart", *overrides)
    client = docker_client()
    restarted = threading.Event()

    def restart_mid_episode() -> None:
        deadline = time.monotonic() + 300
        while time.monotonic() < deadline:
            for c in list_managed(client, run_id=f"eval-{cfg.name}"):
                with contextlib.suppress(Exception):
                    if client.containers.get(c.id).exec_run(["test", "-f", "/tmp/in_flight"]).exit_code == 0:
                        private_dockerd.restart()
                        restarted.set()
                        return
            time.sleep(0.2)

    watcher = threading.Thread(target=restart_mid_episode, daemon=True)
    seen: list = []
    t0 = time.monotonic()
    watcher.start()
    first = run_eval(cfg, lambda traj, pool: seen.append(traj))
    watcher.join(timeout=120)
    assert restarted.is_set(), "no agent was seen mid-episode"
    took = time.monotonic() - t0
    run = Path(cfg.output_dir) / cfg.name
    failed = [t for t in seen if t.reward is None]
    assert failed, "the restart hit no episode in flight"
    for t in failed:  # labelled: an error trajectory with its sandbox error's label, or the grader's label
        if t.exit_status == "error":
            assert t.error and t.metrics["infra_failure"].startswith(("sandbox_", "engine_")), t.error
        else:
            assert (t.metrics.get("grading") or {}).get("failure"), t.metrics
    assert all(t.resolved for t in seen if t.reward is not None)
    assert first["counts"]["infra_failure"] == len(failed) and first["counts"]["resolved"] == 6 - len(failed)
    assert list_managed(client, run_id=f"eval-{cfg.name}") == []

    done = {p: p.stat().st_mtime_ns for p in run.glob("trajectories/run_*/*.json")}
    rerun: list = []
    second = run_eval(cfg.model_copy(update={"retry_errors": True}), lambda traj, pool: rerun.append(traj))
    from swe_rl.grading.grader import TRANSIENT_FAILURES

    transient = [
        t for t in failed if t.exit_status == "error" or t.metrics["grading"]["failure"] in TRANSIENT_FAILURES
    ]
    errored = {(t.task_id, t.sample_idx) for t in transient}
    assert {(t.task_id, t.sample_idx) for t in rerun} == errored  # only what was missing ran again
    untouched = {p: p.stat().st_mtime_ns for p in done if p.exists()}
    rewritten = [p for p in done if untouched.get(p) != done[p]]
    assert len(rewritten) == len(errored)
    assert all(t.reward is not None for t in rerun), [t.error for t in rerun]
    assert list_managed(client, run_id=f"eval-{cfg.name}") == []
    assert second["complete"] and second["counts"]["resolved"] == 6, second["counts"]
    why = [t.metrics.get("infra_failure") or t.metrics["grading"]["failure"] for t in failed]
    print(f"first run {took:.0f}s: {len(failed)} of 6 episodes hit by the restart {why}; rerun ran {len(rerun)}; "
          f"resolved {first['counts']['resolved']} -> {second['counts']['resolved']}")  # fmt: skip
