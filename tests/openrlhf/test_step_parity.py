"""Step parity between the two trainers (issue 37 item 3): for the same trajectories (token ids, rewards, action
masks, old / new log-probs, entropies) the OpenRLHF experience path and the built-in trainer give the same
advantages, the same per-token AEM coefficients, the same policy loss and the same gradient, to 1e-5.

OpenRLHF half (parity_main.py, its own process): the executor's responses (`trajectory_to_response`) through our
samples generator and experience maker (upstream's sample processing, micro-batching, estimator and loss inside).
Built-in half (here): `collate` and the trainer's own `objective.advantages` / `microbatch_loss`, one minibatch.
The recipe is ours on both sides: the OpenRLHF config goes through `flags.to_argv` and upstream's parser; the
built-in AlgoConfig is its translation (`builtin_algo`): the same estimator (group_norm's 1e-9), clip, no dual clip
(upstream's recipe sets none), token-mean, and the same reward spec and compact filtering.

The batch: 4 tasks x 4 samples, 2-4 turns of 2-9 tokens with observations between, so spans differ in length
and position; a group with an infrastructure failure (reward None, out of the baseline), one with a max_steps
episode (compact-filtered: reward 0 in the baseline, no gradient), one all-solved group; rollout micro-batches of
3 and training micro-batches of 4 (OpenRLHF) / 5 (built-in), so groups and divisors are cut differently.
AEM's α is compared as the ratio of the modulated to the unmodulated advantage on each token (both trainers).
"""

from __future__ import annotations

import os
import pickle
import random
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from swe_rl.agent.trajectory import Trajectory
from swe_rl.algo.config import AlgoConfig
from swe_rl.train.openrlhf.config import OpenRLHFTrainConfig
from swe_rl.train.openrlhf.executor import trajectory_to_response
from swe_rl.train.openrlhf.flags import to_argv

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
N = 4  # samples per task
# (rewards, exits) per group: None = infra failure; max_steps = not submitted (reward 0, compact-filtered)
GROUPS = [
    ([1.0, 0.0, 1.0, 0.0], ["submitted"] * 4),
    ([1.0, 1.0, 0.0, None], ["submitted", "submitted", "submitted", "error"]),
    ([0.0, 1.0, 1.0, 1.0], ["submitted", "submitted", "submitted", "max_steps"]),
    ([1.0, 1.0, 1.0, 1.0], ["submitted"] * 4),
]
CASES = {  # name: (OpenRLHF estimator, AEM on, entropy_span)
    "grpo": ("group_norm", False, "response"),
    "grpo_aem_response": ("group_norm", True, "response"),
    "grpo_aem_action": ("group_norm", True, "action"),
    "dr_grpo": ("dr_grpo", False, "response"),
    "dr_grpo_aem_response": ("dr_grpo", True, "response"),
}
TOL = 1e-5
# Bugs the comparison must catch (issue 37), planted in the OpenRLHF half only: (the case they break, the first
# mismatch it must report). The executor's is planted here in the job, the seam's by parity_main.planted.
MUTANTS = {
    "action_mask_shifted": ("grpo", "the tokens each trainer trains on differ"),  # every turn one token early
    "aem_span_from_wrong_turn": ("grpo_aem_response", "advantages differ"),  # α from a neighbouring turn
    "masked_member_in_baseline": ("grpo", "advantages differ"),  # the infra failure counted as a real 0
}


def _trajectory(rng: random.Random, g: int, k: int, reward, exit_status: str):
    """Prompt, then 2-4 turns of 2-9 policy tokens with 2-5 observation tokens between; some turns reason first
    (an action start inside the turn). Per token: old / new log-prob and entropy (token-aligned, the built-in
    layout: position j is the prediction of token j)."""
    ids, mask, starts = [rng.randrange(5, 500) for _ in range(rng.randint(4, 8))], [], []
    mask = [0] * len(ids)
    ent: list[float] = [0.0] * len(ids)
    for t in range(rng.randint(2, 4)):
        if t:
            n_obs = rng.randint(2, 5)
            ids += [rng.randrange(5, 500) for _ in range(n_obs)]
            mask += [0] * n_obs
            ent += [rng.uniform(0, 3) for _ in range(n_obs)]  # never read: off the mask
        n = rng.randint(2, 9)
        if n >= 4 and rng.random() < 0.6:
            starts.append(len(ids) + rng.randint(1, n - 1))
        level = rng.uniform(0.05, 2.0)  # turns differ in mean entropy, so AEM's range rule is passed
        ids += [rng.randrange(5, 500) for _ in range(n)]
        mask += [1] * n
        ent += [level + rng.uniform(0, 0.4) for _ in range(n)]
    old = [-rng.uniform(0.05, 3.0) for _ in ids]
    new = [o + rng.gauss(0, 0.35) for o in old]  # ratios on both sides of the clip range
    traj = Trajectory(task_id=f"task{g}", sample_idx=k, token_ids=ids, loss_mask=mask, logprobs=[0.0] * len(ids),
                      action_starts=starts, exit_status=exit_status, reward=reward,
                      truncated=exit_status == "max_steps")  # fmt: skip
    return traj, old, new, ent


def _batch(seed: int = 0):
    rng = random.Random(seed)
    return [
        _trajectory(rng, g, k, r, e)
        for g, (rs, es) in enumerate(GROUPS)
        for k, (r, e) in enumerate(zip(rs, es, strict=True))
    ]


def openrlhf_config(estimator: str, aem: bool, span: str) -> OpenRLHFTrainConfig:
    from swe_rl.config import load_config

    return load_config(OpenRLHFTrainConfig, files=[ROOT / "configs/train/qwen25_coder_7b_grpo_aem.yaml"], overrides=[
        f"optim.estimator={estimator}", f"aem.enabled={str(aem).lower()}", f"aem.entropy_span={span}",
        "aem.compact_filter=true", "agent.unsubmitted=zero", "rollout.samples_per_prompt=4",
        "cluster.gpus_per_node=1", "cluster.vllm_engines=1", "model.path=m", "data.prompt_dataset=d.jsonl",
        "rollout.prompts_per_step=4", "optim.train_batch_size=16", "optim.micro_batch_size=4",
        "optim.rollout_micro_batch_size=3", "rollout.dynamic_filtering=false", "rollout.max_tokens_per_gpu=null",
    ])  # fmt: skip


def builtin_algo(cfg: OpenRLHFTrainConfig) -> AlgoConfig:
    """The built-in trainer's AlgoConfig for an OpenRLHF recipe."""
    a, o = cfg.aem, cfg.optim
    name = {"group_norm": "grpo", "dr_grpo": "dr_grpo", "rloo": "rloo"}[o.estimator]
    mod = {"kind": "aem", "aem": {"lam": a.lam, "min_range": a.min_range, "scope": a.scope,
                                  "entropy_span": a.entropy_span}} if a.enabled else {"kind": "none"}  # fmt: skip
    return AlgoConfig.model_validate({
        "reward": {"unsubmitted": cfg.agent.unsubmitted, "suspicious": cfg.agent.suspicious},
        "estimator": {"name": name, "std": "unbiased", "eps": 1e-9},  # upstream's group_norm: torch.std + 1e-9
        "compact_filtering": {"enabled": a.compact_filter, "reasons": ["context_limit", "max_steps", "timeout"]},
        "modulator": mod,
        "loss": {"type": "ppo", "clip_low": o.clip_low, "clip_high": o.clip_high, "dual_clip": None,
                 "agg": o.loss_agg_mode},
    })  # fmt: skip


def with_anchors(mask: torch.Tensor, loss_mask: torch.Tensor) -> torch.Tensor:
    """The built-in mask with the one token the OpenRLHF seam keeps of each dropped sample (its last policy token,
    advantage 0: aem_seam._drop_rows, so that no upstream micro-batch is empty). It trains nothing; it is one more
    token in the loss divisor, the one documented difference between the two trainers' steps."""
    pos = torch.arange(mask.shape[1]).expand_as(mask)
    last = torch.where(loss_mask > 0, pos, torch.full_like(pos, -1)).amax(dim=1)
    dropped = (mask.sum(1) == 0) & (last >= 0)
    anchor = (pos == last[:, None]) & dropped[:, None]
    return torch.where(anchor, torch.ones_like(mask), mask)


def builtin_step(algo: AlgoConfig, batch, micro_batch: int = 5) -> dict:
    """The built-in trainer's step 3-4 (loop.py) on one minibatch of every row."""
    from swe_rl.algo.epo import EntropyHistory
    from swe_rl.train.batch import collate
    from swe_rl.train.objective import advantages, global_count, microbatch_loss

    trajs = [t for t, *_ in batch]
    b = collate(trajs, pad_id=0)
    width = b.input_ids.shape[1]

    def table(col: int) -> torch.Tensor:
        return torch.tensor([x[col] + [0.0] * (width - len(x[col])) for x in batch])

    old, new, ent = table(1), table(2).requires_grad_(True), table(3)
    rewards = torch.tensor([t.reward if t.reward is not None else 0.0 for t in trajs])
    valid = torch.tensor([t.reward is not None for t in trajs])
    groups = torch.arange(len(GROUPS)).repeat_interleave(N)
    adv, mask, _ = advantages(algo, rewards, groups, valid, b.loss_mask, ent, [t.exit_status for t in trajs],
                              trajectories=trajs, action_mask=b.action_mask)  # fmt: skip
    mask = with_anchors(mask, b.loss_mask)
    rows = torch.arange(len(trajs))
    count = global_count(algo, mask[rows])
    live = rows[mask[rows].sum(1) > 0]
    total = torch.zeros(())
    for micro in live.split(micro_batch):
        loss, _ = microbatch_loss(algo, new[micro], old[micro], adv[micro], mask[micro], None, ref_lp=None,
                                  history=EntropyHistory([]), step=0, count=count,
                                  fraction=micro.numel() / live.numel())  # fmt: skip
        loss.backward()
        total = total + loss.detach()
    return {
        "adv": adv,
        "mask": mask,
        "grad": new.grad,
        "loss": float(total),
        "len": [len(t.token_ids) for t in trajs],
    }


def _job(orl_parse, tokenizer, batch) -> dict:
    job = {}
    for name, (est, aem, span) in CASES.items():
        for variant, on in (("", aem), ("|base", False)):
            if variant and not aem:
                continue
            cfg = openrlhf_config(est, on, span)
            args = orl_parse(to_argv(cfg, "/x/agent_func.py"))
            job[name + variant] = {
                "args": args, "aem": cfg.aem.model_dump(), "gas": 4, "micro_batch": 4,
                "responses": [trajectory_to_response(t, t.task_id, t.task_id, tokenizer, want_logprobs=False,
                                                     unsubmitted=cfg.agent.unsubmitted) for t, *_ in batch],
                # upstream's (A,) layout: position j is token j+1's
                "old": [o[1:] for _, o, _, _ in batch], "new": [n[1:] for _, _, n, _ in batch],
                "ent": [e[1:] for _, _, _, e in batch],
            }  # fmt: skip
    for mutant, (case, _) in MUTANTS.items():
        job[f"{case}|{mutant}"] = {**job[case], "mutant": mutant}
        if mutant == "action_mask_shifted":
            job[f"{case}|{mutant}"]["responses"] = [
                {**r, "action_ranges": [(a - 1, b - 1) for a, b in r["action_ranges"]]}
                for r in job[case]["responses"]
            ]
    return job


@pytest.fixture(scope="module")
def parity(orl_parse, tiny_tokenizer, tmp_path_factory):
    """(batch, {case: OpenRLHF result}) with the OpenRLHF half run once for every case."""
    if not os.environ.get("CI"):
        pytest.importorskip("deepspeed")
    batch = _batch()
    tmp = tmp_path_factory.mktemp("parity")
    (tmp / "job.pkl").write_bytes(pickle.dumps(_job(orl_parse, tiny_tokenizer, batch)))
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(HERE / "cuda_fakes"), str(ROOT)])}
    res = subprocess.run([sys.executable, str(HERE / "parity_main.py"), str(tmp / "job.pkl"), str(tmp / "out.pkl")],
                         cwd=ROOT, env=env, capture_output=True, text=True, timeout=540)  # fmt: skip
    assert res.returncode == 0, res.stdout[-3000:] + res.stderr[-6000:]
    return batch, pickle.loads((tmp / "out.pkl").read_bytes())


def _aligned(orl: dict, key: str, lengths: list[int]) -> torch.Tensor:
    """OpenRLHF's per-sample (A,) values in the built-in (B, T) layout (token j+1 <- position j; token 0 = 0)."""
    width = max(lengths)
    return torch.stack([torch.nn.functional.pad(orl[key][i].float(), (1, width - lengths[i]))
                        for i in range(len(lengths))])  # fmt: skip


def _alpha(adv: torch.Tensor, base: torch.Tensor, on: torch.Tensor) -> torch.Tensor:
    """AEM's α per token: the modulated over the unmodulated advantage where the latter is nonzero, else 1."""
    return torch.where(on, adv / base.where(on, torch.ones(())), torch.ones(()))


def _mismatches(orl: dict, key: str, ours: dict, base: dict | None) -> list[str]:
    """What differs between OpenRLHF's result `orl[key]` and the built-in step `ours` (empty: parity to TOL).
    `base`: the built-in step without AEM, to compare α against OpenRLHF's `|base` case."""
    theirs, mask = orl[key], ours["mask"]
    if not torch.equal(_aligned(theirs, "mask", ours["len"]), mask):
        return ["the tokens each trainer trains on differ"]
    out = []
    adv_theirs = _aligned(theirs, "adv", ours["len"]) * mask
    if (d := float((adv_theirs - ours["adv"] * mask).abs().max())) > TOL:
        out.append(f"advantages differ by up to {d:.3g}")
    if abs(theirs["loss"] - ours["loss"]) >= TOL:
        out.append(f"the losses differ: {theirs['loss']} vs {ours['loss']}")
    grad = _aligned(theirs, "grad", ours["len"])
    if not torch.allclose(grad, ours["grad"], rtol=1e-4, atol=1e-7):
        out.append(f"the gradients differ by up to {float((grad - ours['grad']).abs().max()):.3g}")
    if base is not None:
        on = (base["adv"].abs() > 1e-6) & (mask > 0)
        base_theirs = _aligned(orl[key.split("|")[0] + "|base"], "adv", ours["len"])
        d = float((_alpha(adv_theirs, base_theirs, on) - _alpha(ours["adv"], base["adv"], on)).abs().max())
        if d > TOL:
            out.append(f"AEM's α differs by up to {d:.3g}")
    return out


def _steps(case: str, batch) -> tuple[dict, dict | None]:
    """The built-in trainer's step for `case`, and without AEM where the case has it."""
    est, aem, span = CASES[case]
    ours = builtin_step(builtin_algo(openrlhf_config(est, aem, span)), batch)
    return ours, builtin_step(builtin_algo(openrlhf_config(est, False, span)), batch) if aem else None


@pytest.mark.parametrize("case", list(CASES))
def test_openrlhf_path_and_builtin_trainer_take_the_same_step(parity, case):
    batch, orl = parity
    ours, base = _steps(case, batch)
    mask = ours["mask"]
    assert mask[7].sum() == 1 and mask[11].sum() == 1, (  # one anchor token each (with_anchors)
        "the infra failure and the max_steps episode must not train"
    )
    assert float(ours["adv"][7].abs().sum() + ours["adv"][11].abs().sum()) == 0
    assert _mismatches(orl, case, ours, base) == []
    est = CASES[case][0]
    if base is None:  # the infra failure is out of its group's baseline: the valid 1, 1, 0, not 1, 1, 0, 0
        want = {"group_norm": (1 - 2 / 3) / torch.tensor([1.0, 1.0, 0.0]).std(), "dr_grpo": 1 - 2 / 3}[est]
        assert abs(float(ours["adv"][4][mask[4] > 0][0]) - float(want)) < 1e-4
    else:
        on = (base["adv"].abs() > 1e-6) & (mask > 0)
        alpha = _alpha(ours["adv"], base["adv"], on)
        assert float(alpha[on].max() - alpha[on].min()) > 0.3, "α must vary for the check to mean much"


@pytest.mark.parametrize("mutant", list(MUTANTS))
def test_parity_check_fails_with_a_planted_bug(parity, mutant):
    """The comparison above has the power to fail: with one bug planted in the OpenRLHF half it reports it."""
    batch, orl = parity
    case, first = MUTANTS[mutant]
    found = _mismatches(orl, f"{case}|{mutant}", *_steps(case, batch))
    assert found and found[0].startswith(first), f"{mutant} planted, the parity check reports {found}"
