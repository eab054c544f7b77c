"""AEM's mechanism, tested directly: what one identical optimizer step does to entropy and to P(correct action).

No RL noise: for each of N frozen rollout batches from one start model, the same step (same weights, same data,
same optimizer, same loss divisor) is taken with four kinds of advantages, then the policy is measured on a fixed
probe set of decision states and the weights are restored:
    grpo      the base GRPO advantage
    aem       GRPO × α (AEM, λ, δ; the paper's group scope)
    reversed  GRPO × α with w = exp(+λH̃) (the paper's ablation)
    shuffled  GRPO × α permuted among the spans of each group (same α values, entropy link broken)
    per_turn  GRPO × α normalized among the spans of one turn index of a group (labelled ablation: no turn-type
              contrast, only the within-turn one)
Per batch the paired difference Δ(kind) − Δ(grpo) is taken; means and bootstrap intervals run over batches.

Environment: the toy two-turn task (swe_rl.experiments.toy) on its even digits: turn 1 is free, the first token of turn 2
is the decision (right = an even token id). Two SFT starts from one tiny model: demonstrations whose decision is
right with probability `p_correct` (low = failure-dominated groups, high = success-dominated groups). A decision
state = prompt + a sampled turn 1 + the observation; P(correct) = the probability mass on right-parity tokens there.
"""

from __future__ import annotations

import copy
import random
from dataclasses import dataclass, field
from typing import Any

import torch
from torch import Tensor

from swe_rl.algo.aem import aem_coefficients, aem_diagnostics
from swe_rl.algo.config import AlgoConfig
from swe_rl.algo.pipeline import compute_advantages, compute_policy_loss
from swe_rl.algo.spans import broadcast, span_index, span_mean
from swe_rl.experiments.toy import ToyRollouter, toy_tasks
from swe_rl.train.batch import collate, token_logprobs_entropy

KINDS = ("grpo", "aem", "reversed", "shuffled", "per_turn")
VOCAB_LO, VOCAB_HI = 100, 140  # the demonstrations' free tokens
DECISION_LO, DECISION_HI = 140, 144  # the demonstrations' decision tokens: 140, 142 even; 141, 143 odd


@dataclass
class ProbeConfig:
    batches: int = 50  # frozen rollout batches per start
    tasks: int = 8  # tasks per batch
    n: int = 8  # samples per task (the group)
    starts: dict[str, float] = field(
        default_factory=lambda: {"failure_dominated": 0.2, "success_dominated": 0.8}
    )  # SFT start name -> share of demonstrations with the right decision
    sft_steps: int = 150  # SFT steps per start (batch 32, Adam)
    sft_lr: float = 3e-3
    lr: float = 0.5  # the probe step's learning rate
    optimizer: str = "sgd"  # sgd (step ∝ gradient) or adam (Adam's first step is ≈ lr·sign(g))
    adam_warmup: int = 0  # adam: GRPO gradients of this many other batches fill its moments first (at lr 0)
    delta: float = 0.02  # AEM δ (nats): low enough that the range rule holds for few groups
    lam: float = 1.0  # AEM λ
    probe_states: int = 16  # decision states per task digit (5 even digits)
    model_size: str = "tiny"
    seed: int = 0
    threads: int = 1  # torch threads (a tiny model: more threads only contend on a shared machine)


def _demo_batch(tok: Any, rng: random.Random, p_correct: float, k: int, size: int) -> list[list[int]]:
    """SFT sequences in the toy's layout: prompt, k tokens, observation, k tokens (first = the decision)."""
    roll = ToyRollouter(None, tok, turn_tokens=k)
    obs = roll._ids("<|im_end|>\n<|im_start|>user\nok<|im_end|>\n<|im_start|>assistant\n")
    out = []
    for _ in range(size):
        d = 2 * rng.randrange(
            5
        )  # even digits only (toy_tasks(stride=2)): the right decision is an even token
        prompt = roll._ids(f"<|im_start|>user\ntoy task {d}<|im_end|>\n<|im_start|>assistant\n")
        a1 = [rng.randrange(VOCAB_LO, VOCAB_HI) for _ in range(k)]
        want = d % 2 if rng.random() < p_correct else 1 - d % 2
        first = rng.randrange(DECISION_LO + want, DECISION_HI, 2)
        a2 = [first] + [rng.randrange(VOCAB_LO, VOCAB_HI) for _ in range(k - 1)]
        out.append(prompt + a1 + obs + a2)
    return out


def sft_start(tok: Any, p_correct: float, cfg: ProbeConfig, seed: int) -> Any:
    """A tiny model trained on demonstrations with the right decision in a share p_correct of them."""
    from swe_rl.policy.tiny import build_tiny_model

    model = build_tiny_model(tok, size=cfg.model_size, seed=seed)
    opt = torch.optim.Adam(model.parameters(), lr=cfg.sft_lr)
    rng = random.Random(seed)
    model.train()
    for _ in range(cfg.sft_steps):
        ids = torch.tensor(_demo_batch(tok, rng, p_correct, 3, 32))
        logits = model(input_ids=ids).logits[:, :-1].float()
        loss = torch.nn.functional.cross_entropy(logits.reshape(-1, logits.shape[-1]), ids[:, 1:].reshape(-1))
        opt.zero_grad()
        loss.backward()
        opt.step()
    return model.eval()


@torch.no_grad()
def probe_states(model: Any, tok: Any, cfg: ProbeConfig) -> tuple[Tensor, Tensor]:
    """(S, L) decision-state token ids (prompt + sampled turn 1 + observation) and (S,) target parity."""
    roll = ToyRollouter(model, tok)
    tasks = toy_tasks(5, stride=2)
    trajs = roll.rollout(tasks, cfg.probe_states, cfg.seed + 999)
    cut = len(trajs[0].token_ids) - roll.turn_tokens
    ids = torch.tensor([t.token_ids[:cut] for t in trajs])
    parity = torch.tensor([tasks[i // cfg.probe_states].metadata["digit"] % 2 for i in range(len(trajs))])
    return ids, parity


@torch.no_grad()
def measure(model: Any, states: Tensor, parity: Tensor) -> dict[str, float]:
    """Mean entropy and mean P(right-parity token) of the next-token distribution at the decision states."""
    logp = torch.log_softmax(model(input_ids=states).logits[:, -1].float(), -1)  # (S, V)
    p = logp.exp()
    ent = -(p * logp).sum(-1)
    ok = (torch.arange(p.shape[-1])[None, :] % 2) == parity[:, None]
    return {"entropy": float(ent.mean()), "p_correct": float((p * ok).sum(-1).mean())}


def _algo(kind: str, cfg: ProbeConfig) -> AlgoConfig:
    aem = kind in ("aem", "reversed", "shuffled")
    mod = {"kind": "aem", "aem": {"lam": cfg.lam, "min_range": cfg.delta, "reverse": kind == "reversed"}}
    return AlgoConfig.model_validate(
        {"modulator": mod if aem else {"kind": "none"}, "loss": {"dual_clip": None}}
    )


def _shuffle_within_groups(alpha: Tensor, span_group: Tensor, gen: torch.Generator) -> Tensor:
    out = alpha.clone()
    for g in span_group.unique():
        idx = (span_group == g).nonzero().squeeze(1)
        out[idx] = alpha[idx[torch.randperm(idx.numel(), generator=gen)]]
    return out


def batch_advantages(
    kind: str, cfg: ProbeConfig, rewards: Tensor, groups: Tensor, mask: Tensor, ent: Tensor, seed: int
) -> tuple[Tensor, Tensor, dict[str, float]]:
    """(token advantages (B, T), loss mask (B, T), diagnostics) of one advantage kind."""
    valid = torch.ones_like(rewards, dtype=torch.bool)
    exits = ["submitted"] * rewards.shape[0]
    if kind == "per_turn":
        return _per_turn(cfg, compute_advantages(_algo("grpo", cfg), rewards, groups, valid, mask, ent, exits),
                         groups, ent)  # fmt: skip
    res = compute_advantages(_algo(kind, cfg), rewards, groups, valid, mask, ent, exits)
    if kind != "shuffled" or res.span_alpha is None:
        return res.token_advantages, res.loss_mask, res.diagnostics
    index = span_index(res.loss_mask)
    base = compute_advantages(_algo("grpo", cfg), rewards, groups, valid, mask, ent, exits)
    alpha = _shuffle_within_groups(res.span_alpha, index.group(groups), torch.Generator().manual_seed(seed))
    adv = base.token_advantages * broadcast(alpha.to(torch.float32), index, fill=1.0)
    return adv, res.loss_mask, res.diagnostics


def _per_turn(
    cfg: ProbeConfig, base: Any, groups: Tensor, ent: Tensor
) -> tuple[Tensor, Tensor, dict[str, float]]:
    """AEM with one normalization set per (group, turn index) instead of per group."""
    index = span_index(base.loss_mask)
    labels = index.group(groups) * (int(index.turn.max()) + 1) + index.turn
    h = span_mean(ent, index)
    alpha = aem_coefficients(h, labels, lam=cfg.lam, min_range=cfg.delta)
    span_adv = index.row_values(base.token_advantages.sum(1) / base.loss_mask.sum(1).clamp(min=1))
    diag = aem_diagnostics(alpha, h, labels, span_adv, min_range=cfg.delta)
    adv = base.token_advantages * broadcast(alpha.to(torch.float32), index, fill=1.0)
    return adv, base.loss_mask, {f"per_turn/{k}": v for k, v in diag.items()}


def _grpo_loss(model: Any, batch: Any, adv: Tensor, mask: Tensor, old_lp: Tensor, cfg: ProbeConfig) -> Tensor:
    lp, _ = token_logprobs_entropy(model, batch, with_entropy=False)
    return compute_policy_loss(_algo("grpo", cfg), lp, old_lp, adv, mask)[0]


def _rollout(roll: ToyRollouter, tok: Any, tasks: list[Any], rng: random.Random, cfg: ProbeConfig,
             seed: int) -> tuple[Any, Tensor, Tensor, Tensor, Tensor]:  # fmt: skip
    """One frozen batch: (batch, rewards (B,), group ids (B,), old log-probs (B, T), old entropy (B, T))."""
    trajs = roll.rollout([rng.choice(tasks) for _ in range(cfg.tasks)], cfg.n, seed)
    batch = collate(trajs, tok.pad_token_id)
    with torch.no_grad():
        old_lp, ent = token_logprobs_entropy(roll.model, batch)
    rewards = torch.tensor([t.reward for t in trajs])
    return batch, rewards, torch.arange(cfg.tasks).repeat_interleave(cfg.n), old_lp, ent  # type: ignore[return-value]


def warm_adam(roll: ToyRollouter, tok: Any, tasks: list[Any], cfg: ProbeConfig) -> dict[str, Any] | None:
    """Adam's state after `adam_warmup` GRPO gradients of other batches, taken at lr 0 (weights unchanged)."""
    if cfg.optimizer != "adam" or cfg.adam_warmup <= 0:
        return None
    model = roll.model
    opt = torch.optim.Adam(model.parameters(), lr=0.0)
    rng = random.Random(cfg.seed + 1)
    for w in range(cfg.adam_warmup):
        batch, rewards, groups, old_lp, ent = _rollout(roll, tok, tasks, rng, cfg, 10**6 + w)
        adv, mask, _ = batch_advantages("grpo", cfg, rewards, groups, batch.loss_mask, ent, w)
        opt.zero_grad()
        _grpo_loss(model, batch, adv, mask, old_lp, cfg).backward()
        opt.step()
    return copy.deepcopy(opt.state_dict())


def one_step(model: Any, start: dict[str, Tensor], batch: Any, adv: Tensor, mask: Tensor, old_lp: Tensor,
             cfg: ProbeConfig, opt_state: dict[str, Any] | None = None) -> None:  # fmt: skip
    """Reset to `start` (and Adam to `opt_state`), then one optimizer step of the PPO loss (ratio 1: the plain
    policy gradient)."""
    model.load_state_dict(start)
    model.train()
    params = list(model.parameters())
    opt = (
        torch.optim.SGD(params, lr=cfg.lr) if cfg.optimizer == "sgd" else torch.optim.Adam(params, lr=cfg.lr)
    )
    if opt_state is not None:
        opt.load_state_dict(copy.deepcopy(opt_state))
        for group in opt.param_groups:
            group["lr"] = cfg.lr
    loss = _grpo_loss(model, batch, adv, mask, old_lp, cfg)
    opt.zero_grad()
    loss.backward()
    opt.step()
    model.eval()


def run_start(name: str, p_correct: float, cfg: ProbeConfig, tok: Any) -> dict[str, Any]:
    """Every batch of one start: Δentropy and ΔP(correct) per kind, the batch's success rate, AEM diagnostics."""
    model = sft_start(tok, p_correct, cfg, cfg.seed)
    start = copy.deepcopy(model.state_dict())
    states, parity = probe_states(model, tok, cfg)
    before = measure(model, states, parity)
    roll = ToyRollouter(model, tok)
    tasks = toy_tasks(5, stride=2)
    opt_state = warm_adam(roll, tok, tasks, cfg)
    rng = random.Random(cfg.seed)
    rows: list[dict[str, Any]] = []
    for b in range(cfg.batches):
        model.load_state_dict(start)
        batch, rewards, groups, old_lp, ent = _rollout(roll, tok, tasks, rng, cfg, cfg.seed * 7919 + b)
        row: dict[str, Any] = {"batch": b, "success": float(rewards.mean())}
        for kind in KINDS:
            adv, mask, diag = batch_advantages(kind, cfg, rewards, groups, batch.loss_mask, ent, b)
            one_step(model, start, batch, adv, mask, old_lp, cfg, opt_state)
            after = measure(model, states, parity)
            row[kind] = {k: after[k] - before[k] for k in after}
            if kind in ("aem", "per_turn"):
                row[f"{kind}_diag"] = {k: v for k, v in diag.items() if k.startswith(("aem/", "per_turn/"))}
        rows.append(row)
    model.load_state_dict(start)
    return {"name": name, "p_correct_demos": p_correct, "before": before, "batches": rows}


def paired(rows: list[dict[str, Any]], kind: str, metric: str, seed: int = 0) -> dict[str, float]:
    """Mean of Δ(kind) − Δ(grpo) over batches with a 95% bootstrap interval (10,000 resamples)."""
    import numpy as np

    d = np.array([r[kind][metric] - r["grpo"][metric] for r in rows])
    boot = np.random.default_rng(seed).choice(d, size=(10_000, d.size)).mean(1)
    lo, hi = np.percentile(boot, [2.5, 97.5])
    return {"mean": float(d.mean()), "lo": float(lo), "hi": float(hi), "n": int(d.size),
            "frac_positive": float((d > 0).mean())}  # fmt: skip


def summarize(results: list[dict[str, Any]]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for res in results:
        rows = res["batches"]
        diag = [r["aem_diag"] for r in rows]
        s: dict[str, Any] = {
            "success_rate": sum(r["success"] for r in rows) / len(rows),
            "before": res["before"],
            "grpo_delta": {m: sum(r["grpo"][m] for r in rows) / len(rows) for m in ("entropy", "p_correct")},
            "aem_frac_groups_range_rule": sum(d.get("aem/frac_groups_range_rule", 1.0) for d in diag)
            / len(diag),
            "aem_alpha_std": sum(d.get("aem/alpha_std", 0.0) for d in diag) / len(diag),
            "per_turn_frac_groups_range_rule": sum(
                r["per_turn_diag"].get("per_turn/frac_groups_range_rule", 1.0) for r in rows
            )
            / len(rows),
        }
        for kind in KINDS[1:]:
            s[kind] = {m: paired(rows, kind, m) for m in ("entropy", "p_correct")}
        out[res["name"]] = s
    return out


def plot(summary: dict[str, Any], path: Any) -> Any:
    """Two panels (Δentropy, ΔP(correct) minus GRPO's), bars per kind and start, 95% bootstrap intervals."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 2, figsize=(9, 3.6))
    starts = list(summary)
    width = 0.8 / len(starts)
    for ax, metric, title in zip(axes, ("entropy", "p_correct"),
                                 ("Δ decision entropy − GRPO's (nats)", "Δ P(correct) − GRPO's"), strict=True):  # fmt: skip
        for i, st in enumerate(starts):
            xs = [k + i * width for k in range(len(KINDS) - 1)]
            stats = [summary[st][kind][metric] for kind in KINDS[1:]]
            means = [s["mean"] for s in stats]
            err = [[m - s["lo"] for m, s in zip(means, stats, strict=True)],
                   [s["hi"] - m for m, s in zip(means, stats, strict=True)]]  # fmt: skip
            ax.bar(
                xs,
                means,
                width,
                yerr=err,
                capsize=3,
                label=f"{st} (success {summary[st]['success_rate']:.0%})",
            )
        ax.axhline(0, color="black", lw=0.8)
        ax.set_xticks([k + width * (len(starts) - 1) / 2 for k in range(len(KINDS) - 1)], list(KINDS[1:]))
        ax.set_title(title, fontsize=9)
        ax.grid(alpha=0.3, axis="y")
    axes[0].legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def run_probe(cfg: ProbeConfig) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    from swe_rl.policy.tiny import build_tokenizer

    torch.manual_seed(cfg.seed)
    threads = torch.get_num_threads()
    torch.set_num_threads(cfg.threads)
    try:
        tok = build_tokenizer()
        results = [run_start(name, p, cfg, tok) for name, p in cfg.starts.items()]
    finally:
        torch.set_num_threads(threads)
    return results, summarize(results)
