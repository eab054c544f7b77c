"""The real pipeline for generated micro tasks, made cheap enough for CPU RL.

- `SandboxSlots`: k long-lived sandboxes (Docker at /testbed by default). A lease resets one to the task's files
  with a single exec (fresh git repo, one commit), so an episode costs no container start. Tools, patch
  extraction and tests run in the container exactly as for any task.
- `CachedGrader`: the reward. Applies the patch in a slot, writes the task's test files, runs `eval_script`,
  parses the log with swebench's pytest parser and checks FAIL_TO_PASS / PASS_TO_PASS. Results are shared by
  (task, image, normalised patch), concurrent duplicates included (swe_rl.grading.dedup): grading is
  deterministic and many samples of one task end with the same patch.
- `PipelineRollouter`: the trainer's Rollouter over swe_rl.rollout's EpisodeContext (rollout_one: the agent's
  run_episode + grading, one exception boundary per episode), with the policy shared with the learner.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import secrets
import shlex
from dataclasses import dataclass, field
from typing import Any, cast

from swe_rl.agent.config import AgentConfig
from swe_rl.agent.trajectory import Trajectory
from swe_rl.grading import DedupGrader, RewardResult, apply_under_guard, label_suspicious, log_violations
from swe_rl.tasks.task import Task


def _write_cmd(path: str, text: str) -> str:
    b64 = base64.b64encode(text.encode()).decode()
    return f"printf %s {b64} | base64 -d > {shlex.quote(path)}"


def reset_script(task: Task, repo_dir: str) -> str:
    """Shell that makes repo_dir a fresh one-commit git repo holding the task's files (metadata['files'])."""
    files = task.metadata.get("files")
    if not isinstance(files, dict) or not files:
        raise ValueError(f"task {task.instance_id}: metadata['files'] must map repo paths to file text")
    q = shlex.quote(repo_dir)
    parts = [f"rm -rf {q} && mkdir -p {q} && cd {q} && git init -q"]
    parts += [_write_cmd(p, t) for p, t in files.items()]
    parts.append("git add -A && git -c user.name=swe-rl -c user.email=swe-rl@local commit -qm base")
    return " && ".join(parts)


class SlotsUnavailable(RuntimeError):
    """The sandbox slots could not be started before training (a missing image, no engine, a repo folder this user
    cannot write): one message, raised before the first episode."""


def repo_dir_check(repo_dir: str) -> str:
    """Shell that exits 0 where this user can remove and re-create `repo_dir` as a git repository (what every
    lease's reset does); else exit 4 without git, or exit 3 printing the folder it cannot write and this user's id."""
    d = shlex.quote(repo_dir.rstrip("/") or "/")
    return (
        "command -v git >/dev/null 2>&1 || exit 4; "
        f'p=$(dirname {d}); mkdir -p "$p" 2>/dev/null && [ -w "$p" ] && {{ [ ! -e {d} ] || [ -w {d} ]; }} && exit 0; '
        f'[ -w "$p" ] && echo {d} || echo "$p"; id -u; exit 3'
    )


class SandboxSlots:
    """k reusable sandboxes; `lease(task)` is a SandboxFactory for rollout_one (`async with` enters a slot)."""

    def __init__(self, k: int, sandbox_cfg: dict[str, Any] | None = None, repo_dir: str = "/testbed"):
        self.k = k
        self.sandbox_cfg = sandbox_cfg or {"backend": "docker", "image": "swe-rl/base:bookworm"}
        self.repo_dir = repo_dir
        self._free: asyncio.Queue[Any] | None = None
        self._all: list[Any] = []
        self._loop: asyncio.AbstractEventLoop | None = None
        self._lock: tuple[asyncio.AbstractEventLoop, asyncio.Lock] | None = (
            None  # one start at a time, per loop
        )
        # Sandbox shells are asyncio streams bound to one event loop: sync callers (the trainer) run every
        # rollout on this one private loop instead of a fresh asyncio.run() each step.
        self._own_loop: asyncio.AbstractEventLoop | None = None
        self.stats = {"leases": 0, "reset_s": 0.0}
        self.lost_reason = ""  # why the last dead slot could not be renewed
        self.installed: dict[int, set[tuple[str, int, int]]] = {}  # per slot: files written outside the repo

    async def _ensure(self) -> asyncio.Queue[Any]:
        """The queue of free slots on this event loop; the first caller starts the k sandboxes. A start that fails
        raises here, for this lease, and leaves nothing behind: the next lease tries again (it waited on an empty
        queue for ever before)."""
        loop = asyncio.get_running_loop()
        if self._free is not None and self._loop is loop:  # a queue belongs to one event loop
            return self._free
        if self._lock is None or self._lock[0] is not loop:
            self._lock = (loop, asyncio.Lock())
        async with self._lock[1]:
            if self._free is None or self._loop is not loop:
                if not self._all:
                    self._all = await self._start_all()
                free: asyncio.Queue[Any] = asyncio.Queue()
                for b in self._all:
                    free.put_nowait(b)
                self._loop, self._free = loop, free
        return self._free

    async def start(self) -> None:
        """Start the slots now, on the running loop (the trainer's first step would): SlotsUnavailable where they
        cannot start or cannot reset a task's repo, before any episode runs."""
        try:
            await self._ensure()
        except Exception as e:
            backend = self.sandbox_cfg.get("backend", "docker")
            raise SlotsUnavailable(f"sandbox slots (sandbox.backend {backend}): {e}") from e

    async def _start_all(self) -> list[Any]:
        from sandboxes.base import SandboxError
        from sandboxes.config import make_sandbox

        boxes = [make_sandbox(self.sandbox_cfg, run_id="swe-rl-train") for _ in range(self.k)]
        started = await asyncio.gather(*(b.start() for b in boxes), return_exceptions=True)
        failed: list[BaseException] = [e for e in started if isinstance(e, BaseException)]
        if (
            not failed
        ):  # every lease removes and re-creates the repo folder: one that cannot is every episode lost
            checks = await asyncio.gather(*(b.exec(repo_dir_check(self.repo_dir), timeout=60) for b in boxes))
            bad = next((r for r in checks if r.exit_code != 0), None)
            if bad is None:
                return boxes
            where, _, uid = bad.output.strip().partition("\n")
            why = (
                "the sandbox has no `git` (each episode's repo is a fresh git repository: install git, or use an "
                "image with it)"
                if bad.exit_code == 4
                else f"user {uid or '?'} cannot write {where} (each episode removes and re-creates it; the local "
                f"backend does so in this host's own {self.repo_dir}: run as root, or use sandbox.backend docker)"
            )
            failed.append(SandboxError(f"cannot reset the task repo at {self.repo_dir}: {why}"))
        await asyncio.gather(*(b.close() for b in boxes), return_exceptions=True)
        raise failed[0]

    def lease(self, task: Task) -> _Lease:
        return _Lease(self, task)

    async def renew(self, dead: Any) -> Any:
        """A new started sandbox in place of a dead one (a RaySandbox whose node was lost). One that cannot start
        within its startup_timeout (no node takes it) drops the slot: this lease raises, an episode lost as an
        infrastructure failure; with no slot left every lease raises SlotsUnavailable instead of waiting."""
        from sandboxes.config import make_sandbox

        self._all = [b for b in self._all if b is not dead]
        with contextlib.suppress(Exception):
            await dead.close()
        box = make_sandbox(self.sandbox_cfg, run_id="swe-rl-train")
        try:
            await box.start()
        except Exception as e:
            self.lost_reason = f"{type(e).__name__}: {e}"
            if not self._all and self._free is not None:
                self._free.put_nowait(None)
            raise
        self.stats["renewed"] = self.stats.get("renewed", 0) + 1
        self._all.append(box)
        return box

    def run(self, coro: Any) -> Any:
        """Run a coroutine to completion on the slots' private event loop (for sync callers)."""
        if self._own_loop is None or self._own_loop.is_closed():
            self._own_loop = asyncio.new_event_loop()
        return self._own_loop.run_until_complete(coro)

    async def aclose(self) -> None:
        boxes, self._all, self._free = self._all, [], None
        await asyncio.gather(*(b.close() for b in boxes), return_exceptions=True)

    def close(self) -> None:
        """Close the sandboxes (on the loop they were started on) and the private loop."""
        if self._own_loop is not None and not self._own_loop.is_closed():
            self.run(self.aclose())
            self._own_loop.close()
        elif self._all:
            asyncio.run(self.aclose())


@dataclass
class _Lease:
    slots: SandboxSlots
    task: Task
    box: Any = None

    async def __aenter__(self) -> Any:
        from sandboxes.base import SandboxDiedError

        free = await self.slots._ensure()
        self.box = await free.get()
        if self.box is None:  # every slot is gone (their nodes lost, no replacement could start)
            free.put_nowait(None)  # wake the next waiting lease too
            raise SlotsUnavailable(f"sandbox slots: none left; last: {self.slots.lost_reason}")
        loop = asyncio.get_running_loop()
        t0 = loop.time()
        try:
            res = await self.box.exec(reset_script(self.task, self.slots.repo_dir), timeout=60)
        except SandboxDiedError:  # its container's node was lost: a fresh sandbox takes the slot
            self.box = await self.slots.renew(self.box)
            res = await self.box.exec(reset_script(self.task, self.slots.repo_dir), timeout=60)
        self.slots.stats["reset_s"] += loop.time() - t0
        self.slots.stats["leases"] += 1
        if res.exit_code != 0:
            self.slots._free.put_nowait(self.box)  # type: ignore[union-attr]
            from sandboxes.base import SandboxError

            raise SandboxError(f"repo reset failed for {self.task.instance_id}: {res.output[-300:]}")
        return SlotView(self.box, self.slots.repo_dir, self.slots.installed.setdefault(id(self.box), set()))

    async def __aexit__(self, *exc: object) -> None:
        if self.box is not None and self.slots._free is not None:
            self.slots._free.put_nowait(self.box)


class SlotView:
    """What an episode sees of a slot: the sandbox, with small-file I/O through the shell (one exec, ~6 ms in
    Docker, instead of an archive API round trip, ~80 ms) and identical writes outside the repo (the agent's
    tool scripts, installed every episode) skipped after the first one. Everything else is delegated."""

    def __init__(self, box: Any, repo_dir: str, installed: set[tuple[str, int, int]]):
        self._box, self._repo, self._installed = box, repo_dir.rstrip("/") + "/", installed
        self.id = box.id

    def __getattr__(self, name: str) -> Any:
        return getattr(self._box, name)

    async def exec(self, cmd: str, **kw: Any) -> Any:
        return await self._box.exec(cmd, **kw)

    async def write_file(self, path: str, data: bytes | str, *, mode: int = 0o644) -> None:
        raw = data.encode() if isinstance(data, str) else data
        key = (path, hash(raw), mode)
        if not path.startswith(self._repo) and key in self._installed:
            return
        b64 = base64.b64encode(raw).decode()
        q = shlex.quote(path)
        cmd = f'mkdir -p "$(dirname {q})" && printf %s {b64} | base64 -d > {q} && chmod {mode:o} {q}'
        res = await self._box.exec(cmd, timeout=60)
        if res.exit_code != 0 or len(b64) > 100_000:
            await self._box.write_file(path, raw, mode=mode)
        if not path.startswith(self._repo):
            self._installed.add(key)

    async def read_file(self, path: str) -> bytes:
        res = await self._box.exec(f"base64 -w0 {shlex.quote(path)}", timeout=60)
        try:
            if res.exit_code == 0 and not res.timed_out:
                return base64.b64decode(res.output.strip(), validate=True)
        except ValueError:
            pass  # clipped or odd output: use the archive API
        return await self._box.read_file(path)


def _report(task: Task, log: str) -> tuple[bool, dict[str, Any]]:
    """Parse the test log with swebench's pytest parser; resolved = every F2P and P2P test passed."""
    from swebench.harness.log_parsers.python import parse_log_pytest

    status = parse_log_pytest(log, None)  # {test name: "PASSED" | "FAILED" | ...}
    f2p = {t: status.get(t, "MISSING") for t in task.FAIL_TO_PASS}
    p2p = {t: status.get(t, "MISSING") for t in task.PASS_TO_PASS}
    ok = all(v == "PASSED" for v in f2p.values()) and all(v == "PASSED" for v in p2p.values())
    return ok, {"FAIL_TO_PASS": f2p, "PASS_TO_PASS": p2p}


@dataclass
class CachedGrader:
    """RewardFn for generated tasks: real tests in a slot; identical patches (normalised) graded once, also
    when they arrive together (swe_rl.grading.dedup; the generated tasks' tests are deterministic, so the cache
    lives across steps)."""

    slots: SandboxSlots
    exec_s: float = 0.0  # seconds inside test runs (excluding the wait for a free slot)
    dedup: DedupGrader = field(init=False, repr=False)

    def __post_init__(self) -> None:
        self.dedup = DedupGrader(self._grade, max_entries=100_000)

    @property
    def hits(self) -> int:  # gradings an identical patch made unnecessary
        return self.dedup.saved

    @property
    def misses(self) -> int:  # gradings run
        return self.dedup.graded

    async def __call__(self, task: Task, patch: str) -> RewardResult:
        return cast(RewardResult, await self.dedup(task, patch))

    async def _grade(self, task: Task, patch: str) -> RewardResult:
        repo = self.slots.repo_dir
        # the test files end by printing a fresh token: a run cut short (a patch that prints PASSED lines and
        # exits at import) does not print it
        done = f"swe-rl-tests-done-{secrets.token_hex(8)}"
        script = [_write_cmd(f"{repo}/{p}", t.rstrip("\n") + f"\nprint({done!r})\n")
                  for p, t in task.metadata.get("test_files", {}).items()]  # fmt: skip
        t_start = asyncio.get_running_loop().time()
        async with self.slots.lease(task) as box:
            t0 = asyncio.get_running_loop().time()
            res = await self._run(box, task, patch, script)
        t1 = asyncio.get_running_loop().time()
        self.exec_s += t1 - t0
        cost = {
            "start": round(t0 - t_start, 3),
            "test_run": round(t1 - t0, 3),
            "total": round(t1 - t_start, 3),
        }
        if res.timed_out:
            result = RewardResult(0.0, False, {"cost": cost}, log=res.output[-2000:], failure=None)
        else:
            ok, tests = _report(task, res.output)
            graded = [*task.FAIL_TO_PASS, *task.PASS_TO_PASS]  # only the graded tests' statuses count
            tests["violations"] = log_violations(res.output, "parse_log_pytest", graded)  # a tampered log
            if task.metadata.get("test_files") and done not in res.output:
                tests["violations"].append("the test run did not finish")
            ok = ok and not tests["violations"]
            tests["cost"] = cost
            result = RewardResult(reward=float(ok), resolved=ok, tests=tests, log=res.output[-2000:])
        # the static tripwire's `suspicious` label (no verdict change)
        return label_suspicious(result, patch)

    async def _run(self, box: Any, task: Task, patch: str, test_files: list[str]) -> Any:
        """Apply the patch under the tree guard, write the task's test files, run its eval script."""
        repo = self.slots.repo_dir
        if not await apply_under_guard(box, task, patch, repo):
            return await box.exec("echo PATCH_FAILED", timeout=60)
        return await box.exec(" ; ".join([*test_files, task.eval_script]), cwd=repo, timeout=60)


def demo_agent_config(prompts_dir: str, **overrides: Any) -> AgentConfig:
    """Short prompts and tight limits for the tiny model (3 expert turns; one spare; early stop on bad format)."""
    base: dict[str, Any] = dict(
        action_format="xml", max_steps=4, max_new_tokens=64, max_context_tokens=1024, max_format_errors=1,
        temperature=1.0, tool_timeout_s=20, max_observation_chars=1500, setup_timeout_s=60,
        system_prompt_file=f"{prompts_dir}/system.md", task_prompt_file=f"{prompts_dir}/task.md",
        notes_file=f"{prompts_dir}/notes.yaml",
    )  # fmt: skip
    base.update(overrides)
    return AgentConfig(**base)


class PipelineRollouter:
    """Trainer Rollouter: rollout_one over the real agent loop, tools in sandbox slots, CachedGrader rewards."""

    def __init__(self, policy: Any, tokenizer: Any, agent_cfg: AgentConfig, slots: SandboxSlots,
                 grader: CachedGrader | None = None, model: Any = None):  # fmt: skip
        from swe_rl.rollout.policies import SharedPolicy

        self.provider = SharedPolicy(policy, tokenizer, model)
        self.agent_cfg = agent_cfg
        self.slots = slots
        self.grader = grader or CachedGrader(slots)

    def stats(self) -> dict[str, float]:
        """Cumulative counters (the trainer logs per-step differences): sandbox and grading cost vs generation."""
        pol = getattr(self.provider.policy, "stats", {})
        return {
            "sandbox_reset_s": self.slots.stats["reset_s"], "grading_exec_s": self.grader.exec_s,
            "grading_cache_hits": self.grader.hits, "grading_runs": self.grader.misses,
            "generate_s": float(pol.get("gen_s", 0.0)), "generated_tokens": float(pol.get("tokens", 0)),
        }  # fmt: skip

    def with_temperature(self, temperature: float) -> PipelineRollouter:
        """The same policy, slots and grader cache, sampling at another temperature (0 = greedy)."""
        other = PipelineRollouter.__new__(PipelineRollouter)
        other.provider, other.slots, other.grader = self.provider, self.slots, self.grader
        other.agent_cfg = self.agent_cfg.model_copy(update={"temperature": temperature})
        return other

    def rollout(self, tasks: list[Task], n: int, seed: int) -> list[Trajectory]:
        """Sync entry point for the trainer: arollout on the slots' private event loop."""
        return self.slots.run(self.arollout(tasks, n, seed))

    async def arollout(self, tasks: list[Task], n: int, seed: int) -> list[Trajectory]:
        """len(tasks) * n graded trajectories, task-major. Sample i of every task samples with its own seed
        (run_episode derives per-turn seeds from cfg.seed; rollout_one does not pass the sample index)."""
        from swe_rl.rollout.episode import EpisodeContext

        ctxs = [
            EpisodeContext(policy=self.provider, sandbox_factory=self.slots.lease, reward_fn=self.grader,  # type: ignore[arg-type]
                           agent_cfg=self.agent_cfg.model_copy(update={"seed": seed + 7919 * i}),
                           prepare=False)  # a slot lease writes the task's repo itself
            for i in range(n)
        ]  # fmt: skip
        return list(await asyncio.gather(*(ctxs[i].run(t, i) for t in tasks for i in range(n))))
