"""The agent loop: one episode of policy turns and tool calls in a started sandbox -> `Trajectory`.

Token-in/token-out: the prompt is rendered once, policy tokens are appended as generated (loss mask 1, with their
rollout logprobs and entropy), observations are appended as chat-template deltas (mask 0). The history is never
re-tokenized. Reward is not computed here (the rollout layer grades the patch).

Exit statuses: submitted (terminated), format_errors (terminated: the policy's own doing, so it is scored),
max_steps / context_limit / timeout (truncated), error (truncated). Tool failures are observations. Infrastructure failures
(SandboxError, a policy backend that is down) propagate; the exception carries the partial trajectory as
`exc.trajectory` with exit_status "error" so the caller's single boundary can record it.
"""

from __future__ import annotations

import asyncio
import hashlib
import time
import traceback
from typing import Any

from sandboxes.base import Sandbox
from swe_rl.agent.chat import ChatFormat, encode, render
from swe_rl.agent.config import AgentConfig
from swe_rl.agent.parsing import ParseError, parse_action
from swe_rl.agent.patch import base_commit_of, get_patch
from swe_rl.agent.profiles import get_profile
from swe_rl.agent.prompts import Prompts
from swe_rl.agent.toolset import SUBMIT, build_command, canonical_name, install_tools
from swe_rl.agent.trajectory import Trajectory, action_offset
from swe_rl.policy.base import ContextLengthExceeded, Policy, SamplingParams
from swe_rl.tasks.task import Task

TRUNCATING = {"max_steps", "context_limit", "timeout"}


# what a seeded run's draws depend on besides the weights: changed with the turn seeds or the local sampler's draw, so
# caches of sampled results (swe-rl compare's step-0 evaluation) are not reused across such a change
SAMPLING_VERSION = "turn_seed-1/inverse-cdf-1"


def turn_seed(seed: int, task_id: str, sample_idx: int, step: int) -> int:
    """The sampling seed of one turn: a stable hash of (base seed, task, sample index, turn), below 2**31 (what any
    server takes). Every task draws its own stream: with `seed + 1000 * sample_idx + step` (before 2026-12-05) sample i
    of every task drew the same uniforms, so a batch's episodes made near-identical choices together and 96 sampled
    runs over 48 tasks were, in effect, a handful of draws."""
    digest = hashlib.blake2b(f"{seed}/{task_id}/{sample_idx}/{step}".encode(), digest_size=8).digest()
    return int.from_bytes(digest, "big") % 2**31


def clip_middle(text: str, limit: int) -> str:
    if len(text) <= limit:
        return text
    half = limit // 2
    return f"{text[:half]}\n<observation clipped: {len(text) - 2 * half} characters omitted>\n{text[-half:]}"


async def run_tool(sandbox: Sandbox, name: str, params: dict[str, Any], cfg: AgentConfig, wait: float) -> str:
    """One tool call -> observation text. Bad calls and failing commands are observations, not exceptions."""
    profile = get_profile(cfg.profile)
    try:
        cmd = build_command(
            name,
            params,
            python=cfg.tool_python,
            tools_dir=cfg.tools_dir,
            repo_dir=cfg.repo_dir,
            timeout=cfg.tool_timeout_s,
            bash_style=profile.bash_style,
            auto_concise=profile.auto_concise,
        )
    except ValueError as e:
        return f"ERROR: {e}"
    res = await sandbox.exec(cmd, timeout=min(wait, cfg.tool_timeout_s + 30), cwd=cfg.repo_dir)
    out = res.output.rstrip("\n")
    if res.timed_out:
        out += f"\nERROR: the call did not finish within {cfg.tool_timeout_s:g} seconds."
    return profile.observation(name, clip_middle(out, cfg.max_observation_chars))


async def run_episode(
    task: Task, sandbox: Sandbox, policy: Policy, tokenizer: Any, cfg: AgentConfig, *, sample_idx: int = 0
) -> Trajectory:
    t_start = time.monotonic()
    deadline = t_start + cfg.max_wall_s
    prompts = Prompts.load(cfg)
    system_prompt, template_kw = prompts.for_template(tokenizer, cfg.chat_template_kwargs)  # Hermes: tools=
    chat = ChatFormat(tokenizer, cfg.turn_end_token, cfg.obs_role, template_kw)
    stop_ids = chat.stop_ids(cfg.extra_stop_tokens)
    traj = Trajectory(task_id=task.instance_id, sample_idx=sample_idx)
    ids, mask, logps = traj.token_ids, traj.loss_mask, traj.logprobs
    entropy: list[float] | None = []
    timing = {"setup_s": 0.0, "policy_s": 0.0, "tools_s": 0.0, "patch_s": 0.0}
    counts = {"steps": 0, "format_errors": 0, "multi_calls": 0, "tool_calls": 0, "closed_by_loop": 0}

    def append(
        new: list[int], *, policy_lp: list[float] | None = None, ent: list[float] | None = None
    ) -> None:
        nonlocal entropy
        ids.extend(new)
        mask.extend([1 if policy_lp is not None else 0] * len(new))
        logps.extend(policy_lp if policy_lp is not None else [0.0] * len(new))
        if entropy is not None:
            if policy_lp is not None and ent is None:
                entropy = None  # the backend gave no entropy for this turn: drop the whole field
            else:
                entropy.extend(ent if ent is not None else [0.0] * len(new))

    def finish(status: str) -> None:
        traj.exit_status = status
        traj.terminated = status in ("submitted", "format_errors")
        traj.truncated = (
            status in TRUNCATING or status == "error"
        )  # cut short by infrastructure (as rollout does)

    try:
        t0 = time.monotonic()
        await install_tools(sandbox, cfg.tools_dir)
        # the diff base is the tree the agent starts from, as the grader applies the patch onto that image: HEAD,
        # not task.base_commit (a SWE-bench image's setup commit sits on top of it, e.g. sphinx's tox.ini edit)
        base_commit = await base_commit_of(sandbox, cfg.repo_dir, cfg.setup_timeout_s)
        timing["setup_s"] += time.monotonic() - t0

        task_text = (
            prompts.task(task.problem_statement, cfg.repo_dir) + "\n" + prompts.step_note(cfg.max_steps + 1)
        )
        prompt_text, prompt_ids = chat.prompt(system_prompt, task_text)
        append(prompt_ids)
        traj.prompt_len = len(prompt_ids)
        traj.messages += [
            {"role": "system", "content": system_prompt},
            {"role": "user", "content": task_text, "span": [0, len(ids)], "text": prompt_text},
        ]
        max_ctx = await served_context(policy, cfg.max_context_tokens)
        status: str | None = "context_limit" if len(ids) >= max_ctx else None

        while status is None:
            budget = max_ctx - len(ids)
            wait = deadline - time.monotonic()
            if wait <= 0:
                status = "timeout"
                break
            seed = None  # seed 0 is a seed: no truthiness test
            if cfg.seed is not None:
                seed = turn_seed(cfg.seed, task.instance_id, sample_idx, counts["steps"])
            sampling = SamplingParams(
                temperature=cfg.temperature,
                top_p=cfg.top_p,
                top_k=cfg.top_k,
                min_p=cfg.min_p,
                extra_body=tuple(cfg.extra_body.items()),
                max_new_tokens=min(cfg.max_new_tokens, budget),
                stop_token_ids=stop_ids,
                seed=seed,
            )
            t0 = time.monotonic()
            try:
                fed = (
                    list(ids)
                    if cfg.history == "stream"
                    else rerendered(tokenizer, traj.messages, template_kw)
                )
                completion = await asyncio.wait_for(policy.generate(fed, sampling), timeout=wait)
            except asyncio.TimeoutError:
                timing["policy_s"] += time.monotonic() - t0
                status = "timeout"
                break
            except ContextLengthExceeded:  # the server's context is smaller than it said (or it said nothing)
                timing["policy_s"] += time.monotonic() - t0
                status = "context_limit"
                break
            timing["policy_s"] += time.monotonic() - t0
            counts["steps"] += 1

            # --- the assistant turn: policy tokens as generated (mask 1) -----------------------------------
            toks = through_first_stop(list(completion.token_ids)[:budget], stop_ids)
            start = len(ids)
            append(
                toks,
                policy_lp=list(completion.logprobs)[: len(toks)],
                ent=_maybe(completion.token_entropy, toks),
            )
            stopped = bool(toks) and toks[-1] in stop_ids
            reply = tokenizer.decode(toks[:-1] if stopped else toks, skip_special_tokens=False)
            turn: dict[str, Any] = {"role": "assistant", "content": reply, "span": [start, len(ids)]}
            turn["finish_reason"] = completion.finish_reason
            traj.messages.append(turn)
            traj.action_starts.append(start + action_offset(tokenizer, toks, reply, cfg.action_format))
            if not toks or toks[-1] != chat.turn_end_id:
                if len(ids) >= max_ctx:
                    status = "context_limit"
                    break
                append([chat.turn_end_id])  # close the turn for the template; not a policy token (mask 0)
                turn["closed_by_loop"] = True
                counts["closed_by_loop"] += 1

            # --- parse and act -------------------------------------------------------------------------------
            try:
                action = parse_action(reply, cfg.action_format)
            except ParseError as e:
                counts["format_errors"] += 1
                turn["parse_error"] = str(e)
                observation = f"ERROR: {e}"
                if counts["format_errors"] >= cfg.max_format_errors:
                    status = "format_errors"
                    break
            else:
                name = canonical_name(action.name)
                turn["action"] = {"name": name, "params": action.params}
                counts["multi_calls"] += action.n_calls > 1
                if name == SUBMIT:
                    status = "submitted"
                    break
                t0 = time.monotonic()
                try:
                    observation = await asyncio.wait_for(
                        run_tool(sandbox, name, action.params, cfg, wait=deadline - time.monotonic()),
                        timeout=max(deadline - time.monotonic(), 0.001),
                    )
                except asyncio.TimeoutError:
                    timing["tools_s"] += time.monotonic() - t0
                    status = "timeout"
                    break
                timing["tools_s"] += time.monotonic() - t0
                counts["tool_calls"] += 1
                if action.n_calls > 1:
                    observation += "\nNOTE: only the first function call of your reply was executed."

            # --- the observation: a template delta (mask 0) --------------------------------------------------
            if counts["steps"] >= cfg.max_steps:
                status = "max_steps"
                break
            observation += "\n" + prompts.step_note(cfg.max_steps - counts["steps"])
            if len(ids) >= cfg.token_warning_fraction * max_ctx:
                observation += "\n" + prompts.token_warning
            obs_text, obs_ids = chat.observation(observation)
            if len(ids) + len(obs_ids) >= max_ctx:
                status = "context_limit"
                break
            start = len(ids)
            append(obs_ids)
            traj.messages.append(
                {"role": cfg.obs_role, "content": observation, "span": [start, len(ids)], "text": obs_text}
            )

        finish(status)
        t0 = time.monotonic()
        traj.patch = await get_patch(
            sandbox, cfg.repo_dir, base_commit, cfg.patch_exclude, cfg.setup_timeout_s
        )
        timing["patch_s"] = time.monotonic() - t0
    except Exception as e:
        finish("error")
        traj.error = traceback.format_exc()
        e.trajectory = traj  # type: ignore[attr-defined]  # the caller's boundary records the partial episode
        raise
    finally:
        traj.entropy = entropy
        total = time.monotonic() - t_start
        overhead = total - sum(timing.values())
        traj.metrics.update({**counts, **timing, "wall_s": total, "loop_overhead_s": overhead})
        traj.metrics["policy_tokens"] = sum(mask)
    return traj


def rerendered(tokenizer: Any, messages: list[dict[str, Any]], template_kw: dict[str, Any]) -> list[int]:
    """history=rerender: the conversation so far rendered by the template in one go (a chat server's prompt)."""
    convo = [{"role": m["role"], "content": m["content"]} for m in messages]
    return encode(tokenizer, render(tokenizer, convo, add_generation_prompt=True, **template_kw))


async def served_context(policy: Policy, requested: int) -> int:
    """The episode's context budget: the config's, capped to what a served policy serves (`cap_context`)."""
    cap = getattr(policy, "cap_context", None)
    return requested if cap is None else int(await cap(requested))


def through_first_stop(toks: list[int], stop_ids: tuple[int, ...]) -> list[int]:
    """The turn ends at its first stop token. A backend that generated past one (a server that was not told
    `<|endoftext|>` is a stop) would otherwise train `<|endoftext|><|im_end|>`: one end token per turn is trained."""
    for i, tok in enumerate(toks):
        if tok in stop_ids:
            return toks[: i + 1]
    return toks


def _maybe(values: list[float] | None, toks: list[int]) -> list[float] | None:
    return None if values is None else list(values)[: len(toks)]
