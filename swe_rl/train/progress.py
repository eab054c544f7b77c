"""What the trainer shows while it runs (`swe-rl train`, `swe-rl demo`): a bar of RL steps (reward, resolve rate,
step time, held-out success) and a bar per rollout call (training rollouts, held-out greedy / sampled) advanced
per finished episode, on swe_rl.rollout.progress.RunProgress (plain lines when not on a terminal).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from swe_rl.agent.trajectory import Trajectory
from swe_rl.grading import RewardResult
from swe_rl.tasks.task import Task
from swe_rl.train.env import CachedGrader


class EpisodeTally:
    """The listener of the running rollout call (one runs at a time): `listener("done", None)` when an episode
    gives its sandbox back, `listener("graded", result)` when the grader scores a patch."""

    def __init__(self) -> None:
        self.listener: Callable[[str, RewardResult | None], None] | None = None

    def tell(self, event: str, result: RewardResult | None = None) -> None:
        if self.listener is not None:
            self.listener(event, result)


class CountingSlots:
    """SandboxSlots as the agent's sandbox factory: a lease's exit (the episode is over, error or not) is counted.
    Everything else is the slots' own; the grader keeps the plain slots, so its leases are not counted."""

    def __init__(self, slots: Any, tally: EpisodeTally):
        self.slots, self.tally = slots, tally

    def __getattr__(self, name: str) -> Any:
        return getattr(self.slots, name)

    def lease(self, task: Task) -> _CountedLease:
        return _CountedLease(self.slots.lease(task), self.tally)


class _CountedLease:
    def __init__(self, lease: Any, tally: EpisodeTally):
        self.lease, self.tally = lease, tally

    async def __aenter__(self) -> Any:
        return await self.lease.__aenter__()

    async def __aexit__(self, *exc: Any) -> None:
        try:
            await self.lease.__aexit__(*exc)
        finally:
            self.tally.tell("done")


@dataclass
class CountingGrader(CachedGrader):
    """CachedGrader that tells `tally` every result (cache hits included); empty patches never reach a grader."""

    tally: EpisodeTally | None = None

    async def __call__(self, task: Task, patch: str) -> RewardResult:
        res = await super().__call__(task, patch)
        if self.tally is not None:
            self.tally.tell("graded", res)
        return res


class ProgressRollouter:
    """Wraps a Rollouter: each `rollout` call is a phase of `bars` named `label`, counted per finished episode
    (and resolved ones) through `tally` when the inner rollouter reports to one, else completed when it returns.
    `with_temperature` (the held-out evaluator's entry) names its phases "<label> greedy" / "<label> T=<t>".
    Other attributes (`stats`, `agent_cfg` ...) are the inner rollouter's."""

    def __init__(self, inner: Any, bars: Any, label: str = "rollouts", tally: EpisodeTally | None = None):
        self.inner, self.bars, self.label, self.tally = inner, bars, label, tally

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)

    def with_temperature(self, temperature: float) -> ProgressRollouter:
        mode = "greedy" if temperature == 0 else f"T={temperature:g}"
        inner = self.inner.with_temperature(temperature)
        return ProgressRollouter(inner, self.bars, f"{self.label} {mode}", self.tally)

    def rollout(self, tasks: list[Task], n: int, seed: int) -> list[Trajectory]:
        total = len(tasks) * n
        pid = self.bars.add(self.label, total, resolved="0")
        done = resolved = 0

        def listen(event: str, res: RewardResult | None) -> None:
            nonlocal done, resolved
            done += event == "done"
            resolved += int(event == "graded" and res is not None and bool(res.resolved))
            self.bars.update(pid, completed=min(done, total), resolved=str(resolved))

        if self.tally is not None:
            self.tally.listener = listen
        try:
            trajs = self.inner.rollout(tasks, n, seed)
        finally:
            if self.tally is not None:
                self.tally.listener = None
        ok = sum(bool(t.resolved) for t in trajs)
        self.bars.update(pid, completed=len(trajs), resolved=f"{ok} ({ok / max(len(trajs), 1):.0%})")
        self.bars.finish(pid)
        return trajs


def resumed_step(checkpoints: Path, resume: bool) -> int:
    """The step a run starts after: its newest checkpoint's when resuming, else 0."""
    from swe_rl.train.checkpoint import latest

    ck = latest(checkpoints) if resume else None
    return int(ck.name.removeprefix("step_")) if ck is not None else 0


def step_progress(bars: Any, steps: int, start: int = 0) -> Callable[[int, dict[str, Any]], None]:
    """A bar of RL steps for `train(on_step=...)` (from `start`, a resumed run's step); each step also prints a
    line (above the bars on a terminal)."""
    pid = bars.add("RL steps", steps, completed=start, every_s=0)
    shown_scored: list[bool] = []

    def on_step(step: int, m: dict[str, Any]) -> None:
        fields = {
            "reward": f"{m.get('reward_mean', 0.0):.2f}",
            "resolved": f"{m.get('resolve_rate', 0.0):.0%}",
            "step": f"{m.get('time_step_s', 0.0):.0f}s",
        }
        # episodes without a reward (infrastructure, grading) are said, not hidden: from the first such step on
        # (a bar keeps its fields), every step shows its scored share
        if m.get("valid_frac", 1.0) < 1.0 or shown_scored:
            fields["scored"] = f"{m.get('valid_frac', 1.0):.0%}"
            shown_scored.append(True)
        if "eval/greedy_success" in m:
            fields["held-out"] = f"{m['eval/greedy_success']:.0%}"
        bars.update(pid, completed=step, log=True, **fields)

    return on_step
