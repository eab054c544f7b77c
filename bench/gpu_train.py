"""GPU training benchmark (one CUDA device): train tokens/s, peak memory, and AEM's and exact entropy's share of an
RL step at the Qwen2.5-1.5B (16 × 4096 tokens) and Qwen2.5-7B (8 × 4096) shapes, random init, bf16 weights and
AdamW, gradient checkpointing; then the built-in trainer's own step split (generation / grading / update) from two
RL steps of configs/train/gpu_check.yaml (local sandboxes).

One step = the old-policy forward (log-probs, no grad) + exact entropy (swe_rl.algo chunked, from the final hidden
states) + advantages through swe_rl.algo (GRPO, and GRPO + AEM: AEM's extra cost is their difference) + forward,
backward and the optimizer step. The baseline in the same table is the first CUDA run's (H200, torch 2.11 cu130,
transformers 5.17; the issue that asked for this benchmark): 22.3K / 6.7K train tokens/s, 30 / 71 GiB,
AEM 0.15% / 0.09%, entropy 4.9% / 1.5% of the step.

Usage: python bench/gpu_train.py [--shapes 1.5b,7b] [--steps 3] [--no-trainer] [--out DIR]
       python bench/gpu_train.py --cpu-dry-run     (tiny shapes on the CPU: checks the code, writes nothing)
Without CUDA (and without --cpu-dry-run) it prints one line and exits 0. Results go to
docs/results/<date>_gpu_bench/gpu_train.{json,md} only when run on a GPU.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # run from a plain checkout

import itertools

import torch

REPO = Path(__file__).resolve().parents[1]
VOCAB = 151_936
SHAPES = {  # hidden, layers, heads, kv heads, ffn, batch, seq
    "1.5b": dict(hidden=1536, layers=28, heads=12, kv=2, ffn=8960, batch=16, seq=4096),
    "7b": dict(hidden=3584, layers=28, heads=28, kv=4, ffn=18944, batch=8, seq=4096),
    "cpu": dict(hidden=64, layers=2, heads=4, kv=2, ffn=128, batch=4, seq=128),
}
BASELINE = {  # the first CUDA run (H200): tokens/s, peak GiB, AEM share, entropy share
    "1.5b": {"train_tokens_per_s": 22.3e3, "peak_gib": 30.0, "aem_share": 0.0015, "entropy_share": 0.049},
    "7b": {"train_tokens_per_s": 6.7e3, "peak_gib": 71.0, "aem_share": 0.0009, "entropy_share": 0.015},
}


def _sync(dev: str) -> None:
    if dev == "cuda":
        torch.cuda.synchronize()


def build(shape: dict, dev: str, vocab: int):
    from transformers import Qwen2Config, Qwen2ForCausalLM

    cfg = Qwen2Config(vocab_size=vocab, hidden_size=shape["hidden"], num_hidden_layers=shape["layers"],
                      num_attention_heads=shape["heads"], num_key_value_heads=shape["kv"],
                      intermediate_size=shape["ffn"], max_position_embeddings=max(shape["seq"], 4096),
                      tie_word_embeddings=shape["hidden"] < 2048, initializer_range=0.2)  # fmt: skip
    torch.manual_seed(0)
    with torch.device(dev):  # initialised on the device: seconds instead of CPU minutes at 7B
        model = Qwen2ForCausalLM(cfg).to(torch.bfloat16)
    model.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})
    model.config.use_cache = False
    return model


def batch(shape: dict, dev: str, vocab: int):
    g = torch.Generator().manual_seed(1)
    b, t = shape["batch"], shape["seq"]
    ids = torch.randint(0, vocab, (b, t), generator=g)
    mask = torch.zeros(b, t)
    turn = max(t // 16, 2)
    for start in range(t // 8, t - 1, 2 * turn):  # policy turns between observations
        mask[:, start : start + turn] = 1.0
    mask[:, 0] = 0.0
    rewards = torch.randint(0, 2, (b,), generator=g).float()
    groups = torch.arange(b) // 4
    return ids.to(dev), mask.to(dev), rewards.to(dev), groups.to(dev)


def _chunk_logp(head, h, target):
    """log π(target) of one chunk of hidden states; under checkpoint, so its (rows × T × V) logits are recomputed in
    backward instead of kept."""
    return torch.log_softmax(head(h).float(), -1).gather(-1, target[..., None]).squeeze(-1)


def logprobs(model, ids, rows: int, grad: bool):
    """(B, T) token-aligned log-probs (0 at position 0) and the final hidden states, rows × T logits at a time."""
    from torch.utils.checkpoint import checkpoint

    hidden = model.model(input_ids=ids).last_hidden_state
    head = model.get_output_embeddings()
    parts = []
    for s in range(0, ids.shape[0], rows):
        h, tgt = hidden[s : s + rows, :-1], ids[s : s + rows, 1:]
        lp = checkpoint(_chunk_logp, head, h, tgt, use_reentrant=False) if grad else _chunk_logp(head, h, tgt)
        parts.append(torch.nn.functional.pad(lp, (1, 0)))
    return torch.cat(parts), hidden


def _now(dev: str) -> float:
    _sync(dev)
    return time.perf_counter()


def bench_shape(name: str, dev: str, steps: int, vocab: int) -> dict:
    from swe_rl.algo.config import AlgoConfig
    from swe_rl.algo.entropy import token_entropy_from_hidden
    from swe_rl.algo.pipeline import compute_advantages, compute_policy_loss

    shape = SHAPES[name]
    model = build(shape, dev, vocab)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-7)
    ids, mask, rewards, groups = batch(shape, dev, vocab)
    valid = torch.ones_like(rewards, dtype=torch.bool)
    exits = ["submitted"] * len(rewards)
    grpo, aem = AlgoConfig(), AlgoConfig.model_validate({"modulator": {"kind": "aem"}})
    head = model.get_output_embeddings()
    rows_per_chunk = 1
    if dev == "cuda":
        torch.cuda.empty_cache()
        torch.cuda.reset_peak_memory_stats()
    rows = []
    for step in range(steps + 1):  # step 0 warms up (kernels, allocator)
        marks = [_now(dev)]
        with torch.no_grad():
            old_lp, hidden = logprobs(model, ids, rows_per_chunk, grad=False)
            marks.append(_now(dev))
            ent = token_entropy_from_hidden(hidden[:, :-1], head.weight, chunk_size=512)
            ent = torch.nn.functional.pad(ent, (1, 0))
            del hidden
            marks.append(_now(dev))
        compute_advantages(grpo, rewards, groups, valid, mask, ent, exits)
        marks.append(_now(dev))
        res = compute_advantages(aem, rewards, groups, valid, mask, ent, exits)
        marks.append(_now(dev))
        lp, _ = logprobs(model, ids, rows_per_chunk, grad=True)
        loss, _ = compute_policy_loss(aem, lp, old_lp, res.token_advantages, res.loss_mask)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        marks.append(_now(dev))
        t_old, t_ent, t_grpo, t_aem, t_upd = (b - a for a, b in itertools.pairwise(marks))
        row = {"step": step, "s": t_old + t_ent + t_aem + t_upd, "old_forward_s": t_old, "entropy_s": t_ent,
               "grpo_adv_s": t_grpo, "aem_adv_s": t_aem, "update_s": t_upd, "loss": float(loss)}  # fmt: skip
        print(f"  {name} step {step}: " + json.dumps({k: round(v, 4) for k, v in row.items()}), flush=True)
        if step:
            rows.append(row)
    mean = {k: sum(r[k] for r in rows) / len(rows) for k in rows[0] if k != "step"}
    tokens = ids.numel()
    out = {
        "shape": name, **shape, "vocab": vocab, "params_b": sum(p.numel() for p in model.parameters()) / 1e9,
        "tokens_per_step": tokens, "step_s": mean["s"], "train_tokens_per_s": tokens / mean["s"],
        "peak_gib": torch.cuda.max_memory_allocated() / 2**30 if dev == "cuda" else float("nan"),
        "aem_extra_ms": 1e3 * (mean["aem_adv_s"] - mean["grpo_adv_s"]),
        "aem_share": (mean["aem_adv_s"] - mean["grpo_adv_s"]) / mean["s"],
        "entropy_ms": 1e3 * mean["entropy_s"], "entropy_share": mean["entropy_s"] / mean["s"],
        "old_forward_s": mean["old_forward_s"], "update_s": mean["update_s"],
    }  # fmt: skip
    del model, opt
    if dev == "cuda":
        torch.cuda.empty_cache()
    return out


def trainer_split(dev: str) -> dict:
    """Two RL steps of configs/train/gpu_check.yaml through `swe-rl train`: the step's generation / grading /
    update split from its metrics.jsonl."""
    with tempfile.TemporaryDirectory() as work:
        cmd = [sys.executable, "-m", "swe_rl.cli", "train", "-c", "configs/train/gpu_check.yaml",
               "-o", f"out_dir={work}", "-o", f"device={dev}"]  # fmt: skip
        env = {**os.environ, "PYTHONPATH": f"{REPO}:{os.environ.get('PYTHONPATH', '')}"}
        proc = subprocess.run(cmd, cwd=REPO, env=env, capture_output=True, text=True, timeout=900)
        if proc.returncode != 0:
            return {"error": proc.stderr[-2000:]}
        rows = [json.loads(x) for x in (Path(work) / "gpu_check" / "metrics.jsonl").read_text().splitlines()]
    steps = [r for r in rows if "time_train_s" in r]
    return {
        f"step{r['step']}": {
            "step_s": r["time_step_s"],
            "rollout_s": r["time_rollout_s"],
            "generate_s": r.get("cost/generate_s"),
            "grading_exec_s": r.get("cost/grading_exec_s"),
            "sandbox_reset_s": r.get("cost/sandbox_reset_s"),
            "update_s": r["time_train_s"],
            "generated_tokens": r.get("cost/generated_tokens"),
            "reward_mean": r.get("reward_mean"),
        }
        for r in steps
    }


def markdown(env: dict, shapes: list[dict], split: dict) -> str:
    lines = [f"# GPU training benchmark, {env['date']}", "", f"{env['device']}; {env['versions']}", "",
             "| shape (bf16, grad. checkpointing) | tokens / step | step | train tokens/s (baseline) | peak GiB "
             "(baseline) | AEM's extra cost over GRPO (baseline share) | exact entropy (baseline share) |",
             "|---|---|---|---|---|---|---|"]  # fmt: skip
    for r in shapes:
        b = BASELINE.get(r["shape"], {})
        lines.append(
            f"| Qwen2.5-{r['shape'].upper()} | {r['batch']} × {r['seq']} | {r['step_s']:.2f} s | "
            f"{r['train_tokens_per_s'] / 1e3:.1f}K ({b.get('train_tokens_per_s', 0) / 1e3:.1f}K) | "
            f"{r['peak_gib']:.0f} ({b.get('peak_gib', float('nan')):.0f}) | {r['aem_extra_ms']:.1f} ms = "
            f"{100 * r['aem_share']:.2f}% ({100 * b.get('aem_share', float('nan')):.2f}%) | {r['entropy_ms']:.0f} ms"
            f" = {100 * r['entropy_share']:.1f}% ({100 * b.get('entropy_share', float('nan')):.1f}%) |"
        )
    lines += ["", "Built-in trainer, configs/train/gpu_check.yaml (demo checkpoint, local sandboxes, one slot):", "",
              "```json", json.dumps(split, indent=1), "```", ""]  # fmt: skip
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--shapes", default="1.5b,7b")
    ap.add_argument("--steps", type=int, default=3)
    ap.add_argument("--no-trainer", action="store_true", help="skip the built-in trainer's two-step split")
    ap.add_argument("--cpu-dry-run", action="store_true", help="tiny shapes on the CPU; writes nothing")
    ap.add_argument("--out", default="", help="results folder (default docs/results/<date>_gpu_bench)")
    args = ap.parse_args(argv)
    if args.cpu_dry_run:
        dev, names, vocab = "cpu", ["cpu"], 2048
    elif not torch.cuda.is_available():
        print("gpu_train: skipped, needs a CUDA GPU (torch.cuda.is_available() is False)")
        return 0
    else:
        dev, names, vocab = "cuda", args.shapes.split(","), VOCAB
    import transformers

    env = {
        "date": datetime.date.today().isoformat(),
        "device": torch.cuda.get_device_name() if dev == "cuda" else "cpu (dry run)",
        "versions": f"torch {torch.__version__}, transformers {transformers.__version__}",
    }
    print(f"gpu_train: {env['device']}, {env['versions']}", flush=True)
    shapes = [bench_shape(n, dev, args.steps, vocab) for n in names]
    for r in shapes:
        print("gpu_train " + json.dumps(r), flush=True)
    split = {} if args.no_trainer else trainer_split(dev)
    print("gpu_train trainer split " + json.dumps(split), flush=True)
    if dev == "cuda":
        out = Path(args.out or REPO / "docs" / "results" / f"{env['date']}_gpu_bench")
        out.mkdir(parents=True, exist_ok=True)
        (out / "gpu_train.json").write_text(
            json.dumps({"env": env, "shapes": shapes, "trainer": split}, indent=1)
        )
        (out / "gpu_train.md").write_text(markdown(env, shapes, split))
        print(f"gpu_train: results in {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
