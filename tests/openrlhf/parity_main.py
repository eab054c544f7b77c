"""Subprocess half of test_step_parity.py: the OpenRLHF experience path, run with the real classes.

    PYTHONPATH=tests/openrlhf/cuda_fakes:. python tests/openrlhf/parity_main.py JOB.pkl OUT.pkl

Its own process because OpenRLHF's trainer modules import only with the flash-attn fake on the path (which must not
leak into the other tests). Per case of JOB.pkl (upstream's parsed args, our AemConfig, the executor's responses,
per-sample old / new log-probs and entropy, each (A,) as upstream aligns them):
1. our `SweRlSamplesGenerator._process_response_into_experience` (upstream's, plus the action part);
2. upstream's `split_rollout_samples` into rollout micro-batches (groups cut across them);
3. what upstream's `make_experience` attaches: the actor's old log-probs, no reference, zero KL; our maker keeps
   the actor's exact entropy per micro-batch (`SweRlExperienceMaker.entropy`, as `_flatten_results` does);
4. our `SweRlExperienceMaker.compute_advantages_and_returns` (the seam around upstream's estimator);
5. upstream's replay-buffer path (`split_experience_batch`, `remove_padding_in_sequences`, `make_experience_batch`)
   into training micro-batches, upstream's `iter_grad_accum_global_norm` normalizers for one optimizer step and
   upstream's `PolicyLoss`, each micro-batch's loss scaled by 1/gas as DeepSpeed scales it.
A case with a `mutant` runs with that bug planted in our seam (`planted`), for the test's check that it fails.
Named stand-in: the current policy's log-probs of each training micro-batch (what `training_step`'s actor forward
computes) are the job's `new` values, found by the sample's token ids. Returned per sample (by rollout index):
advantages, the action mask the loss sees, the loss's gradient with respect to those log-probs; and the loss.
"""

from __future__ import annotations

import contextlib
import pickle
import sys
import types
from collections.abc import Iterator

import torch


def _pad(rows: list[torch.Tensor]) -> torch.Tensor:
    width = max(r.numel() for r in rows)
    return torch.stack([torch.nn.functional.pad(r, (0, width - r.numel())) for r in rows])


def _neighbour_turn(ent: torch.Tensor, idx) -> torch.Tensor:
    """Every turn's tokens carry a neighbouring turn's mean entropy (the previous one; the first turn the next)."""
    from swe_rl.algo.spans import broadcast, span_mean

    s = torch.arange(idx.traj.numel())
    nxt = torch.cat([idx.traj[1:] == idx.traj[:-1], torch.zeros(1, dtype=torch.bool)])
    return broadcast(span_mean(ent, idx)[torch.where(idx.turn > 0, s - 1, torch.where(nxt, s + 1, s))], idx)


@contextlib.contextmanager
def planted(mutant: str | None) -> Iterator[None]:
    """The bugs test_step_parity must catch, planted in our OpenRLHF seam for one case and removed after it
    (the test plants the executor's shifted action mask itself, in the job)."""
    from swe_rl.train.openrlhf import aem_seam, valid_groups

    saved = aem_seam.apply_aem, valid_groups.row_valid
    if mutant == "masked_member_in_baseline":  # an infra failure counted as a real 0 by the group statistics
        valid_groups.row_valid = lambda exp: torch.ones(exp.action_mask.shape[0], dtype=torch.bool)
    elif mutant == "aem_span_from_wrong_turn":
        aem_seam.apply_aem = lambda adv, ent, idx, *a, **k: saved[0](
            adv, _neighbour_turn(ent, idx), idx, *a, **k
        )
    try:
        yield
    finally:
        aem_seam.apply_aem, valid_groups.row_valid = saved


def run_case(case: dict) -> dict:
    with planted(case.get("mutant")):
        return _run_case(case)


def _run_case(case: dict) -> dict:
    from openrlhf.models.loss import PolicyLoss
    from openrlhf.trainer.ppo_utils.experience import (
        make_experience_batch,
        remove_padding_in_sequences,
        split_experience_batch,
    )
    from openrlhf.trainer.ppo_utils.kl_controller import FixedKLController
    from openrlhf.utils.loss_utils import iter_grad_accum_global_norm

    from swe_rl.train.openrlhf.actors import SweRlExperienceMaker, SweRlSamplesGenerator
    from swe_rl.train.openrlhf.config import AemConfig

    args = case["args"]
    strategy = types.SimpleNamespace(args=args, accumulated_gradient=case["gas"])
    tokenizer = types.SimpleNamespace(pad_token_id=0)
    gen = SweRlSamplesGenerator(strategy, None, None, tokenizer, [])
    samples = [gen._process_response_into_experience(r, max_len=args.data.max_len) for r in case["responses"]]
    maker = SweRlExperienceMaker(None, None, None, None, FixedKLController(0.0), strategy, tokenizer,
                                 aem=AemConfig.model_validate(case["aem"]))  # fmt: skip
    exps = maker.split_rollout_samples(samples)
    entropy = []
    for e in exps:  # step 3: what make_experience attaches
        e.action_log_probs = _pad([torch.tensor(case["old"][i]) for i in e.index])
        e.base_action_log_probs, e.values = None, None
        e.kl = torch.zeros_like(e.action_log_probs)
        e.info["kl"] = torch.zeros(len(e.index))
        entropy.append(_pad([torch.tensor(case["ent"][i]) for i in e.index]))
    maker.entropy = entropy
    exps = maker.compute_advantages_and_returns(exps)

    out: dict = {"adv": {}, "mask": {}, "grad": {}}
    for e in exps:
        for b, i in enumerate(e.index):
            a = len(case["old"][i])
            out["adv"][i] = e.advantages[b, :a].clone()
            out["mask"][i] = e.action_mask[b, :a].clone()
    key_of = {tuple(r["observation_tokens"]): i for i, r in enumerate(case["responses"])}
    items = []
    for e in exps:  # step 5: the replay buffer's append, then its collate in DataLoader order
        items += remove_padding_in_sequences(split_experience_batch(e))
    order = torch.randperm(len(items), generator=torch.Generator().manual_seed(0)).tolist()
    micro = case["micro_batch"]
    batches = [
        make_experience_batch([items[j] for j in order[s : s + micro]]) for s in range(0, len(items), micro)
    ]
    loss_fn = PolicyLoss(clip_eps_low=args.actor.eps_clip_low_high[0], clip_eps_high=args.actor.eps_clip_low_high[1],
                         dual_clip=args.actor.dual_clip, token_level_loss=args.actor.loss_agg_mode == "token-mean",
                         policy_loss_type=args.actor.policy_loss_type)  # fmt: skip
    total = torch.zeros(())
    for exp, norm in iter_grad_accum_global_norm(batches, strategy, case["gas"], lambda e: e.action_mask):
        ids = [
            key_of[tuple(exp.sequences[b][exp.attention_mask[b].bool()].tolist())]
            for b in range(len(exp.sequences))
        ]
        new = _pad([torch.tensor(case["new"][i]) for i in ids]).requires_grad_(True)
        assert new.shape == exp.action_mask.shape, (new.shape, exp.action_mask.shape)
        loss, *_ = loss_fn(new, exp.action_log_probs, exp.advantages, action_mask=exp.action_mask, **norm)
        (loss / case["gas"]).backward()  # DeepSpeed scales each micro-batch's loss by 1/gas
        total = total + loss.detach() / case["gas"]
        for b, i in enumerate(ids):
            out["grad"][i] = new.grad[b, : len(case["new"][i])].clone()
    out["loss"] = float(total)
    return out


def main() -> int:
    with open(sys.argv[1], "rb") as f:
        job = pickle.loads(f.read())
    results = {name: run_case(case) for name, case in job.items()}
    with open(sys.argv[2], "wb") as f:
        pickle.dump(results, f)
    return 0


if __name__ == "__main__":
    sys.exit(main())
