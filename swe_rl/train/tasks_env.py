"""`data.source: tasks`: the built-in trainer on any task dataset (SWE-bench rows with images, task repos, HF
names, generated micro tasks exported with `swe-rl tasks generate`).

Unlike the generated source's reusable slots, every episode gets a fresh sandbox at its task's image (the repo
is in the image, or `metadata.files` is written by prepare_sandbox) and every patch is graded by the project's
grader (swe_rl.grading.grader.grade: swebench's test spec, log parser and report, the integrity checks) in a
second fresh sandbox, exactly as `swe-rl eval` grades it.
"""

from __future__ import annotations

import asyncio
import copy
from typing import Any

from swe_rl.agent.config import AgentConfig
from swe_rl.agent.trajectory import Trajectory
from swe_rl.tasks.task import Task


class TaskRollouter:
    """Trainer Rollouter (rollout / arollout / with_temperature / stats) over rollout_one with real task images."""

    def __init__(self, policy: Any, tokenizer: Any, agent_cfg: AgentConfig, sandbox_cfg: dict[str, Any],
                 model: Any = None, *, grade_timeout_s: float = 1800.0, run_id: str = "swe-rl-train",
                 fail_fast: bool = True, gold_factor: float | None = None):  # fmt: skip
        from swe_rl.grading import DedupGrader
        from swe_rl.rollout.context import TaskSandboxFactory, episode_ttl, grading_reward_fn
        from swe_rl.rollout.policies import SharedPolicy

        self.provider = SharedPolicy(policy, tokenizer, model)
        self.agent_cfg = agent_cfg
        ttl = episode_ttl(agent_cfg, grade_timeout_s)
        self.factory = TaskSandboxFactory(sandbox_cfg, run_id, ttl=ttl, expect_grading=True)
        # identical patches of a step graded once (swe_rl.grading.dedup); a new scope per rollout call
        self.grader = DedupGrader(
            grading_reward_fn(
                self.factory.grading(), grade_timeout_s, fail_fast=fail_fast, gold_factor=gold_factor
            )
        )
        self.loop = asyncio.new_event_loop()  # sandbox shells and the policy's batcher live on one loop
        self.episodes = 0

    def stats(self) -> dict[str, float]:
        pol = getattr(self.provider.policy, "stats", {})
        return {"episodes": float(self.episodes), "generate_s": float(pol.get("gen_s", 0.0)),
                "generated_tokens": float(pol.get("tokens", 0)), **self.grader.stats()}  # fmt: skip

    def with_temperature(self, temperature: float) -> TaskRollouter:
        other = copy.copy(self)
        other.agent_cfg = self.agent_cfg.model_copy(update={"temperature": temperature})
        return other

    def run(self, coro: Any) -> Any:
        return self.loop.run_until_complete(coro)

    def rollout(self, tasks: list[Task], n: int, seed: int) -> list[Trajectory]:
        return self.run(self.arollout(tasks, n, seed))

    async def arollout(self, tasks: list[Task], n: int, seed: int) -> list[Trajectory]:
        """len(tasks) * n graded trajectories, task-major; sample i seeds its turns with seed + 7919 i."""
        from swe_rl.rollout.episode import EpisodeContext

        ctxs = [
            EpisodeContext(policy=self.provider, sandbox_factory=self.factory, reward_fn=self.grader,
                           agent_cfg=self.agent_cfg.model_copy(update={"seed": seed + 7919 * i}))
            for i in range(n)
        ]  # fmt: skip
        self.episodes += len(tasks) * n
        self.grader.new_scope()
        return list(await asyncio.gather(*(ctxs[i].run(t, i) for t in tasks for i in range(n))))

    def close(self) -> None:
        if self.loop.is_closed():
            return
        close = getattr(self.provider.policy, "close", None)
        if close is not None:
            self.run(close())
        self.run(self.factory.aclose())
        self.loop.close()


def load_source_tasks(source: str, field: str, split: str, instance_ids: list[str]) -> list[Task]:
    """The tasks of one config field; a bad source is one error naming the field."""
    from swe_rl.tasks.loaders import TaskLoadError, load_tasks

    if not source:
        raise ValueError(f"{field}: data.source=tasks needs a task dataset (a .jsonl/.parquet file, a task repo "
                         "directory, 'micro' or an HF name)")  # fmt: skip
    try:
        return load_tasks(source, split=split, instance_ids=instance_ids or None)
    except TaskLoadError as e:
        raise ValueError(f"{field}={source!r}: {e}") from e


def validated(roll: TaskRollouter, tasks: list[Task], field: str) -> list[Task]:
    """`tasks` validated (swe_rl.grading.validate: gold graded once per image, cached), so that rewards leave
    out what gold cannot pass here for a named environmental reason; ungradeable ones are dropped, said on
    stderr (their every episode would be masked)."""
    import sys

    from swe_rl.grading import validate_tasks, validation_shown

    if not tasks:
        return tasks
    out = []
    for t in roll.run(validate_tasks(tasks, roll.factory.grading())):
        shown = validation_shown(t)
        if shown is not None and shown["status"] != "ok":
            print(f"{field}: {t.instance_id}: {shown['summary']}", file=sys.stderr)
        if shown is None or shown["status"] != "ungradeable":
            out.append(t)
    if not out:
        raise ValueError(f"{field}: every task is ungradeable here (see the lines above)")
    return out


def tasks_env(cfg: Any, model: Any, tok: Any, progress: Any = None) -> Any:
    """The `tasks` data source: training tasks from data.tasks, held-out ones from data.eval_tasks (optional)."""
    from swe_rl.policy.hf import HFLocalPolicy
    from swe_rl.train.device import autocast_dtype
    from swe_rl.train.env import demo_agent_config
    from swe_rl.train.evaluate import HeldOutEval
    from swe_rl.train.progress import ProgressRollouter
    from swe_rl.train.run import Env
    from swe_rl.train.sft import prompts_dir

    if cfg.rollout.engine != "hf":
        raise ValueError(
            "rollout.engine=vllm: data.source=tasks generates with the trainer's model (engine: hf)"
        )
    d, r = cfg.data, cfg.rollout
    tasks = load_source_tasks(d.tasks, "data.tasks", d.split, d.instance_ids)
    held = load_source_tasks(d.eval_tasks, "data.eval_tasks", d.split, []) if d.eval_tasks else []
    # the episode may fill what training keeps (rollout.max_len): a real issue's prompt alone passes the demo's 1024
    # (scikit-learn-10908, astropy-14182: every episode ended "context_limit" before a policy token)
    agent_cfg = demo_agent_config(prompts_dir(), max_new_tokens=r.max_new_tokens, max_steps=r.max_turns,
                                  temperature=r.temperature, max_context_tokens=max(1024, r.max_len))  # fmt: skip
    policy = HFLocalPolicy(model, tok, max_batch=r.max_batch, autocast=autocast_dtype(cfg.autocast))
    rw = cfg.algo.reward
    roll = TaskRollouter(policy, tok, agent_cfg, cfg.sandbox, model, fail_fast=rw.fail_fast,
                         grade_timeout_s=rw.grade_timeout_s, gold_factor=rw.grade_timeout_gold_factor)  # fmt: skip
    tasks, held = validated(roll, tasks, "data.tasks"), validated(roll, held, "data.eval_tasks")
    evaluator = None
    if held:
        held_roll = ProgressRollouter(roll, progress, "held-out") if progress is not None else roll
        evaluator = HeldOutEval(held_roll, held[: cfg.eval.n_tasks], sampled=cfg.eval.sampled)
    train_roll: Any = ProgressRollouter(roll, progress) if progress is not None else roll
    return Env(train_roll, tasks, uniform_sampler, evaluator, close=roll.close)


def uniform_sampler(tasks: list[Task], k: int, rng: Any) -> list[Task]:
    """k tasks drawn uniformly with replacement (a task dataset has no generator families to mix)."""
    return [rng.choice(tasks) for _ in range(k)]
