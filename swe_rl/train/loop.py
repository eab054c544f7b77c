"""The built-in RL training loop: one readable function, single process, CPU or one GPU.

sample tasks -> n rollouts each -> rewards -> one old-policy forward (old log-probs + chunked token entropy)
-> swe_rl.algo advantages (estimator, filtering, AEM / EMPG) -> PPO-clip minibatch updates for E epochs
(+ optional EPO) -> the rollout policy shares the model object, so it samples from the new weights next step.
"""

from __future__ import annotations

import copy
import json
import random
import time
from collections import Counter, defaultdict
from collections.abc import Callable, Sequence
from typing import Any, Protocol

import torch

from swe_rl.agent.trajectory import Trajectory
from swe_rl.algo.epo import EntropyHistory, batch_token_mean
from swe_rl.grading import police_episodes
from swe_rl.grading import step_metrics as grading_metrics
from swe_rl.runs import RunDir
from swe_rl.tasks.task import Task
from swe_rl.train.batch import collate, minibatches, token_logprobs_entropy
from swe_rl.train.checkpoint import TrainState, latest, load_checkpoint, prune, save_checkpoint
from swe_rl.train.config import TrainConfig
from swe_rl.train.device import autocast, autocast_dtype, model_device
from swe_rl.train.objective import (
    check_rollout_logprobs,
    global_count,
    masked_mean,
    microbatch_loss,
    needs_current_entropy,
    reference_logprobs,
    step_advantages,
    update_rows,
)


class Rollouter(Protocol):
    """Runs n episodes of each task with the current weights; returns len(tasks) * n graded trajectories,
    task-major (all samples of tasks[0] first). `seed` makes the sampling reproducible. Sync: an async
    implementation keeps its own event loop (sandbox connections are bound to one loop)."""

    def rollout(self, tasks: list[Task], n: int, seed: int) -> list[Trajectory]: ...


class UnscoredSteps(RuntimeError):
    """`rollout.max_unscored_steps` RL steps in a row in which no episode could be scored: the run stops (its
    checkpoints, metrics and episode records so far stay; `--resume` continues from the newest checkpoint)."""


def why_unscored(trajs: Sequence[Trajectory]) -> str:
    """What ended a step's unscored episodes: failure kinds with counts, then the first error's last line."""
    kinds = Counter(
        t.metrics.get("infra_failure") or (t.metrics.get("grading") or {}).get("failure") or "no reward"
        for t in trajs
    )
    text = ", ".join(f"{k} {v} of {len(trajs)}" for k, v in kinds.most_common())
    first = next((t.error for t in trajs if t.error and t.error.strip()), None)
    return f"{text}; the first error: {first.strip().splitlines()[-1]}" if first else text


TaskSampler = Callable[[list[Task], int, random.Random], list[Task]]
Evaluator = Callable[[int], dict[str, float]]  # step -> held-out metrics


def step_seed(seed: int, step: int) -> int:
    return (seed * 1_000_003 + step * 7919) % (2**31 - 1)


def lr_at(lr: float, warmup: int, step: int) -> float:
    """Linear warmup over the first `warmup` RL steps (1-based), then constant."""
    return lr * min(1.0, step / warmup) if warmup > 0 else lr


def train(
    cfg: TrainConfig,
    run: RunDir,
    model: Any,
    tokenizer: Any,
    rollouter: Rollouter,
    tasks: list[Task],
    *,
    sample_tasks: TaskSampler,
    evaluate: Evaluator | None = None,
    resume: bool = False,
    stop_after: int | None = None,
    on_step: Callable[[int, dict[str, Any]], None] | None = None,
) -> TrainState:
    """Run RL steps until cfg.steps (or `stop_after` steps in this call, for tests). Returns the final state.
    `on_step(step, metrics)` runs after each step's metrics are logged (progress bars)."""
    algo = cfg.algo
    # the model's device (load_policy_model put it on train.device): every tensor of a step is made there
    device, amp = model_device(model), autocast_dtype(cfg.autocast)
    opt = torch.optim.AdamW(
        model.parameters(), lr=cfg.optim.lr, betas=cfg.optim.betas, weight_decay=cfg.optim.weight_decay
    )
    task_rng = random.Random(cfg.seed)
    state = TrainState(step=0, task_rng=task_rng.getstate())
    ckpt = latest(run.checkpoints) if resume else None
    if ckpt is not None:
        state = load_checkpoint(ckpt, model, opt)
        task_rng.setstate(state.task_rng)
    history = EntropyHistory(list(state.epo_history))  # EPO's window of past batch entropies
    # A frozen copy of the starting weights, only when a reference-KL loss is configured.
    ref_model = copy.deepcopy(model).eval() if algo.loss.kl_coef > 0 else None
    writer = _tensorboard(run) if cfg.tensorboard else None
    pad_id = tokenizer.pad_token_id
    if evaluate is not None and cfg.eval.every and state.step == 0:  # the starting point of the curves
        run.log_metrics(0, {f"eval/{k}": v for k, v in evaluate(0).items()})
    n = cfg.rollout.n_samples
    done_here = 0
    unscored = 0  # steps in a row in which no episode could be scored
    save_due = False
    while state.step < cfg.steps and (stop_after is None or done_here < stop_after):
        step = state.step + 1
        seed = step_seed(cfg.seed, step)
        t0 = time.monotonic()
        counters = rollouter.stats() if hasattr(rollouter, "stats") else {}

        # 1. Rollouts: tasks with families mixed, n samples each, graded.
        batch_tasks = sample_tasks(tasks, cfg.rollout.tasks_per_step, task_rng)
        torch.manual_seed(seed)
        model.eval()
        trajs = rollouter.rollout(batch_tasks, n, seed)
        t_rollout = time.monotonic() - t0
        # suspicious episodes get the reward policy's reward before anything reads rewards (swe_rl.grading.reward)
        integrity = police_episodes(trajs, algo.reward.suspicious)
        rewards = torch.tensor(
            [t.reward if t.reward is not None else 0.0 for t in trajs], dtype=torch.float32, device=device
        )
        valid = torch.tensor([t.reward is not None for t in trajs], device=device)
        unscored = 0 if bool(valid.any()) else unscored + 1
        group_ids = torch.arange(len(batch_tasks), device=device).repeat_interleave(n)
        exits = [t.exit_status or "unknown" for t in trajs]
        check_rollout_logprobs(algo, trajs)

        # 2. One old-policy forward: old log-probs and token entropy, (B, T), no grad, at the rollout
        # temperature (as every trainer forward below), so π_old is the distribution that sampled the tokens.
        t1 = time.monotonic()
        temp = cfg.rollout.temperature
        batch = collate(trajs, pad_id, cfg.rollout.max_len).to(device)
        with torch.no_grad(), autocast(device, amp):
            parts = [
                token_logprobs_entropy(
                    model, batch.select(idx), chunk=cfg.optim.logit_chunk, temperature=temp
                )
                for idx in torch.arange(batch.size, device=device).split(cfg.optim.micro_batch)
            ]
        old_lp = torch.cat([p[0] for p in parts])
        old_ent = torch.cat([p[1] for p in parts])  # type: ignore[misc]
        # Sampler vs trainer log-probs on policy tokens: ~0 when the rollouts are on-policy (same weights,
        # same temperature); a large value means the PPO ratio is measured against the wrong distribution.
        sampled = batch.loss_mask.bool() & (batch.rollout_logprobs != 0)
        lp_gap = float((old_lp - batch.rollout_logprobs)[sampled].abs().mean()) if sampled.any() else 0.0

        # 3. Advantages through swe_rl.algo: estimator, compact/dynamic filtering, AEM or EMPG.
        adv, loss_mask, diag, turns = step_advantages(
            algo, rewards, group_ids, valid, batch.loss_mask, old_ent, exits, trajectories=trajs,
            action_mask=batch.action_mask,
        )  # fmt: skip

        # 4. PPO-clip minibatch updates for E epochs over all rows: the same number of updates and the same loss
        # divisor whatever the advantages are (rows without policy tokens are skipped inside a minibatch).
        rows = update_rows(loss_mask)
        gen = torch.Generator().manual_seed(seed)  # a CPU stream on every device: the same minibatches
        for group in opt.param_groups:  # derived from the step, so a resumed run gets the same schedule
            group["lr"] = lr_at(cfg.optim.lr, cfg.optim.warmup, step)
        model.train()
        stats: dict[str, float] = defaultdict(float)
        for _ in range(cfg.optim.epochs if rows.numel() else 0):
            for mb in minibatches(int(rows.numel()), cfg.optim.minibatch, gen):
                mb_rows = rows[mb]
                opt.zero_grad(set_to_none=True)
                count = None if algo.epo.enabled else global_count(algo, loss_mask[mb_rows])
                live = mb_rows[loss_mask[mb_rows].sum(1) > 0]
                # an empty tensor splits into one empty piece: a minibatch with no policy token has no forward
                for micro in live.split(cfg.optim.micro_batch) if live.numel() else ():
                    sub = batch.select(micro)
                    with autocast(device, amp):
                        new_lp, new_ent = token_logprobs_entropy(
                            model, sub, chunk=cfg.optim.logit_chunk, with_entropy=needs_current_entropy(algo),
                            temperature=temp,
                        )  # fmt: skip
                        ref_lp = reference_logprobs(ref_model, sub, cfg.optim.logit_chunk, temp)
                    loss, info = microbatch_loss(
                        algo, new_lp, old_lp[micro], adv[micro], loss_mask[micro], new_ent,
                        ref_lp=ref_lp, history=history,
                        step=step - 1, count=count, fraction=micro.numel() / max(live.numel(), 1),
                        rollout_lp=batch.rollout_logprobs[micro],
                    )  # fmt: skip
                    loss.backward()
                    for k, v in info.items():
                        stats[k] += v * micro.numel()
                    stats["rows"] += micro.numel()
                clip = cfg.optim.grad_clip if cfg.optim.grad_clip > 0 else float("inf")
                stats["grad_norm"] += float(torch.nn.utils.clip_grad_norm_(model.parameters(), clip))
                stats["updates"] += 1
                opt.step()
        model.eval()
        t_train = time.monotonic() - t1

        # 5. Book-keeping: EPO history, metrics, trajectories, checkpoint.
        pmask = batch.loss_mask.bool()
        history.append(batch_token_mean(old_ent, loss_mask) if loss_mask.any() else 0.0)
        state.epo_history = list(history.values)
        state.step, state.task_rng = step, task_rng.getstate()
        done_here += 1
        metrics = _step_metrics(
            trajs, rewards, valid, group_ids, exits, old_ent, adv, loss_mask, pmask, stats, diag
        )
        metrics.update(integrity)
        metrics.update(grading_metrics((t.metrics.get("grading") or {}).get("tests") for t in trajs))
        metrics.update(
            time_rollout_s=t_rollout,
            # summed over concurrent episodes (includes waiting for a free sandbox slot)
            time_grading_sum_s=sum(float(t.metrics.get("grading_s", 0.0)) for t in trajs),
            time_tools_sum_s=sum(float(t.metrics.get("tools_s", 0.0)) for t in trajs),
            time_train_s=t_train,
            time_step_s=time.monotonic() - t0,
            active_rows=int((loss_mask.sum(1) > 0).sum()),
            rollout_lp_gap=lp_gap,
            lr=lr_at(cfg.optim.lr, cfg.optim.warmup, step),
        )
        if counters:  # per-step deltas of the rollouter's own counters (sandbox, grading, generation)
            now = rollouter.stats()  # type: ignore[attr-defined]
            metrics.update({f"cost/{k}": v - counters[k] for k, v in now.items()})
        if evaluate is not None and cfg.eval.every and step % cfg.eval.every == 0:
            metrics.update({f"eval/{k}": v for k, v in evaluate(step).items()})
        run.log_metrics(step, metrics)
        if on_step is not None:
            on_step(step, metrics)
        if writer is not None:
            for k, v in metrics.items():
                if isinstance(v, (int, float)):
                    writer.add_scalar(k, v, step)
        _write_trajectories(run, step, trajs[: cfg.log_trajectories], turns)
        limit = cfg.rollout.max_unscored_steps
        if limit and unscored >= limit:  # before a checkpoint: a resumed run does these steps again
            raise UnscoredSteps(
                f"rollout.max_unscored_steps: no episode could be scored in {unscored} RL steps in a row "
                f"(steps {step - unscored + 1}-{step}), so the run stops. Step {step}: {why_unscored(trajs)}. "
                f"Metrics and episode records so far are in {run.root}; `--resume` continues from the newest "
                "checkpoint"
            )
        # an unscored step learned nothing: its due checkpoint waits for the next step that did (a resumed run
        # repeats the failed steps), except the last step's
        save_due = save_due or bool(cfg.save_every and step % cfg.save_every == 0)
        if (save_due and not unscored) or step == cfg.steps:
            save_due = False
            save_checkpoint(run.checkpoints, model, opt, state, tokenizer)
            prune(run.checkpoints, cfg.keep_checkpoints)
    if writer is not None:
        writer.close()
    return state


def _step_metrics(
    trajs: Sequence[Trajectory],
    rewards: torch.Tensor,
    valid: torch.Tensor,
    group_ids: torch.Tensor,
    exits: list[str],
    ent: torch.Tensor,
    adv: torch.Tensor,
    loss_mask: torch.Tensor,
    pmask: torch.Tensor,
    stats: dict[str, float],
    diag: dict[str, float],
) -> dict[str, Any]:
    """Per-step scalars: reward, resolve rate, mixed groups, exit reasons, entropy by sign of A, PPO stats."""
    g = int(group_ids.max()) + 1
    per_group = [rewards[(group_ids == i) & valid] for i in range(g)]
    mixed = sum(1 for r in per_group if r.numel() > 1 and bool((r != r[0]).any()))
    m = loss_mask.bool()
    rows = max(stats["rows"], 1)
    out: dict[str, Any] = {
        "reward_mean": float(rewards[valid].mean()) if valid.any() else 0.0,
        "resolve_rate": sum(t.resolved for t in trajs) / len(trajs),
        "valid_frac": float(valid.float().mean()),
        "mixed_group_frac": mixed / g,
        "entropy_mean": float(ent[pmask].mean()) if pmask.any() else 0.0,
        "entropy_pos_adv": masked_mean(ent, m & (adv > 0)),
        "entropy_neg_adv": masked_mean(ent, m & (adv < 0)),
        "entropy_zero_adv": masked_mean(ent, m & (adv == 0)),
        "policy_tokens": int(pmask.sum()),
        "total_tokens": sum(len(t.token_ids) for t in trajs),
        "turns_mean": sum(int(t.metrics.get("steps", 0)) for t in trajs) / len(trajs),
        "updates": int(stats["updates"]),
        "grad_norm": stats["grad_norm"] / max(stats["updates"], 1),
    }
    for k, v in stats.items():
        if k not in ("rows", "updates", "grad_norm"):
            out[k] = v / rows
    out.update({f"exit/{k}": v for k, v in Counter(exits).items()})
    out.update({f"algo/{k}": v for k, v in diag.items()})
    return out


def _write_trajectories(
    run: RunDir, step: int, trajs: Sequence[Trajectory], turns: Sequence[list[dict[str, Any]]]
) -> None:
    if not trajs:
        return
    # with the grader's word on each (failure label, test report, test-run limit, labels, an unresolved log's
    # tail): why a reward was 0 or None is read beside the episode; per turn, its entropy, AEM's α and the
    # advantage it received (objective.turn_records), and the patch the episode submitted
    with (run.trajectories / f"step_{step:06d}.jsonl").open("w") as f:
        for t, turn in zip(trajs, turns, strict=False):
            rec = {"task_id": t.task_id, "reward": t.reward, "exit": t.exit_status, "messages": t.messages}
            rec["patch"], rec["turns"] = t.patch, turn
            rec["grading"] = t.metrics.get("grading")
            if t.error:  # an infrastructure error's traceback
                rec["error"] = t.error
            f.write(json.dumps(rec) + "\n")


def _tensorboard(run: RunDir) -> Any:
    try:
        from torch.utils.tensorboard import SummaryWriter
    except ImportError as e:  # tensorboard is optional
        raise RuntimeError(
            "tensorboard=true needs the `tensorboard` package (pip install tensorboard)"
        ) from e
    return SummaryWriter(str(run.root / "tb"))
