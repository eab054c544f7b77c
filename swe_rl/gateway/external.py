"""External-agent rollouts: a black-box agent runs in a task's sandbox against the gateway; its recorded session
becomes the episode's `Trajectory`, graded and trained like our own agent's.

- `MiniSweAgent`: mini-swe-agent's own DefaultAgent + LitellmTextbasedModel (litellm -> the gateway's OpenAI URL,
  offline: the local cost map, cost tracking off) + sandboxes.adapters.minisweagent.SandboxEnvironment.
- `CommandAgent`: any host command; it gets OPENAI_BASE_URL, SWE_RL_SANDBOX_ID (the container) and the task.
- `external_episode(agent, gateway)`: an EpisodeFn for swe_rl.rollout's rollout_one (one exception boundary,
  the grader with its integrity guards); `ExternalRollouter`: the built-in trainer's Rollouter over it.
"""

from __future__ import annotations

import asyncio
import base64
import itertools
import os
import secrets
import threading
from dataclasses import dataclass, field
from typing import Any, Protocol

from sandboxes.sync import SyncSandbox
from swe_rl.agent.patch import base_commit_of, get_patch
from swe_rl.agent.trajectory import Trajectory
from swe_rl.gateway.server import Gateway
from swe_rl.tasks.task import Task

# mini-swe-agent exit statuses -> ours (terminated: the agent's own doing; truncated: a limit)
MINI_EXITS = {"Submitted": "submitted", "LimitsExceeded": "max_steps", "TimeExceeded": "timeout",
              "RepeatedFormatError": "format_errors", "ContextWindowExceededError": "context_limit"}  # fmt: skip


@dataclass
class AgentResult:
    exit_status: str  # one of swe_rl.agent.trajectory.EXIT_STATUSES
    transcript: list[dict[str, Any]] = field(default_factory=list)  # what the agent kept as its history
    detail: str = ""  # the agent's own exit status / last output


class ExternalAgent(Protocol):
    """Runs one task to completion in `sandbox` (a blocking facade), talking to the model at `base_url`."""

    def run(self, task: Task, sandbox: SyncSandbox, base_url: str) -> AgentResult: ...


class LoopSandbox(SyncSandbox):
    """A blocking facade over a sandbox that lives on an already running loop (an agent in a worker thread
    drives the rollout loop's sandbox); it never closes the sandbox, its owner does."""

    def __init__(self, sandbox: Any, loop: asyncio.AbstractEventLoop) -> None:
        self.sandbox, self._loop = sandbox, loop

    def close(self) -> None:
        return


@dataclass
class MiniSweAgent:
    system_template: str  # mini-swe-agent Jinja templates ({{task}} is the problem statement)
    instance_template: str
    action_regex: str = r"```mswea_bash_command\s*\n(.*?)\n```"
    observation_template: str | None = None  # None: mini-swe-agent's default
    step_limit: int = 4
    max_tokens: int = 64
    temperature: float = 1.0
    timeout: int = 20  # per command, seconds
    tool_calling: bool = (
        False  # mini-swe-agent's LitellmModel (OpenAI tools, a `bash` tool) instead of text actions
    )
    wall_time_s: int = 600  # the whole run (mini-swe-agent's wall_time_limit_seconds; 0 = none)
    repo_dir: str = "/testbed"

    def run(self, task: Task, sandbox: SyncSandbox, base_url: str) -> AgentResult:
        os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")  # litellm must not fetch its cost map
        os.environ.setdefault("MSWEA_MODEL_RETRY_STOP_AFTER_ATTEMPT", "2")
        import litellm
        from minisweagent.agents.default import DefaultAgent
        from minisweagent.models.litellm_model import LitellmModel
        from minisweagent.models.litellm_textbased_model import LitellmTextbasedModel

        from sandboxes.adapters.minisweagent import SandboxEnvironment

        litellm.suppress_debug_info = True  # its "Provider List" banner on every unpriced call
        extra: dict[str, Any] = (
            {"observation_template": self.observation_template} if self.observation_template else {}
        )
        if not self.tool_calling:
            extra["action_regex"] = self.action_regex
        model_cls: Any = LitellmModel if self.tool_calling else LitellmTextbasedModel
        model = model_cls(
            model_name="openai/swe-rl", cost_tracking="ignore_errors",
            model_kwargs={"api_base": base_url, "api_key": "swe-rl", "temperature": self.temperature,
                          "max_tokens": self.max_tokens},
            **extra,
        )  # fmt: skip
        env = SandboxEnvironment(existing=sandbox, cwd=self.repo_dir, timeout=self.timeout)
        agent = DefaultAgent(model, env, system_template=self.system_template,
                             instance_template=self.instance_template, step_limit=self.step_limit,
                             cost_limit=0.0, max_consecutive_format_errors=self.step_limit,
                             wall_time_limit_seconds=self.wall_time_s)  # fmt: skip
        try:
            info = agent.run(task.problem_statement)
            status = str(info.get("exit_status", ""))
        except Exception as e:  # the agent's run ended on an exception (recorded in its last message)
            status = type(e).__name__
        return AgentResult(MINI_EXITS.get(status, "error"), agent.messages, status)


def _raw(text: str) -> str:
    return "{% raw %}" + text + "{% endraw %}" if text else ""


def demo_mini_agent(**overrides: Any) -> MiniSweAgent:
    """mini-swe-agent with the prompts the shipped tiny model was trained on (swe_rl/train/prompts) and an
    action regex that takes the `command` parameter of its XML calls as the bash action."""
    from swe_rl.agent.prompts import Prompts
    from swe_rl.train.env import demo_agent_config
    from swe_rl.train.sft import prompts_dir

    prompts = Prompts.load(demo_agent_config(prompts_dir()))
    mark = "\x00SWE_RL_TASK\x00"
    head, _, tail = prompts.task(mark, "/testbed").partition(mark)
    base: dict[str, Any] = dict(
        system_template=_raw(prompts.system), instance_template=_raw(head) + "{{task}}" + _raw(tail),
        action_regex=r"<parameter=command>\s*(.*?)\s*</parameter>",
        observation_template="Execution output of [execute_bash]:\n{{output.output}}",
    )  # fmt: skip
    return MiniSweAgent(**(base | overrides))


@dataclass
class CommandAgent:
    """`argv` runs on the host with OPENAI_BASE_URL / OPENAI_API_BASE / OPENAI_API_KEY, SWE_RL_SANDBOX_ID,
    SWE_RL_REPO_DIR and SWE_RL_PROBLEM_STATEMENT set; exit 0 = submitted, a timeout = timeout, else error."""

    argv: list[str]
    timeout_s: float = 600
    repo_dir: str = "/testbed"
    env: dict[str, str] = field(default_factory=dict)

    def run(self, task: Task, sandbox: SyncSandbox, base_url: str) -> AgentResult:
        import subprocess

        env = os.environ | self.env | {
            "OPENAI_BASE_URL": base_url, "OPENAI_API_BASE": base_url, "OPENAI_API_KEY": "swe-rl",
            "SWE_RL_SANDBOX_ID": sandbox.id, "SWE_RL_REPO_DIR": self.repo_dir,
            "SWE_RL_PROBLEM_STATEMENT": task.problem_statement,
        }  # fmt: skip
        try:
            p = subprocess.run(self.argv, env=env, capture_output=True, text=True, timeout=self.timeout_s)
        except subprocess.TimeoutExpired:
            return AgentResult("timeout", detail=f"killed after {self.timeout_s:g}s")
        tail = (p.stdout + p.stderr)[-2000:]
        return AgentResult(
            "submitted" if p.returncode == 0 else "error", detail=f"exit {p.returncode}: {tail}"
        )


@dataclass
class WithGoldFix:
    """For tests and measurements: `inner` runs, then every `every`-th run resets the repo, applies the task's gold
    fix and submits (as a solving agent would), so a group holds resolved and unresolved episodes whose tokens
    are all the inner agent's. The tiny model alone resolves nothing, and all-zero groups have no gradient."""

    inner: ExternalAgent
    every: int = 2
    count: Any = field(default_factory=itertools.count)
    lock: Any = field(default_factory=threading.Lock)

    def run(self, task: Task, sandbox: SyncSandbox, base_url: str) -> AgentResult:
        result = self.inner.run(task, sandbox, base_url)
        with self.lock:
            gold = next(self.count) % self.every == 0
        if not gold:
            return result
        b64 = base64.b64encode(task.patch.encode()).decode()
        cmd = f"git checkout -q -- . && git clean -qfd && echo {b64} | base64 -d | git apply"
        res = sandbox.exec(cmd, timeout=60, cwd=getattr(self.inner, "repo_dir", "/testbed"))
        if res.exit_code != 0:
            return AgentResult("error", result.transcript, f"gold fix did not apply: {res.output[-300:]}")
        return AgentResult("submitted", result.transcript, "gold fix applied, submitted")


def external_episode(agent: ExternalAgent, gateway: Gateway, *, repo_dir: str = "/testbed",
                     patch_exclude: list[str] | None = None, executor: Any = None) -> Any:  # fmt: skip
    """An EpisodeFn (swe_rl.rollout.episode): the agent in the started sandbox, its session as the trajectory.
    The blocking agent runs in `executor` (None = the loop's default pool, only cpu_count + 4 threads)."""

    async def episode(task: Task, sandbox: Any, policy: Any, tokenizer: Any, cfg: Any, *,
                      sample_idx: int = 0) -> Trajectory:  # fmt: skip
        base = await base_commit_of(sandbox, repo_dir, 60)  # HEAD at the start, as in swe_rl.agent.loop
        sid = f"{task.instance_id}.{sample_idx}.{secrets.token_hex(4)}"
        loop = asyncio.get_running_loop()
        bridge = LoopSandbox(sandbox, loop)
        try:
            result = await loop.run_in_executor(executor, agent.run, task, bridge, gateway.session_url(sid))
        finally:
            session = gateway.pop(sid) or gateway.session(sid)
        a = session.assemble(task.instance_id, sample_idx)
        traj = a.trajectory or a.chain or Trajectory(task_id=task.instance_id, sample_idx=sample_idx)
        traj.patch = await get_patch(sandbox, repo_dir, base, patch_exclude or [], 60)
        traj.exit_status = result.exit_status
        traj.terminated = result.exit_status in ("submitted", "format_errors")
        traj.truncated = not traj.terminated
        gw = traj.metrics.setdefault("gateway", {"session": sid, "calls": 0, "assembled": False})
        gw.update(agent_exit=result.detail, reason=a.reason, per_call_rows=len(a.rows))
        traj.metrics["agent_transcript"] = [
            {"role": m.get("role"), "content": m.get("content")} for m in result.transcript
        ]
        if result.exit_status == "error":  # the agent process failed: unscorable, never 0
            traj.error = f"external agent failed: {result.detail}"
        return traj

    return episode


class ExternalRollouter:
    """The trainer's Rollouter: every sample runs the external agent through the gateway in a sandbox slot;
    rollout_one grades the patch (CachedGrader) and records failures; one trajectory per sample, task-major."""

    def __init__(self, agent: ExternalAgent, gateway: Gateway, slots: Any, grader: Any):
        self.agent, self.gateway, self.slots, self.grader = agent, gateway, slots, grader

    def rollout(self, tasks: list[Task], n: int, seed: int) -> list[Trajectory]:
        return self.slots.run(self.arollout(tasks, n, seed))

    async def arollout(self, tasks: list[Task], n: int, seed: int) -> list[Trajectory]:
        from concurrent.futures import ThreadPoolExecutor

        from swe_rl.rollout.episode import rollout_one

        # one thread per episode that can hold a slot: agents block on their sandbox, not on the CPU
        with ThreadPoolExecutor(max_workers=max(1, min(len(tasks) * n, self.slots.k))) as pool:
            fn = external_episode(self.agent, self.gateway, repo_dir=self.slots.repo_dir, executor=pool)
            runs = [rollout_one(t, i, self.gateway.policy, self.slots.lease, None, self.grader,
                                tokenizer=self.gateway.tokenizer, episode_fn=fn, prepare=False)
                    for t in tasks for i in range(n)]  # fmt: skip
            return list(await asyncio.gather(*runs))
