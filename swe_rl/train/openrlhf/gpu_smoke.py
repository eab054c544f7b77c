"""GPU smoke test (≤ 8 min on one GPU, no vLLM, no network): chunked token entropy at Qwen's real vocabulary
(151,936) and a few bf16 train steps of a random Qwen-shaped model with swe_rl.algo's losses directly
(GRPO advantages → AEM per span → PPO-clip loss), printing throughput and peak memory.

    bash scripts/gpu_smoke.sh                   # CUDA, ~1.5B-parameter Qwen2 shape, 4 × 4096-token sequences
    bash scripts/gpu_smoke.sh --device cpu      # tiny sizes, for CI (tests/openrlhf/test_scripts.py)
Exit code 0 = every check passed; each failed check prints a line starting with FAIL.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # run from a plain checkout

import torch

QWEN_VOCAB = 151936
PRESETS = {
    # vocab, hidden, layers, heads, kv_heads, ffn, batch, seq_len, entropy_tokens
    "cuda": dict(
        vocab=QWEN_VOCAB,
        hidden=1536,
        layers=28,
        heads=12,
        kv=2,
        ffn=8960,
        batch=4,
        seq=4096,
        ent_tokens=32768,
        init=0.2,
    ),
    "cpu": dict(
        vocab=2048, hidden=64, layers=2, heads=4, kv=2, ffn=128, batch=8, seq=64, ent_tokens=64, init=0.5
    ),
}


def _sync(device: str) -> None:
    if device == "cuda":
        torch.cuda.synchronize()


def _peak_gib(device: str) -> float:
    return torch.cuda.max_memory_allocated() / 2**30 if device == "cuda" else float("nan")


def _reset_peak(device: str) -> None:
    if device == "cuda":
        torch.cuda.empty_cache()
        torch.cuda.reset_peak_memory_stats()


def check_entropy(device: str, tokens: int, chunk: int) -> dict:
    """Chunked entropy of (tokens × 151,936) bf16 logits vs the unchunked formula on a slice."""
    from swe_rl.algo.entropy import entropy_from_logits, token_entropy

    g = torch.Generator(device=device).manual_seed(0)
    logits = (torch.randn(tokens, QWEN_VOCAB, generator=g, device=device) * 3).to(torch.bfloat16)
    _reset_peak(device)
    base = _peak_gib(device)
    _sync(device)
    t0 = time.perf_counter()
    ent = token_entropy(logits, chunk_size=chunk)
    _sync(device)
    dt = time.perf_counter() - t0
    ref = entropy_from_logits(logits[: min(tokens, 512)])
    err = (ent[: ref.shape[0]] - ref).abs().max().item()
    return {
        "entropy_tokens": tokens,
        "entropy_vocab": QWEN_VOCAB,
        "entropy_tokens_per_s": tokens / dt,
        "entropy_extra_peak_gib": _peak_gib(device) - base,
        "entropy_full_fp32_probs_gib": tokens * QWEN_VOCAB * 4 / 2**30,  # what an unchunked softmax would add
        "entropy_max_abs_err": err,
        "ok": err < 1e-3 and bool(torch.isfinite(ent).all()),
    }


def build_model(p: dict, device: str):
    from transformers import Qwen2Config, Qwen2ForCausalLM

    cfg = Qwen2Config(
        vocab_size=p["vocab"],
        hidden_size=p["hidden"],
        num_hidden_layers=p["layers"],
        num_attention_heads=p["heads"],
        num_key_value_heads=p["kv"],
        intermediate_size=p["ffn"],
        max_position_embeddings=max(p["seq"], 4096),
        tie_word_embeddings=True,
        initializer_range=p.get("init", 0.02),  # wider init: peaky, varied token entropies (AEM active)
    )
    torch.manual_seed(0)
    model = Qwen2ForCausalLM(cfg).to(device=device, dtype=torch.bfloat16)  # type: ignore[call-arg]
    if device == "cuda":
        model.gradient_checkpointing_enable()
    return model


def synthetic_batch(p: dict, device: str, group: int = 4):
    """Token ids, a multi-turn loss mask (policy turns between observations), rewards and group ids."""
    g = torch.Generator().manual_seed(1)
    b, t = p["batch"], p["seq"]
    ids = torch.randint(0, p["vocab"], (b, t), generator=g)
    mask = torch.zeros(b, t, dtype=torch.bool)
    turn = max(t // 8, 2)
    for start in range(t // 8, t - 1, 2 * turn):  # alternating policy turns and observations
        mask[:, start : start + turn] = True
    rewards = torch.randint(0, 2, (b,), generator=g).float()
    groups = torch.arange(b) // group
    return ids.to(device), mask.to(device), rewards.to(device), groups.to(device)


def token_logp_entropy(model, ids, chunk: int):
    """(B, T-1) log π(next token) and chunked entropy, from one forward."""
    from swe_rl.algo.entropy import token_entropy

    logits = model(input_ids=ids).logits[:, :-1]  # (B, T-1, V) bf16
    logp = torch.log_softmax(logits.float(), -1).gather(-1, ids[:, 1:, None]).squeeze(-1)
    with torch.no_grad():
        ent = token_entropy(logits.detach(), chunk_size=chunk)
    return logp, ent


def train_steps(p: dict, device: str, steps: int, chunk: int) -> dict:
    from swe_rl.algo.advantages import ESTIMATORS
    from swe_rl.algo.aem import apply_aem
    from swe_rl.algo.losses import policy_loss
    from swe_rl.algo.spans import span_index

    model = build_model(p, device)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-6)
    ids, mask, rewards, groups = synthetic_batch(p, device)
    m = mask[:, 1:]  # (B, T-1) aligned with next-token log-probs
    _reset_peak(device)
    rows = []
    for step in range(steps):
        _sync(device)
        t0 = time.perf_counter()
        with torch.no_grad():
            old_logp, ent = token_logp_entropy(model, ids, chunk)  # the "old-log-prob forward"
        row_adv = ESTIMATORS["grpo"](rewards, groups)  # (B,)
        idx = span_index(m)
        token_adv, alpha = apply_aem(row_adv[:, None].expand_as(m).float() * m, ent, idx, idx.group(groups))
        logp, _ = token_logp_entropy(model, ids, chunk)
        loss, metrics = policy_loss("ppo", logp, old_logp, token_adv, m, clip_low=0.2, clip_high=0.28)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        _sync(device)
        dt = time.perf_counter() - t0
        rows.append(
            {
                "step": step,
                "loss": loss.item(),
                "s": dt,
                "tokens_per_s": ids.numel() / dt,
                "alpha_min": alpha.min().item(),
                "alpha_max": alpha.max().item(),
                "clipfrac": metrics["clipfrac"],
            }
        )
        print(json.dumps(rows[-1]), flush=True)
    params = sum(x.numel() for x in model.parameters())
    finite = all(torch.isfinite(torch.tensor(r["loss"])) for r in rows)
    return {
        "params_m": params / 1e6,
        "train_tokens_per_step": ids.numel(),
        "train_tokens_per_s": rows[-1]["tokens_per_s"],
        "train_peak_gib": _peak_gib(device),
        "ok": finite,
    }


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--device", choices=["cuda", "cpu"], default="cuda")
    ap.add_argument("--steps", type=int, default=3)
    ap.add_argument("--chunk", type=int, default=1024)
    args = ap.parse_args(argv)
    if args.device == "cuda" and not torch.cuda.is_available():
        print(
            "FAIL: --device cuda but torch.cuda.is_available() is False (use --device cpu for the CPU mode)"
        )
        return 2
    p = PRESETS[args.device]
    print(
        f"torch {torch.__version__} device={args.device} "
        f"{torch.cuda.get_device_name() if args.device == 'cuda' else 'cpu'}",
        flush=True,
    )
    ent = check_entropy(args.device, int(p["ent_tokens"]), args.chunk)
    print("entropy " + json.dumps(ent), flush=True)
    train = train_steps(p, args.device, args.steps, args.chunk)
    print("train " + json.dumps(train), flush=True)
    failed = [name for name, r in (("entropy", ent), ("train", train)) if not r["ok"]]
    for name in failed:
        print(f"FAIL: {name}")
    print("SMOKE OK" if not failed else "SMOKE FAILED", flush=True)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
