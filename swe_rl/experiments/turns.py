"""Per-decision statistics of a decisions-environment checkpoint (the outcome studies' descriptive analysis).

`decision_stats(model_dir, tasks, n)`: n episodes per task at T = 1 with the held-out evaluator's seed, then per
turn the share of right decisions and the mean entropy of the decision token, plus AEM's premise (how much a
turn's span-mean entropy varies among one task's samples). Used by scripts/outcome_report.py and by the branch
experiment's collapse count (swe_rl.experiments.branch).
"""

from __future__ import annotations

import statistics
from pathlib import Path
from typing import Any

import torch

from swe_rl.experiments.decisions import TURNS, DecisionRollouter
from swe_rl.train.batch import collate, token_logprobs_entropy

EVAL_SEED = 10_000  # HeldOutEval's sampling seed: the same episodes the studies' evaluations drew


def decision_stats(model_dir: Path, tasks: list[Any], n: int, reason_first: bool = False) -> dict[str, Any]:
    from transformers import AutoModelForCausalLM

    from swe_rl.policy.tiny import load_tokenizer

    tok = load_tokenizer(model_dir)
    model = AutoModelForCausalLM.from_pretrained(model_dir, dtype=torch.float32).eval()
    trajs = DecisionRollouter(model, tok, reason_first=reason_first).rollout(tasks, n, EVAL_SEED)
    batch = collate(trajs, tok.pad_token_id)
    with torch.no_grad():
        _, maybe_ent = token_logprobs_entropy(model, batch, chunk=64)
    assert maybe_ent is not None  # with_entropy defaults to True
    ent = maybe_ent
    # success = the final patch is right (how the evaluations, and so the primary metric, grade: as SWE-bench
    # grades the final patch); resolved = right and submitted (what the training reward spec pays)
    out: dict[str, Any] = {"success": statistics.mean(float(t.reward or 0.0) for t in trajs),
                           "resolved": statistics.mean(float(t.resolved) for t in trajs)}  # fmt: skip
    for k, name in enumerate(TURNS):
        # the decision token: the span's first token, or its last in reason-then-act turns
        starts = [t.messages[k]["span"][1 if reason_first else 0] - int(reason_first) for t in trajs]
        spans = torch.tensor([float(ent[i, a:b].mean()) for i, (a, b) in
                              enumerate(t.messages[k]["span"] for t in trajs)]).view(len(tasks), n)  # fmt: skip
        out[name] = {
            "right": statistics.mean(float(t.metrics["correct"][k]) for t in trajs),
            "entropy": float(ent[torch.arange(len(trajs)), torch.tensor(starts)].mean()),
            # AEM's premise: how much this turn's span-mean entropy varies among one task's samples
            "span_entropy_sd_within_group": float(spans.std(1).mean()),
        }
    return out
