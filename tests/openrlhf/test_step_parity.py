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


@pytest.mark.parametrize("case", list(CASES))
def test_openrlhf_path_and_builtin_trainer_take_the_same_step(parity, case):
    batch, orl = parity
    est, aem, span = CASES[case]
    algo = builtin_algo(openrlhf_config(est, aem, span))
    ours = builtin_step(algo, batch)
    theirs = orl[case]
    mask = ours["mask"]
    assert torch.equal(_aligned(theirs, "mask", ours["len"]), mask), (
        "the tokens each trainer trains on differ"
    )
    assert mask[7].sum() == 0 and mask[11].sum() == 0, (
        "the infra failure and the max_steps episode must not train"
    )
    adv_theirs = _aligned(theirs, "adv", ours["len"]) * mask
    torch.testing.assert_close(adv_theirs, ours["adv"] * mask, rtol=0, atol=TOL)
    assert abs(theirs["loss"] - ours["loss"]) < TOL, (theirs["loss"], ours["loss"])
    torch.testing.assert_close(_aligned(theirs, "grad", ours["len"]), ours["grad"], rtol=1e-4, atol=1e-7)
    if not aem:  # the infra failure is out of its group's baseline: the valid 1, 1, 0, not 1, 1, 0, 0
        want = {"group_norm": (1 - 2 / 3) / torch.tensor([1.0, 1.0, 0.0]).std(), "dr_grpo": 1 - 2 / 3}[est]
        assert abs(float(ours["adv"][4][mask[4] > 0][0]) - float(want)) < 1e-4
    else:
        base = builtin_step(builtin_algo(openrlhf_config(est, False, span)), batch)
        on = (base["adv"].abs() > 1e-6) & (mask > 0)
        alpha_ours = torch.where(on, ours["adv"] / base["adv"].where(on, torch.ones(())), torch.ones(()))
        base_theirs = _aligned(orl[case + "|base"], "adv", ours["len"])
        alpha_theirs = torch.where(on, adv_theirs / base_theirs.where(on, torch.ones(())), torch.ones(()))
        torch.testing.assert_close(alpha_theirs, alpha_ours, rtol=0, atol=TOL)
        assert float(alpha_ours[on].max() - alpha_ours[on].min()) > 0.3, (
            "α must vary for the check to mean much"
        )
