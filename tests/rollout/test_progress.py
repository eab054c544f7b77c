"""Progress output: rich bars on a terminal, plain periodic lines otherwise (CI logs), decided at the process's
real streams."""

from __future__ import annotations

import io
import os
import pty
import subprocess
import sys

from rich.console import Console

from swe_rl.agent.trajectory import Trajectory
from swe_rl.grading.reward import RewardResult
from swe_rl.rollout.progress import EpisodeProgress, RunProgress


def plain_console() -> tuple[Console, io.StringIO]:
    buf = io.StringIO()
    return Console(file=buf, width=200), buf


def test_plain_lines_first_due_logged_and_last():
    con, buf = plain_console()
    with RunProgress(con, every_s=3600) as p:
        a = p.add("held-out greedy", 5, resolved="0")
        for i in range(1, 6):
            p.update(a, advance=1, resolved=str(i // 2), log=i == 3)
        p.finish(a)  # the 5/5 line was just printed: not printed twice
        b = p.add("RL steps", 2, every_s=0)
        p.update(b, completed=1, reward="0.25")
    lines = buf.getvalue().splitlines()
    assert [ln.split(" · elapsed")[0] for ln in lines] == [
        "held-out greedy 1/5 · resolved 0",
        "held-out greedy 3/5 · resolved 1",
        "held-out greedy 5/5 · resolved 2",
        "RL steps 1/2 · reward 0.25",
    ]
    assert "eta" in lines[1] and "eta" not in lines[2]
    assert "\x1b[" not in buf.getvalue()


class FakeClock:
    """Seconds that the test advances: the line interval is checked without sleeping or racing a real clock."""

    def __init__(self) -> None:
        self.t = 1000.0

    def __call__(self) -> float:
        return self.t


def test_plain_lines_at_most_one_per_interval_and_one_at_the_end():
    con, buf = plain_console()
    clock = FakeClock()
    with RunProgress(con, every_s=30, clock=clock) as p:
        a = p.add("rollouts", 100, resolved="0")
        for i in range(1, 101):  # one episode a second for 100 s
            clock.t += 1
            p.update(a, completed=i, resolved=str(i // 3))
        p.finish(a)
    lines = buf.getvalue().splitlines()
    done = [int(ln.split()[1].split("/")[0]) for ln in lines]
    assert done == [1, 31, 61, 91, 100]  # the first update, then every 30 s, then the end


def test_grades_after_the_last_episode_ended_print_no_line_each():
    """The demo's case: a rollout phase reaches 64/64 when the last sandbox is given back, then each of the 64
    grades updates it; only the end of the phase prints (was: one near-identical line per graded episode)."""
    from swe_rl.train.progress import EpisodeTally, ProgressRollouter

    class Inner:  # reports to the tally in the real rollouter's order: every episode ends, then grades arrive
        def rollout(self, tasks, n, seed):
            for _ in range(len(tasks) * n):
                tally.tell("done")
            for _ in range(len(tasks) * n):
                clock.t += 0.1
                tally.tell("graded", RewardResult(reward=1.0, resolved=True))
            return [Trajectory(t, resolved=True, reward=1.0) for t in tasks for _ in range(n)]

    con, buf = plain_console()
    clock, tally = FakeClock(), EpisodeTally()
    with RunProgress(con, every_s=30, clock=clock) as bars:
        ProgressRollouter(Inner(), bars, "rollouts", tally).rollout(["t"] * 8, 8, 0)
    assert [ln.split(" · elapsed")[0] for ln in buf.getvalue().splitlines()] == [
        "rollouts 1/64 · resolved 0", "rollouts 64/64 · resolved 64 (100%)",
    ]  # fmt: skip


def test_bars_on_a_terminal_and_finished_phases_as_lines():
    buf = io.StringIO()
    con = Console(file=buf, force_terminal=True, width=160)
    with RunProgress(con) as p:
        steps = p.add("RL steps", 3, every_s=0)
        roll = p.add("rollouts", 4, resolved="0")
        p.update(roll, completed=4, resolved="3")
        p.finish(roll)
        p.update(steps, completed=1, reward="0.50", log=True)
    out = buf.getvalue()
    assert p.live and "━" in out and "\x1b[" in out  # a drawn bar
    assert "rollouts 4/4 · resolved 3" in out and "RL steps 1/3 · reward 0.50" in out


def test_episode_progress_counts_resolved_and_errors():
    con, buf = plain_console()
    trajs = [
        Trajectory("a", resolved=True, reward=1.0, exit_status="submitted"),
        Trajectory("b", reward=None, exit_status="error", error="boom"),
    ]
    with EpisodeProgress(2, console=con) as bar:
        for t in trajs:
            bar.advance(t)
    assert buf.getvalue().splitlines()[-1].startswith("rollouts 2/2 · resolved 1 · errors 1 · elapsed")


SCRIPT = """
from swe_rl.rollout.progress import RunProgress
print("stdout line", flush=True)
with RunProgress() as p:
    i = p.add("demo", 3, every_s=0)
    for k in range(3):
        p.update(i, advance=1, k=str(k))
"""


def test_terminal_detection_at_the_process_streams():
    piped = subprocess.run([sys.executable, "-c", SCRIPT], capture_output=True, text=True, check=True)
    assert piped.stdout == "stdout line\n"  # a live display would have moved this to stderr
    assert [ln.split(" · elapsed")[0] for ln in piped.stderr.splitlines()] == [
        "demo 1/3 · k 0", "demo 2/3 · k 1", "demo 3/3 · k 2",
    ]  # fmt: skip

    leader, follower = pty.openpty()  # a real terminal on stdout and stderr
    proc = subprocess.Popen([sys.executable, "-c", SCRIPT], stdout=follower, stderr=follower)
    os.close(follower)
    chunks = []
    while True:
        try:
            data = os.read(leader, 4096)
        except OSError:  # EIO: the child closed the terminal
            break
        if not data:
            break
        chunks.append(data)
    os.close(leader)
    assert proc.wait(timeout=60) == 0
    out = b"".join(chunks).decode(errors="replace")
    assert "━" in out and "\x1b[" in out and "stdout line" in out
