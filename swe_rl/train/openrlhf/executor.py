"""Rollouts inside OpenRLHF: our agent loop on our sandboxes behind OpenRLHF's multi-turn executor API.

OpenRLHF loads `agent_func.py` by path in every vLLM rollout actor and calls `AgentExecutor().execute(...)` once
per sample, all samples at once on vLLM's event loop. We subclass its real `MultiTurnAgentExecutor` (one fresh,
synchronously built `SweAgentInstance` per sample, async `reset`) but run the episode with swe_rl.agent's loop
through `rollout_one` instead of the base `step` loop, because the base loop re-tokenizes environment text,
caps only the whole-episode length (not a turn) and has no turn limit. Our loop is token-in/token-out with the
engine's own token ids, so the returned `observation_tokens` / `action_ranges` are exact.

Rules honoured (from OpenRLHF 0.11.2's source): sandbox I/O is async (never blocks the engine loop) and bounded
by our own semaphore; nothing raises out of `execute` (an exception would crash the training step): an
infrastructure failure returns reward 0 with `swe_rl_valid = 0`, which the AEM seam turns into a zero advantage.
Upstream bugs worked around: #1243 (response_length counts observation tokens: our `swe_rl_policy_tokens` log is
the true count, and the recipes never enable the overlong penalty); #1352 (context exhaustion not marked
truncated: `truncated` comes from our trajectory, where context_limit / max_steps / timeout are truncations).
"""

from __future__ import annotations

import asyncio
import collections
import copy
import itertools
import json
import logging
import os
import traceback
import uuid
from typing import Any

from openrlhf.utils.agent import AgentInstanceBase, MultiTurnAgentExecutor

from swe_rl.agent.trajectory import Trajectory, action_token_mask, mask_runs
from swe_rl.grading import DedupGrader, episode_flags, patch_caused
from swe_rl.policy.base import Completion, SamplingParams
from swe_rl.train.openrlhf.aem_seam import ACTION_RANGES_KEY, FILTER_KEY, MASKED_KEY, VALID_KEY
from swe_rl.train.openrlhf.config import AgentConfig
from swe_rl.train.openrlhf.data import task_from_label

AGENT_ENV = "SWE_RL_AGENT_CONFIG"  # set by launch.py in every Ray worker
COMPACT_FILTERED = {"max_steps", "context_limit", "timeout"}  # DeepSWE compact filtering reasons
DEDUP_ENTRIES = 256  # graded results kept per executor for identical patches (swe_rl.grading.dedup)


class EnginePolicy:
    """Our Policy protocol over OpenRLHF's rollout engine: `await engine.generate(token_ids, vllm_params)` →
    vLLM RequestOutput. The trainer's sampling settings (temperature, top_p) come from OpenRLHF's params."""

    def __init__(self, engine: Any, base_params: Any):
        self.engine = engine
        self.base_params = base_params  # vllm.SamplingParams built by OpenRLHF's samples generator

    def vllm_params(self, sampling: SamplingParams) -> Any:
        sp = copy.deepcopy(self.base_params)
        sp.max_tokens = sampling.max_new_tokens  # per turn (OpenRLHF's own loop only caps the episode)
        sp.stop_token_ids = list(sampling.stop_token_ids)
        # The sampled token's logprob only where OpenRLHF asked for logprobs (IS correction on): only then are
        # its engines in vLLM's processed_logprobs mode (temperature applied); raw logprobs are never carried.
        sp.logprobs = 0 if self.base_params.logprobs is not None else None
        sp.skip_special_tokens = False
        if sampling.seed is not None:
            sp.seed = sampling.seed
        return sp

    async def generate(self, prompt_ids: list[int], sampling: SamplingParams) -> Completion:
        out = (await self.engine.generate(list(prompt_ids), self.vllm_params(sampling))).outputs[0]
        toks = list(out.token_ids)
        lps = (
            [float(d[t].logprob) for d, t in zip(out.logprobs, toks, strict=True)]
            if out.logprobs
            else [0.0] * len(toks)
        )
        return Completion(toks, lps, out.text, "length" if out.finish_reason == "length" else "stop")


class SweAgentInstance(AgentInstanceBase):
    """One OpenRLHF sample = one task episode. Synchronous __init__ (OpenRLHF builds one per sample)."""

    def __init__(self, *args: Any, **kwargs: Any):
        self.task: Any = None

    async def reset(self, states: dict, **kwargs: Any) -> dict:
        self.task = task_from_label(states["label"])
        return {"observation": states["observation"]}

    async def step(self, state_dict: dict, **kwargs: Any) -> dict:
        raise NotImplementedError("swe-rl episodes run whole in `run` (our agent loop), not turn by turn")

    async def run(
        self, policy: Any, tokenizer: Any, loop_cfg: Any, runtime: Any, sample_idx: int
    ) -> Trajectory:
        """The episode: our agent loop in a fresh sandbox, then grading, via rollout_one (which never raises).
        `runtime` is the AgentExecutor (sandbox factory and grader shared by the engine's samples)."""
        from swe_rl.rollout.episode import rollout_one

        return await rollout_one(
            self.task,
            sample_idx,
            policy,
            runtime.sandbox_factory,
            loop_cfg,
            runtime.reward_fn,
            tokenizer=tokenizer,
        )


def agent_config_from_env(environ: dict[str, str] | None = None) -> AgentConfig:
    raw = (os.environ if environ is None else environ).get(AGENT_ENV)
    return AgentConfig.model_validate(json.loads(raw)) if raw else AgentConfig()


def _extra_logs(traj: Trajectory | None, error: bool, masked: bool = False) -> dict[str, float]:
    """The same keys for every sample (OpenRLHF concatenates info dicts key by key)."""
    t = traj or Trajectory(task_id="")
    valid = (not error) and t.reward is not None
    flags = episode_flags(t.metrics) or (False, False)  # the grader's labels (swe_rl.grading.reward)
    cost = ((t.metrics.get("grading") or {}).get("tests") or {}).get("cost") or {}  # swe_rl.grading.cost
    return {
        "swe_rl_suspicious": float(flags[0]),  # per step: the fraction of suspicious episodes
        "swe_rl_harness_touched": float(flags[1]),
        # a timeout or sandbox death the patch caused (reward 0, not masked: swe_rl.grading.grader._patch_caused)
        "swe_rl_patch_caused": float(patch_caused((t.metrics.get("grading") or {}).get("tests") or {})),
        VALID_KEY: float(valid),
        FILTER_KEY: float(t.exit_status in COMPACT_FILTERED),
        MASKED_KEY: float(masked),
        "swe_rl_resolved": float(bool(t.resolved)),
        "swe_rl_submitted": float(t.exit_status == "submitted"),
        "swe_rl_turns": float(t.metrics.get("steps", 0)),
        "swe_rl_policy_tokens": float(sum(t.loss_mask)),  # true response length (upstream #1243)
        "swe_rl_episode_s": float(t.metrics.get("rollout_s", 0.0)),
        # per step: the fraction of gradings an identical patch made unnecessary, and seconds per grading run
        "swe_rl_grading_shared": float(bool(cost.get("dedup_hit"))),
        "swe_rl_grading_s": 0.0 if cost.get("dedup_hit") else float(cost.get("total", 0.0)),
    }


def trajectory_to_response(
    traj: Trajectory,
    prompt: str,
    label: str,
    tokenizer: Any,
    want_logprobs: bool,
    error: bool = False,
    unsubmitted: str = "zero",
    suspicious: str = "zero",
) -> dict[str, Any]:
    """OpenRLHF's response dict (see SamplesGenerator._process_response_into_experience). `unsubmitted` is the
    reward rule for an episode that did not submit: zero (reward 0), mask (reward 0, zero advantage) or grade."""
    ids, mask, lps = list(traj.token_ids), list(traj.loss_mask), list(traj.logprobs)
    if not any(mask):  # nothing generated (failure before the first turn): a 1-token dummy action, valid 0
        eos = tokenizer.eos_token_id if tokenizer.eos_token_id is not None else 0
        ids, mask, lps = [*ids[-1:], eos] if ids else [eos, eos], [0, 1], [0.0, 0.0]
        error = True
    reward = float(traj.reward) if (traj.reward is not None and not error) else 0.0
    unsub = traj.exit_status != "submitted" and unsubmitted != "grade"
    if unsub:  # a patch left behind by a format error or a truncation earns nothing
        reward = 0.0
    masked = unsub and unsubmitted == "mask" and not error
    if (episode_flags(traj.metrics) or (False, False))[0] and suspicious != "keep":  # the reward policy
        reward, masked = 0.0, masked or (suspicious == "mask" and not error)
    return {
        "prompt": prompt,
        "label": label,
        "images": None,
        "mm_train_inputs": None,
        "reward": reward,
        "scores": reward,  # dynamic filtering reads scores
        "observation_tokens": ids,
        "action_ranges": mask_runs(mask),
        ACTION_RANGES_KEY: mask_runs(action_token_mask(mask, traj.action_starts)),  # AEM's action span
        "rollout_log_probs": lps if want_logprobs else None,
        "truncated": bool(traj.truncated),
        "extra_logs": _extra_logs(traj, error, masked),
    }


class EngineFailures(RuntimeError):
    """`agent.max_failed_in_a_row` samples of one engine in a row ended in an infrastructure error: raised from
    `execute`, it fails the engine's `generate_responses` call and so the training step (a run that cannot score a
    sample stops instead of training on zero advantages for hours)."""


class AgentExecutor(MultiTurnAgentExecutor):
    """What OpenRLHF instantiates (no arguments) from `--train.agent_func_path`."""

    def __init__(self, cfg: AgentConfig | None = None, sandbox_factory: Any = None, reward_fn: Any = "grade"):
        super().__init__(SweAgentInstance)
        from swe_rl.rollout.context import grading_reward_fn, task_sandbox_factory

        self.cfg = cfg or agent_config_from_env()
        self.run_id = f"openrlhf-{uuid.uuid4().hex[:8]}"
        # generated micro tasks (agent.slots): the built-in trainer's reused sandboxes and cached grader
        if sandbox_factory is None and self.cfg.slots:
            from swe_rl.train.env import CachedGrader, SandboxSlots

            slots = SandboxSlots(self.cfg.slots, {"image": "swe-rl/base:bookworm", **self.cfg.sandbox})
            sandbox_factory = slots.lease
            reward_fn = CachedGrader(slots) if reward_fn == "grade" and self.cfg.grade else reward_fn
        self.sandbox_factory = sandbox_factory or task_sandbox_factory(self.cfg.sandbox, run_id=self.run_id)
        if reward_fn == "grade":
            grade = grading_reward_fn(
                self.sandbox_factory,
                self.cfg.grade_timeout_s,
                fail_fast=self.cfg.fail_fast,
                gold_factor=self.cfg.grade_timeout_gold_factor,
            )
            reward_fn = grade if self.cfg.grade else None
        # a group's n samples all run in this executor (upstream sends one prompt's samples to one engine):
        # identical patches among them are graded once (swe_rl.grading.dedup); the engine sees no step boundary,
        # so the scope is the last DEDUP_ENTRIES distinct patches
        self.reward_fn = DedupGrader(reward_fn, max_entries=DEDUP_ENTRIES) if reward_fn is not None else None
        self._sem: asyncio.Semaphore | None = None  # created inside vLLM's running loop on first use
        self._sample_ids = itertools.count()
        # the infrastructure failures in a row: how many of each kind, and the first one's error (its last line)
        self._failed: collections.Counter[str] = collections.Counter()
        self._first_failure = ""

    def _tally(self, traj: Trajectory, error: bool) -> None:
        """Count an infrastructure failure (no reward although one was asked for), reset on any other sample;
        EngineFailures once `max_failed_in_a_row` failed in a row."""
        grading = traj.metrics.get("grading") or {}
        failed = error or traj.exit_status == "error" or (self.reward_fn is not None and traj.reward is None)
        if not failed:
            self._failed.clear()
            return
        lines = (traj.error or "").strip().splitlines()
        last = lines[-1] if lines else "no error text"
        if not self._failed:
            self._first_failure = last
        kind = str(traj.metrics.get("infra_failure") or grading.get("failure") or "episode_error")
        self._failed[kind] += 1
        if not error:  # an exception was logged with its traceback already
            # one line per lost sample in the engine actor's log (Ray forwards it to the driver): what was lost, why
            logging.getLogger(__name__).warning(
                "swe-rl AgentExecutor: sample of %s lost to an infrastructure failure (%s, valid=0): %s",
                traj.task_id, kind, last,
            )  # fmt: skip
        limit, n = self.cfg.max_failed_in_a_row, self._failed.total()
        if limit and n >= limit:
            text = ", ".join(f"{k} {v}" for k, v in self._failed.most_common())
            raise EngineFailures(
                f"swe-rl AgentExecutor: the last {n} samples of this vLLM engine ended in an infrastructure error "
                f"({text}; agent.max_failed_in_a_row: {limit}), so the run stops. The first: {self._first_failure}"
            )

    def _admission(self) -> asyncio.Semaphore:
        if self._sem is None:
            self._sem = asyncio.Semaphore(self.cfg.max_concurrent_sandboxes)
        return self._sem

    async def execute(
        self, prompt, label, sampling_params, max_length: int, hf_tokenizer, llm_engine, images=None
    ):

        want_lp = getattr(sampling_params, "logprobs", None) is not None
        try:
            instance = self.agent_instance_cls()
            await instance.reset({"observation": prompt, "label": label})
            loop_cfg = self.cfg.loop_config(
                max_context_tokens=max_length,
                temperature=sampling_params.temperature,
                top_p=sampling_params.top_p,
            )
            policy = EnginePolicy(llm_engine, sampling_params)
            async with self._admission():
                traj = await instance.run(policy, hf_tokenizer, loop_cfg, self, next(self._sample_ids))
            resp = trajectory_to_response(
                traj, prompt, label, hf_tokenizer, want_lp, unsubmitted=self.cfg.unsubmitted,
                suspicious=self.cfg.suspicious,
            )  # fmt: skip
        except asyncio.CancelledError:
            raise
        except Exception:  # a zero-advantage sample instead (logged), until too many fail in a row
            logging.getLogger(__name__).exception("swe-rl AgentExecutor: sample failed, returning valid=0")
            failed = Trajectory(task_id=str(prompt), exit_status="error", error=traceback.format_exc())
            self._tally(failed, error=True)
            return trajectory_to_response(failed, prompt, label, hf_tokenizer, want_lp, error=True)
        self._tally(traj, error=False)
        return resp
