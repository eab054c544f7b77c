"""What AEM and exact entropy cost an RL step, measured on the trainers' own paths, GRPO alone as the baseline in the
same run (issue 61).

One step, as the built-in trainer runs it (swe_rl/train/loop.py): the old-policy forward under no_grad
(`token_logprobs_entropy`: log-probs, with or without the exact entropy from the same logsumexp), the advantages
(swe_rl.algo: GRPO, or GRPO + AEM on that entropy), then forward + backward in micro-batches and the optimizer
step. GRPO alone = forward without entropy + GRPO + update; GRPO + AEM + entropy = forward with entropy + AEM +
update; their difference over GRPO alone is the share the issue's goal (<= 1%) is about, split into the entropy's
and AEM's parts. Every step times the old-policy forward four ways (with and without entropy, eager and with
SWE_RL_ENTROPY_COMPILE=1; the order rotates each step, so load drift hits all), and the shares are given both ways.
Beside it, OpenRLHF's policy actor: upstream's `Actor.forward` (run verbatim from the installed openrlhf source,
as bench/openrlhf_seam.py does) per micro-batch, plain (old log-probs) and through our `exact_forward`
(return_entropy with swe_rl.algo's entropy). Skipped with one line when openrlhf is not installed.

Shapes (random init, no gradient checkpointing on the CPU): `1.5b` Qwen2.5-1.5B, 16 x 4096 tokens; `7b`
Qwen2.5-7B, 8 x 4096 (bf16 weights and AdamW, gradient checkpointing; the 7B wants an H200); `cpu` hidden 256,
4 layers, Qwen's whole 151,936 vocabulary, 4 x 256 tokens, fp32 (the vocabulary passes are what entropy costs).

Usage: python bench/step_cost.py [--shapes 1.5b,7b | --cpu | --cpu-dry-run] [--steps 3] [--out DIR]
Without CUDA and without --cpu it prints one line and exits 0. Results: DIR/step_cost.{json,md} when --out is given,
rewritten after each shape; a shape that runs out of memory is a row saying so (exit 1), the others are kept.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # run from a plain checkout

import torch

from bench.upstream_actor import openrlhf_forwards

VOCAB = 151_936
SHAPES = {  # hidden, layers, heads, kv heads, ffn, batch, seq, rows per LM-head chunk / update micro-batch, vocab
    "1.5b": dict(
        hidden=1536, layers=28, heads=12, kv=2, ffn=8960, batch=16, seq=4096, rows=2, micro=4, vocab=VOCAB
    ),
    "7b": dict(
        hidden=3584, layers=28, heads=28, kv=4, ffn=18944, batch=8, seq=4096, rows=1, micro=2, vocab=VOCAB
    ),
    "cpu": dict(hidden=256, layers=4, heads=4, kv=2, ffn=512, batch=4, seq=256, rows=2, micro=2, vocab=VOCAB),
    "dry": dict(hidden=64, layers=2, heads=4, kv=2, ffn=128, batch=4, seq=64, rows=2, micro=2, vocab=2048),
}
# the old-policy forward four ways: (with entropy, SWE_RL_ENTROPY_COMPILE)
FORWARDS = {
    "old_forward_s": (False, "0"),
    "old_forward_entropy_s": (True, "0"),
    "old_forward_compiled_s": (False, "1"),
    "old_forward_entropy_compiled_s": (True, "1"),
}


def _now(dev: str) -> float:
    if dev == "cuda":
        torch.cuda.synchronize()
    return time.perf_counter()


def build(shape: dict, dev: str, dtype: torch.dtype):
    from transformers import Qwen2Config, Qwen2ForCausalLM

    cfg = Qwen2Config(vocab_size=shape["vocab"], hidden_size=shape["hidden"], num_hidden_layers=shape["layers"],
                      num_attention_heads=shape["heads"], num_key_value_heads=shape["kv"],
                      intermediate_size=shape["ffn"], max_position_embeddings=max(shape["seq"], 4096),
                      tie_word_embeddings=shape["hidden"] < 2048, initializer_range=0.2)  # fmt: skip
    torch.manual_seed(0)
    with torch.device(dev):
        model = Qwen2ForCausalLM(cfg).to(dtype)
    if dev == "cuda":
        model.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})
    model.config.use_cache = False
    return model


def make_batch(shape: dict, dev: str):
    from swe_rl.train.batch import Batch

    g = torch.Generator().manual_seed(1)
    b, t = shape["batch"], shape["seq"]
    ids = torch.randint(0, shape["vocab"], (b, t), generator=g)
    mask = torch.zeros(b, t)
    turn = max(t // 16, 2)
    for start in range(t // 8, t - 1, 2 * turn):  # policy turns between observations
        mask[:, start : start + turn] = 1.0
    mask[:, 0] = 0.0
    batch = Batch(ids, torch.ones_like(ids), mask, torch.zeros(b, t)).to(dev)
    rewards = torch.randint(0, 2, (b,), generator=g).float().to(dev)
    return batch, rewards, (torch.arange(b) // 4).to(dev)


def compile_works(dev: str) -> str:
    """'' when SWE_RL_ENTROPY_COMPILE=1 compiles and runs on `dev`, else the error's first line (the eager rows
    are then measured alone)."""
    from swe_rl.algo.entropy import token_logprobs_and_entropy

    os.environ["SWE_RL_ENTROPY_COMPILE"] = "1"
    try:
        for with_ent in (False, True):
            token_logprobs_and_entropy(torch.randn(8, 64, device=dev), torch.zeros(8, dtype=torch.long, device=dev),
                                       with_entropy=with_ent)  # fmt: skip
        return ""
    except Exception as e:  # inductor needs a compiler toolchain (triton on CUDA, a C++ compiler on the CPU)
        return f"{type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}"
    finally:
        os.environ.pop("SWE_RL_ENTROPY_COMPILE", None)


def one_step(model, opt, batch, rewards, groups, shape: dict, dev: str, order: int, compiled: bool) -> dict:
    from swe_rl.algo.config import AlgoConfig
    from swe_rl.algo.pipeline import compute_advantages, compute_policy_loss
    from swe_rl.train.batch import token_logprobs_entropy

    grpo, aem = AlgoConfig(), AlgoConfig.model_validate({"modulator": {"kind": "aem"}})
    valid = torch.ones_like(rewards, dtype=torch.bool)
    exits = ["submitted"] * batch.size
    t: dict[str, float] = {}
    ent = old_lp = None
    variants = [(k, v) for k, v in FORWARDS.items() if compiled or v[1] == "0"]
    n = len(variants)
    for key, (with_ent, flag) in variants[order % n :] + variants[: order % n]:  # rotated: drift hits all
        os.environ["SWE_RL_ENTROPY_COMPILE"] = flag
        t0 = _now(dev)
        with torch.no_grad():
            old_lp, e = token_logprobs_entropy(model, batch, chunk=shape["rows"], with_entropy=with_ent)
        t[key] = _now(dev) - t0
        ent = e if with_ent else ent
    os.environ.pop("SWE_RL_ENTROPY_COMPILE", None)
    for name, cfg in (("grpo_adv_s", grpo), ("aem_adv_s", aem)):
        t0 = _now(dev)
        res = compute_advantages(cfg, rewards, groups, valid, batch.loss_mask, ent, exits)
        t[name] = _now(dev) - t0
    t0 = _now(dev)
    opt.zero_grad(set_to_none=True)
    for idx in torch.arange(batch.size, device=batch.input_ids.device).split(shape["micro"]):
        lp, _ = token_logprobs_entropy(model, batch.select(idx), chunk=shape["rows"], with_entropy=False)
        loss, _ = compute_policy_loss(aem, lp, old_lp[idx], res.token_advantages[idx], res.loss_mask[idx])
        (loss * len(idx) / batch.size).backward()
    opt.step()
    t["update_s"] = _now(dev) - t0
    return t


def bench_shape(name: str, dev: str, steps: int) -> dict:
    shape = SHAPES[name]
    model = build(shape, dev, torch.bfloat16 if dev == "cuda" else torch.float32)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-7)
    batch, rewards, groups = make_batch(shape, dev)
    compile_error = compile_works(dev)
    if dev == "cuda":
        torch.cuda.empty_cache()
        torch.cuda.reset_peak_memory_stats()
    rows = []
    for step in range(steps + 1):  # step 0 warms up (kernels, allocator)
        row = one_step(model, opt, batch, rewards, groups, shape, dev, step, compiled=not compile_error)
        orl = openrlhf_forwards(model, batch, shape["micro"], _now, dev)
        if orl is not None:
            row.update({"openrlhf_forward_s": orl["plain"], "openrlhf_forward_entropy_s": orl["entropy"]})
        print(f"  {name} step {step}: " + json.dumps({k: round(v, 4) for k, v in row.items()}), flush=True)
        if step:
            rows.append(row)
    m = {k: sum(r[k] for r in rows) / len(rows) for k in rows[0]}
    out = {"shape": name, **shape, "steps": steps, **m, **shares(m),
           "params_b": sum(p.numel() for p in model.parameters()) / 1e9,
           "train_tokens_per_s": batch.input_ids.numel() / (m["old_forward_entropy_s"] + m["aem_adv_s"] + m["update_s"]),
           "peak_gib": torch.cuda.max_memory_allocated() / 2**30 if dev == "cuda" else float("nan")}  # fmt: skip
    if compile_error:
        out["compile_error"] = compile_error
    del model, opt
    if dev == "cuda":
        torch.cuda.empty_cache()
    return out


def shares(m: dict[str, float]) -> dict[str, float]:
    """Each cost over GRPO alone's step (old forward without entropy + GRPO advantages + update), eager, and with
    the compiled kernels where they ran."""
    grpo = m["old_forward_s"] + m["grpo_adv_s"] + m["update_s"]
    full = m["old_forward_entropy_s"] + m["aem_adv_s"] + m["update_s"]
    out = {"grpo_step_s": grpo, "full_step_s": full,
           "entropy_share": (m["old_forward_entropy_s"] - m["old_forward_s"]) / grpo,
           "aem_share": (m["aem_adv_s"] - m["grpo_adv_s"]) / grpo, "aem_entropy_share": (full - grpo) / grpo,
           "forward_entropy_ratio": m["old_forward_entropy_s"] / m["old_forward_s"]}  # fmt: skip
    if "old_forward_compiled_s" in m:
        c_grpo = m["old_forward_compiled_s"] + m["grpo_adv_s"] + m["update_s"]
        c_ent = m["old_forward_entropy_compiled_s"] - m["old_forward_compiled_s"]
        out["compiled_entropy_share"] = c_ent / c_grpo
        out["compiled_aem_entropy_share"] = (c_ent + m["aem_adv_s"] - m["grpo_adv_s"]) / c_grpo
        out["compiled_forward_entropy_ratio"] = (
            m["old_forward_entropy_compiled_s"] / m["old_forward_compiled_s"]
        )
    if "openrlhf_forward_s" in m:
        out["openrlhf_entropy_ratio"] = m["openrlhf_forward_entropy_s"] / m["openrlhf_forward_s"]
        out["openrlhf_entropy_share"] = (m["openrlhf_forward_entropy_s"] - m["openrlhf_forward_s"]) / grpo
    return out


def markdown(env: dict, shapes: list[dict]) -> str:
    lines = [f"# Step cost of AEM and exact entropy, {env['date']}", "", f"{env['device']}; {env['versions']}", "",
             "| shape | tokens / step | GRPO step | GRPO+AEM+entropy step | entropy share | AEM share | "
             "AEM+entropy share (compiled) | old forward with / without entropy (compiled) | OpenRLHF forward "
             "with / without | peak GiB |",
             "|---|---|---|---|---|---|---|---|---|---|"]  # fmt: skip
    for r in shapes:
        if "error" in r:
            lines.append(f"| {r['shape']} | {r['error']} |")
            continue
        orl = f"{r['openrlhf_entropy_ratio']:.3f}x" if "openrlhf_entropy_ratio" in r else "not installed"
        c_share = (
            f"{100 * r['compiled_aem_entropy_share']:.2f}%" if "compiled_aem_entropy_share" in r else "n/a"
        )
        c_ratio = (
            f"{r['compiled_forward_entropy_ratio']:.3f}x" if "compiled_forward_entropy_ratio" in r else "n/a"
        )
        lines.append(f"| {r['shape']} | {r['batch']} x {r['seq']} | {r['grpo_step_s']:.3f} s | {r['full_step_s']:.3f}"
                     f" s | {100 * r['entropy_share']:.2f}% | {100 * r['aem_share']:.2f}% | "
                     f"{100 * r['aem_entropy_share']:.2f}% ({c_share}) | "
                     f"{r['forward_entropy_ratio']:.3f}x ({c_ratio}) | {orl} | "
                     f"{r['peak_gib']:.0f} |")  # fmt: skip
    return "\n".join([*lines, ""])


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--shapes", default="1.5b,7b")
    ap.add_argument("--cpu", action="store_true", help="the small CPU shape (runs without a GPU)")
    ap.add_argument("--cpu-dry-run", action="store_true", help="a tiny shape on the CPU: checks the code")
    ap.add_argument("--steps", type=int, default=3)
    ap.add_argument("--threads", type=int, default=0, help="CPU torch threads (0: torch's default)")
    ap.add_argument("--out", default="")
    args = ap.parse_args(argv)
    if args.threads:
        torch.set_num_threads(args.threads)
    if args.cpu or args.cpu_dry_run:
        dev, names = "cpu", ["dry" if args.cpu_dry_run else "cpu"]
    elif not torch.cuda.is_available():
        print("step_cost: skipped, needs a CUDA GPU (or --cpu for the small CPU shape)")
        return 0
    else:
        dev, names = "cuda", args.shapes.split(",")
    import transformers

    env = {"date": datetime.datetime.now(datetime.UTC).date().isoformat(),
           "device": torch.cuda.get_device_name() if dev == "cuda" else f"cpu ({torch.get_num_threads()} threads)",
           "versions": f"torch {torch.__version__}, transformers {transformers.__version__}"}  # fmt: skip
    print(f"step_cost: {env['device']}, {env['versions']}", flush=True)
    shapes: list[dict] = []
    for n in names:  # one shape at a time, written as it ends: a later shape's failure keeps the earlier ones
        try:
            shapes.append(bench_shape(n, dev, args.steps))
        except torch.OutOfMemoryError as e:  # the 7B shape on a card smaller than an H200
            shapes.append({"shape": n, "error": f"out of memory: {str(e).splitlines()[0]}"})
            torch.cuda.empty_cache()
        print("step_cost " + json.dumps(shapes[-1]), flush=True)
        md = markdown(env, shapes)
        if args.out:
            out = Path(args.out)
            out.mkdir(parents=True, exist_ok=True)
            (out / "step_cost.json").write_text(json.dumps({"env": env, "shapes": shapes}, indent=1))
            (out / "step_cost.md").write_text(md)
    print(md)
    if args.out:
        print(f"step_cost: results in {args.out}")
    return 1 if any("error" in r for r in shapes) else 0
    return 0


if __name__ == "__main__":
    sys.exit(main())
