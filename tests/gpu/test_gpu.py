"""`make test-gpu`: our torch paths on CUDA against the same code on the CPU (one GPU, a few minutes).

- the algorithm pipeline (every estimator / modulator / loss / off-policy case of tests/device_cases.py) gives
  the CPU's results on CUDA in fp32 (1e-5);
- the built-in trainer's update step on CUDA equals the CPU's on a tiny model (same replayed trajectories), and
  runs with bf16 autocast at the Qwen2.5-1.5B shape;
- the shipped demo checkpoint's greedy generation (HFLocalPolicy, KV cache) is token-identical on CUDA and CPU;
  the sampler's draws follow their distribution on CUDA (tests/policy/test_sampler.py's check);
- the fused exact entropy (eager and compiled) equals the trainer's former formula and the CPU's (fp32, 1e-5);
- token entropy from hidden states at Qwen's 151,936 vocabulary × 32K tokens stays within its memory bound;
- a checkpoint written by a CUDA run loads on the CPU.
The OpenRLHF seams on CUDA experiences: tests/openrlhf/test_seam_device.py. Without CUDA every test here is
skipped with one reason (tests/conftest.py); SWE_RL_GPU_TESTS_ON_CPU=1 runs them with the CPU as the device under
test at small sizes (a dry run of the code, not a GPU result).
"""

from __future__ import annotations

import copy
import random
from pathlib import Path
from typing import Any

import pytest
import torch

from tests.device_cases import CASES, device_under_test, run_case

pytestmark = pytest.mark.gpu

DEV = device_under_test()
ON_CUDA = DEV == "cuda"
QWEN_VOCAB = 151936
# Qwen2.5-1.5B: hidden 1536, 28 layers, 12 heads (2 KV), FFN 8960; a 2-layer cut of it in a CPU dry run
QWEN15 = dict(hidden_size=1536, num_hidden_layers=28 if ON_CUDA else 2, num_attention_heads=12,
              num_key_value_heads=2, intermediate_size=8960 if ON_CUDA else 256)  # fmt: skip
ENTROPY_TOKENS = 32768 if ON_CUDA else 512
# extra CUDA memory over the inputs for 32K tokens × 151,936 (an unchunked fp32 softmax alone: 18.5 GiB)
ENTROPY_FORWARD_BOUND_GIB = 1.5  # one 512-token chunk: bf16 logits + fp32 copy + exp ≈ 0.8 GiB
ENTROPY_BACKWARD_BOUND_GIB = (
    6.0  # + fp32 grads of hidden (0.2) and lm_head (0.9), its fp32 copy, a chunk's dz
)


def _close(a: Any, b: Any, tol: float, what: str) -> None:
    if isinstance(a, torch.Tensor):
        torch.testing.assert_close(b, a, rtol=tol, atol=tol, msg=what)
    elif isinstance(a, dict):
        assert a.keys() == b.keys(), what
        for k in a:
            _close(a[k], b[k], tol, f"{what}/{k}")
    elif isinstance(a, float):
        assert b == pytest.approx(a, rel=tol, abs=tol), what
    else:
        assert a == b, what


# ── the algorithm pipeline ──


@pytest.mark.parametrize("name", sorted(CASES))
def test_pipeline_on_device_equals_cpu(name):
    want = run_case(name, "cpu")
    got = run_case(name, DEV)  # run_case also checks every output stayed on DEV
    _close(want, got, 1e-5, name)


# ── the built-in trainer ──


class ReplayRollouter:
    """The same recorded toy trajectories every call: both devices train on identical data."""

    def __init__(self, trajs: list[Any]):
        self.trajs = trajs

    def rollout(self, tasks: list[Any], n: int, seed: int) -> list[Any]:
        return copy.deepcopy(self.trajs)


@pytest.fixture(scope="module")
def toy_batch():
    """4 toy tasks × 4 samples sampled once on the CPU by the real toy environment (mixed rewards)."""
    from swe_rl.experiments.toy import ToyRollouter, toy_tasks
    from swe_rl.policy.tiny import build_tiny_model, build_tokenizer

    tok = build_tokenizer()
    tasks = toy_tasks(10, stride=2)[:4]
    trajs = ToyRollouter(build_tiny_model(tok, size="tiny", seed=0), tok).rollout(tasks, 4, seed=11)
    assert len({t.reward for t in trajs}) > 1, "the replayed batch needs mixed rewards"
    return tok, tasks, trajs


def _train_one_step(
    tmp_path: Path, name: str, model: Any, toy_batch, save: bool = True, **cfg_updates: Any
) -> tuple[Any, dict]:
    """One RL step on the replayed batch; with `save`, its checkpoint (steps=1 saves at the end)."""
    from swe_rl.runs import RunDir
    from swe_rl.train.config import TrainConfig
    from swe_rl.train.loop import train

    tok, tasks, trajs = toy_batch
    cfg = TrainConfig.model_validate({
        "name": name, "out_dir": str(tmp_path), "seed": 0, "steps": 1 if save else 2, "save_every": int(save),
        "log_trajectories": 0,
        "rollout": {"tasks_per_step": 4, "n_samples": 4},
        "optim": {"lr": 1e-4, "epochs": 2, "minibatch": 8, "micro_batch": 4},
        "algo": {"modulator": {"kind": "aem"}, "compact_filtering": {"enabled": True},
                 "loss": {"kl_coef": 0.05, "entropy_coef": 0.01}},
        **cfg_updates,
    })  # fmt: skip
    run = RunDir.create(cfg.out_dir, cfg.name)
    random.seed(0)
    train(
        cfg,
        run,
        model,
        tok,
        ReplayRollouter(trajs),
        tasks,
        sample_tasks=lambda ts, k, rng: ts[:k],
        stop_after=1,
    )
    return run, run.read_metrics()[-1]


def test_trainer_step_on_device_equals_cpu(tmp_path, toy_batch):
    from swe_rl.policy.tiny import build_tiny_model

    tok = toy_batch[0]
    cpu_model = build_tiny_model(tok, size="tiny", seed=0)
    dev_model = copy.deepcopy(cpu_model).to(DEV)
    _, m_cpu = _train_one_step(tmp_path, "cpu", cpu_model, toy_batch)
    _, m_dev = _train_one_step(tmp_path, "dev", dev_model, toy_batch)
    for k in ("loss", "pg_loss", "grad_norm", "entropy_mean", "algo/adv/token_abs_mean", "kl_ref", "entropy"):
        assert m_dev[k] == pytest.approx(m_cpu[k], rel=1e-4, abs=1e-6), k
    assert m_dev["updates"] == m_cpu["updates"] > 0
    for (n, a), b in zip(cpu_model.named_parameters(), dev_model.parameters(), strict=True):
        assert b.device.type == DEV
        torch.testing.assert_close(b.detach().cpu(), a.detach(), rtol=0, atol=1e-5, msg=n)


def test_checkpoint_written_on_device_loads_on_cpu(tmp_path, toy_batch):
    from swe_rl.policy.tiny import build_tiny_model
    from swe_rl.train.checkpoint import latest, load_checkpoint

    tok = toy_batch[0]
    dev_model = build_tiny_model(tok, size="tiny", seed=0).to(DEV)
    run, _ = _train_one_step(tmp_path, "ckpt", dev_model, toy_batch)
    ckpt = latest(run.checkpoints)
    assert ckpt is not None
    cpu_model = build_tiny_model(tok, size="tiny", seed=1)  # other weights: the load must replace them
    opt = torch.optim.AdamW(cpu_model.parameters(), lr=1e-4)
    state = load_checkpoint(ckpt, cpu_model, opt)
    assert state.step == 1
    for a, b in zip(dev_model.parameters(), cpu_model.parameters(), strict=True):
        assert b.device.type == "cpu"
        torch.testing.assert_close(b.detach(), a.detach().cpu(), rtol=0, atol=0)
    moments = [t for s in opt.state.values() for t in s.values() if isinstance(t, torch.Tensor) and t.dim()]
    assert moments and all(t.device.type == "cpu" for t in moments)


def test_trainer_step_bf16_autocast_at_qwen_shape(tmp_path, toy_batch):
    from transformers import Qwen2Config, Qwen2ForCausalLM

    cfg = Qwen2Config(vocab_size=QWEN_VOCAB, max_position_embeddings=4096, tie_word_embeddings=True, **QWEN15)
    torch.manual_seed(0)
    with torch.device(DEV):  # initialised in place on the device (minutes on a CPU at this size)
        model = Qwen2ForCausalLM(cfg).float()
    before = model.model.layers[0].mlp.up_proj.weight.detach().clone()
    if ON_CUDA:
        torch.cuda.reset_peak_memory_stats()
    _, m = _train_one_step(
        tmp_path, "bf16", model, toy_batch, save=False, autocast="bf16"
    )  # no 6 GB checkpoint
    peak = torch.cuda.max_memory_allocated() / 2**30 if ON_CUDA else float("nan")
    print(f"bf16 autocast step at the Qwen2.5-1.5B shape on {DEV}: loss {m['loss']:.4f}, {m['time_train_s']:.2f} s "
          f"train, peak {peak:.1f} GiB")  # fmt: skip
    assert all(torch.isfinite(torch.tensor(m[k])) for k in ("loss", "grad_norm", "entropy_mean"))
    after = model.model.layers[0].mlp.up_proj.weight.detach()
    assert after.dtype == torch.float32 and after.device.type == DEV  # autocast: fp32 weights and optimizer
    assert not torch.equal(before, after)


# ── generation ──


def test_demo_checkpoint_greedy_and_seeded_generation_is_token_identical():
    from transformers import AutoModelForCausalLM

    from swe_rl.experiments.demo import SHIPPED_SFT
    from swe_rl.policy.base import SamplingParams
    from swe_rl.policy.hf import HFLocalPolicy
    from swe_rl.policy.tiny import load_tokenizer
    from swe_rl.tasks.generator import generate_tasks

    tok = load_tokenizer(SHIPPED_SFT)
    cpu = AutoModelForCausalLM.from_pretrained(SHIPPED_SFT, dtype=torch.float32).eval()
    dev = copy.deepcopy(cpu).to(DEV)
    tasks = generate_tasks(8, "held_out", 0, 3)
    prompts = [
        tok(f"<|im_start|>user\n{t.problem_statement}<|im_end|>\n<|im_start|>assistant\n")["input_ids"]
        for t in tasks
    ]
    greedy = [SamplingParams(temperature=0, max_new_tokens=48) for _ in prompts]
    want = HFLocalPolicy(cpu, tok).generate_batch(prompts, greedy)
    got = HFLocalPolicy(dev, tok).generate_batch(prompts, greedy)
    for i, (a, b) in enumerate(zip(want, got, strict=True)):
        assert b.token_ids == a.token_ids, f"prompt {i}: greedy tokens differ"
        torch.testing.assert_close(torch.tensor(b.logprobs), torch.tensor(a.logprobs), rtol=1e-4, atol=1e-4)
        torch.testing.assert_close(
            torch.tensor(b.token_entropy), torch.tensor(a.token_entropy), rtol=1e-4, atol=1e-4
        )
    # seeded sampling draws its uniforms from CPU generators: one seed, the same tokens on the device as on the CPU
    # (fp32 logits agree to ~1e-6; a draw that close to a CDF boundary, well under 1e-3 for these ~430 tokens, would differ)
    seeded = [SamplingParams(max_new_tokens=48, seed=3 + i) for i in range(len(prompts))] + [
        SamplingParams(max_new_tokens=48, seed=20, top_p=0.9, top_k=20)
    ]
    want = HFLocalPolicy(cpu, tok).generate_batch(prompts + prompts[:1], seeded)
    got = HFLocalPolicy(dev, tok).generate_batch(prompts + prompts[:1], seeded)
    assert [c.token_ids for c in got] == [c.token_ids for c in want], "seeded sampling differs from the CPU's"
    assert len({tuple(c.token_ids) for c in want}) > 1, "the seeds should not all sample one completion"
    assert any(w.token_ids != g.token_ids for w, g in zip(want, HFLocalPolicy(cpu, tok).generate_batch(prompts, greedy),
                                                         strict=False)), "no seeded row left the greedy path"  # fmt: skip
    unseeded = HFLocalPolicy(dev, tok).generate_batch(
        [prompts[0], prompts[1]], [SamplingParams(max_new_tokens=16, top_p=0.9, top_k=20)] * 2
    )
    assert all(len(c.token_ids) > 0 for c in unseeded)


def test_sampler_follows_the_distribution_on_device():
    """The inverse-CDF draw, min_p, top_k and top_p on the device: frequencies of 40,000 rows within 5 sigma."""
    from tests.policy.test_sampler import CASES, assert_frequencies, expected, sampler_frequencies

    torch.manual_seed(0)
    for case in ("T1", "T0.5", "p0.7", "k3p0.6", "minp0.25p0.8"):
        assert_frequencies(sampler_frequencies(DEV, *CASES[case]), expected(*CASES[case]))
    for case in ("k2", "k3p0.6"):  # the draw among the kept top_k + 1 tokens (every row truncates)
        assert_frequencies(sampler_frequencies(DEV, *CASES[case], head_draw=True), expected(*CASES[case]))


@pytest.mark.parametrize("compiled", ["0", "1"], ids=["eager", "compiled"])
def test_fused_entropy_on_device_equals_todays_and_the_cpu(monkeypatch, compiled, tiny_tokenizer, tiny_model):
    """The one exact-entropy definition on the device (eager, and torch.compile'd: SWE_RL_ENTROPY_COMPILE) equals
    the CPU's result and float64's at Qwen's vocabulary (1e-5), and the built-in trainer's old-policy forward on a
    tiny model equals the formula it used before (log_softmax, then -(p * log p).sum; fp32, 1e-5)."""
    from swe_rl.algo.entropy import token_logprobs_and_entropy
    from swe_rl.train.batch import token_logprobs_entropy
    from tests.algo.test_entropy_fused import _batch, todays_token_logprobs_entropy

    monkeypatch.setenv("SWE_RL_ENTROPY_COMPILE", compiled)
    g = torch.Generator().manual_seed(0)
    logits = torch.randn(300, QWEN_VOCAB, generator=g) * 4
    logits[7, 100:5000] = float("-inf")
    targets = torch.randint(0, QWEN_VOCAB, (300,), generator=g)
    cpu_lp, cpu_h = token_logprobs_and_entropy(logits, targets, chunk_size=128, temperature=0.6)
    lp, h = token_logprobs_and_entropy(logits.to(DEV), targets.to(DEV), chunk_size=128, temperature=0.6)
    # at this vocabulary the former fp32 formula is itself ~2e-5 off (2026-12-06, CPU), the fused one ~7e-7: the
    # kernel is held to float64's values; log-probs of random tokens reach -40 (one fp32 rounding ~4e-6)
    ref = torch.log_softmax(logits.to(DEV).double() / 0.6, -1)
    ref_h = -(ref.exp() * ref.nan_to_num(neginf=0.0)).sum(-1)
    for got, want, rtol in ((lp, ref.gather(-1, targets.to(DEV)[:, None]).squeeze(-1), 1e-6), (h, ref_h, 0.0),
                            (lp.cpu(), cpu_lp, 1e-6), (h.cpu(), cpu_h, 0.0)):  # fmt: skip
        torch.testing.assert_close(got, want.to(got.device, torch.float32), rtol=rtol, atol=1e-5)
    model = copy.deepcopy(tiny_model).float().to(DEV).eval()
    batch = _batch(tiny_tokenizer).to(DEV)
    with torch.no_grad():
        new = token_logprobs_entropy(model, batch, chunk=2, temperature=0.7)
        old = todays_token_logprobs_entropy(model, batch, chunk=2, temperature=0.7)
    for a, b in zip(new, old, strict=True):
        torch.testing.assert_close(a, b, rtol=0, atol=1e-5)


# ── entropy at Qwen's vocabulary ──


def test_entropy_from_hidden_states_memory_bound():
    from swe_rl.algo.entropy import entropy_from_logits, token_entropy_from_hidden

    n, d, v = ENTROPY_TOKENS, QWEN15["hidden_size"], QWEN_VOCAB
    g = torch.Generator(device=DEV).manual_seed(0)
    hidden = torch.randn(n, d, generator=g, device=DEV).to(torch.bfloat16).requires_grad_(True)
    weight = (torch.randn(v, d, generator=g, device=DEV) * 0.05).to(torch.bfloat16).requires_grad_(True)
    if ON_CUDA:
        torch.cuda.synchronize()
        torch.cuda.empty_cache()
        torch.cuda.reset_peak_memory_stats()
    base = torch.cuda.memory_allocated() if ON_CUDA else 0
    ent = token_entropy_from_hidden(hidden, weight, chunk_size=512)
    fwd = (torch.cuda.max_memory_allocated() - base) / 2**30 if ON_CUDA else 0.0
    ent.sum().backward()
    bwd = (torch.cuda.max_memory_allocated() - base) / 2**30 if ON_CUDA else 0.0
    with torch.no_grad():
        ref = entropy_from_logits(torch.nn.functional.linear(hidden[:256], weight))
    err = (ent[:256].detach() - ref).abs().max().item()
    print(f"entropy from hidden states, {n} tokens x {v} vocab on {DEV}: extra peak forward {fwd:.2f} GiB, "
          f"forward+backward {bwd:.2f} GiB (unchunked fp32 probabilities: {n * v * 4 / 2**30:.1f} GiB), "
          f"max error {err:.1e}")  # fmt: skip
    assert err < 1e-3
    assert bool(torch.isfinite(ent).all()) and hidden.grad is not None and weight.grad is not None
    assert bool(torch.isfinite(hidden.grad.float()).all()) and bool(torch.isfinite(weight.grad.float()).all())
    if ON_CUDA:
        assert fwd <= ENTROPY_FORWARD_BOUND_GIB, f"forward extra peak {fwd:.2f} GiB"
        assert bwd <= ENTROPY_BACKWARD_BOUND_GIB, f"forward+backward extra peak {bwd:.2f} GiB"
