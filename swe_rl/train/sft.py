"""`swe-rl sft`: supervised warm start of a tiny Qwen model on expert trajectories of generated micro tasks.

1. expert transcripts: the generator's scripted solutions played through the real agent loop and tools
   (swe_rl.train.expert), cached as JSONL so a rerun (or the demo) does not replay them;
2. a byte-level BPE tokenizer trained on those transcripts (digits split, ChatML template);
3. transcripts encoded exactly as the agent loop builds episodes; loss only on policy tokens (mask 1);
4. AdamW with warmup; the model + tokenizer are saved as a HF folder that `swe-rl train` / `demo` start from.
"""

from __future__ import annotations

import asyncio
import json
import math
import random
import time
from pathlib import Path
from typing import Annotated, Any

from pydantic import Field

from swe_rl.config import StrictModel
from swe_rl.runs import RunDir
from swe_rl.train.config import ModelConfig


class SFTConfig(StrictModel):
    name: str = "sft"  # run name: runs/<name>
    out_dir: str = "runs"  # base folder of runs
    seed: int = 0  # data order and model init
    n_tasks: int = 1200  # generated training tasks with one expert episode each
    n_funcs: int = 3  # functions per generated module
    data_seed: int = 0  # generator seed (the RL run must use the same one so held-out stays held out)
    transcripts: str = ""  # JSONL cache of expert transcripts; "" = <run>/expert.jsonl
    # fraction of the tasks demonstrated by the flawed expert (right edit, off-by-one constant, tests fail) instead
    # of the expert: SFT data mixed like unfiltered agent trajectories, so RL has a decision to learn from tests
    flawed_fraction: Annotated[float, Field(ge=0.0, le=1.0)] = 0.0
    slots: int = 12  # sandboxes used to play the expert episodes
    sandbox: dict[str, Any] = Field(
        default_factory=lambda: {"backend": "docker", "image": "swe-rl/base:bookworm"}
    )  # sandboxes config of the slots
    steps: int = 600  # optimizer steps
    batch: int = 32  # episodes per step
    lr: float = 2e-3  # peak AdamW learning rate
    warmup: int = 30  # linear warmup steps, then cosine to lr/10
    grad_clip: float = 1.0  # max global grad norm
    log_every: int = 20  # metrics line every N steps
    model: ModelConfig = Field(
        default_factory=ModelConfig
    )  # fresh model; model.init = continue from a checkpoint


# Whole tags of the XML action format and fixed tool phrases as single tokens: the byte-level pre-tokenizer
# splits "<parameter=old_str>" into five pieces BPE cannot merge, which made an action ~3x longer to generate.
FIXED_TOKENS = [
    "<function=file_editor>", "<function=submit>", "<function=execute_bash>", "</function>",
    "<parameter=command>", "<parameter=path>", "<parameter=old_str>", "<parameter=new_str>", "</parameter>",
    "str_replace", "/testbed/calc.py", "Execution output of [file_editor]:",
    "Here's the result of running `cat -n` on", "has been edited. Here's a snippet of the edited region:",
]  # fmt: skip
ROLE_LINES = ["system\n", "user\n", "assistant\n"] * 200  # so BPE merges the ChatML role names


def build_demo_tokenizer(transcripts: list[dict[str, Any]], vocab_size: int) -> Any:
    """Byte-level BPE (digits split) trained on the expert transcripts, plus FIXED_TOKENS as added tokens."""
    from swe_rl.policy.tiny import build_tokenizer
    from swe_rl.train.expert import corpus

    tok = build_tokenizer(corpus(transcripts) + ROLE_LINES, vocab_size=vocab_size)
    tok.add_tokens(FIXED_TOKENS)
    return tok


def prompts_dir() -> str:
    return str(Path(__file__).parent / "prompts")


def flawed_task_ids(task_ids: list[str], fraction: float, seed: int) -> frozenset[str]:
    """The round(fraction * n) task ids demonstrated by the flawed expert (deterministic in seed)."""
    k = round(fraction * len(task_ids))
    return frozenset(random.Random(f"flawed|{seed}").sample(sorted(task_ids), k))


def load_or_make_transcripts(cfg: SFTConfig, path: Path, progress: Any = None) -> list[dict[str, Any]]:
    """Demonstrations from the cache, or played now through the real tools (and cached): the expert's verified
    solutions (reward 1), and for the `flawed_fraction` of tasks the flawed expert's verified failures (reward 0,
    marked "flawed": true in the cache). `progress`: a RunProgress that shows the episodes played."""
    from swe_rl.policy.tiny import build_tokenizer
    from swe_rl.tasks.generator import generate_tasks
    from swe_rl.train.env import SandboxSlots, demo_agent_config
    from swe_rl.train.expert import expert_trajectories, transcript

    tasks = generate_tasks(cfg.n_tasks, "train", cfg.data_seed, cfg.n_funcs)
    flawed = flawed_task_ids([t.instance_id for t in tasks], cfg.flawed_fraction, cfg.data_seed)
    have: list[dict[str, Any]] = []
    if path.is_file():
        have = [json.loads(x) for x in path.read_text().splitlines() if x.strip()]
    done = {(t["task_id"], bool(t.get("flawed"))) for t in have}
    todo = [t for t in tasks if (t.instance_id, t.instance_id in flawed) not in done]
    if todo:
        # A provisional tokenizer: transcripts are text, re-encoded later with the trained tokenizer.
        agent_cfg = demo_agent_config(prompts_dir(), max_new_tokens=512)
        slots = SandboxSlots(cfg.slots, cfg.sandbox)
        bar = progress.add("expert episodes", len(todo), every_s=0) if progress is not None else None

        async def play() -> None:
            try:
                await slots.start()  # SlotsUnavailable now, rather than every expert episode an error
                for i in range(0, len(todo), 64):
                    chunk = todo[i : i + 64]
                    trajs = await expert_trajectories(chunk, build_tokenizer(), agent_cfg, slots, flawed)
                    with path.open("a") as f:
                        for t in trajs:
                            is_flawed = t.task_id in flawed
                            # keep verified demonstrations only: solutions pass, flawed attempts fail the tests
                            if t.reward == (0.0 if is_flawed else 1.0):
                                tr = transcript(t) | ({"flawed": True} if is_flawed else {})
                                f.write(json.dumps(tr) + "\n")
                                have.append(tr)
                    if bar is not None:
                        progress.update(bar, completed=min(i + 64, len(todo)), kept=str(len(have)))
                    else:
                        print(f"expert episodes: {min(i + 64, len(todo))}/{len(todo)}", flush=True)
            finally:
                await slots.aclose()

        asyncio.run(play())
        if bar is not None:
            progress.finish(bar)
    keep = {(t.instance_id, t.instance_id in flawed) for t in tasks}
    return [t for t in have if (t["task_id"], bool(t.get("flawed"))) in keep]


# what a rerun into the same folder may change: how the expert episodes are played and logged, not what is learnt
SFT_MAY_CHANGE = ("out_dir", "name", "slots", "sandbox", "log_every", "model.threads")


def check_sft_dir(cfg: SFTConfig, run: RunDir) -> Path | None:
    """The folder's saved model when it was trained with these settings (a rerun reuses it: training is
    deterministic); ConfigError when the folder holds an SFT run of other settings (its metrics would mix two runs);
    None: train. A run cut short before its model was saved restarts: its metrics rows go aside to
    metrics.interrupted.jsonl; the expert transcripts (expert.jsonl) are kept and reused."""
    from swe_rl.config import ConfigError
    from swe_rl.train.run import changed_settings

    out = run.checkpoints / "sft"
    rows = len(run.read_metrics())
    if not run.config.is_file() or not (rows or (out / "config.json").is_file()):
        return None
    changed = changed_settings(run.config, cfg, SFT_MAY_CHANGE)
    if changed:
        raise ConfigError(
            f"run directory {run.root} holds an SFT run with other settings ({'; '.join(changed)}): pass another "
            f"name (-o name=...) or delete the directory; transcripts=<its expert.jsonl> reuses its demonstrations"
        )
    if (out / "config.json").is_file():
        print(
            f"sft: {out} was trained with these settings; reusing it (delete it to train again)", flush=True
        )
        return out
    # appended to: a second cut-short run keeps the first's rows
    aside = run.root / "metrics.interrupted.jsonl"
    with aside.open("a") as f:
        f.write(run.metrics.read_text())
    run.metrics.unlink()
    print(f"sft: the run in {run.root} stopped before saving its model; training again "
          f"({rows} metrics rows moved to {aside.name})", flush=True)  # fmt: skip
    return None


def run_sft(cfg: SFTConfig, console: Any = None) -> Path:
    """Train and save; returns the folder holding model + tokenizer (runs/<name>/checkpoints/sft). Progress bars
    (plain lines when not on a terminal) go to `console` (default: stderr)."""
    from swe_rl.rollout.progress import RunProgress

    with RunProgress(console) as bars:
        return _run_sft(cfg, bars)


def _run_sft(cfg: SFTConfig, bars: Any) -> Path:
    import torch

    from swe_rl.policy.tiny import build_tiny_model
    from swe_rl.train.env import demo_agent_config
    from swe_rl.train.expert import encode_transcript

    if cfg.model.threads:
        torch.set_num_threads(cfg.model.threads)
    run = RunDir.create(cfg.out_dir, cfg.name)
    done = check_sft_dir(cfg, run)
    if done is not None:
        return done
    run.save_config(cfg)
    cache = Path(cfg.transcripts) if cfg.transcripts else run.root / "expert.jsonl"
    trs = load_or_make_transcripts(cfg, cache, bars)
    if not trs:
        raise RuntimeError(f"no verified expert transcripts in {cache}")
    if cfg.model.init:  # continue training a checkpoint (its tokenizer, so token ids keep their meaning)
        from transformers import AutoModelForCausalLM

        from swe_rl.policy.tiny import load_tokenizer

        tok = load_tokenizer(Path(cfg.model.init))
        model = AutoModelForCausalLM.from_pretrained(cfg.model.init)
    else:
        tok = build_demo_tokenizer(trs, cfg.model.vocab_size)
        model = build_tiny_model(tok, arch=cfg.model.arch, size=cfg.model.size, seed=cfg.model.seed)
    agent_cfg = demo_agent_config(prompts_dir())
    data = [encode_transcript(t, tok, agent_cfg) for t in trs]
    n_params = sum(p.numel() for p in model.parameters())
    n_flawed = sum(bool(t.get("flawed")) for t in trs)
    mean_len = sum(len(d[0]) for d in data) / len(data)
    print(f"sft: {len(data)} demonstrations ({n_flawed} by the flawed expert), mean {mean_len:.0f} tokens, "
          f"model {n_params / 1e6:.2f}M params", flush=True)  # fmt: skip
    train_sft(model, tok, data, cfg, run, bars)
    out = run.checkpoints / "sft"
    from swe_rl.policy.tiny import save_tokenizer

    model.save_pretrained(out)
    save_tokenizer(tok, out)
    print(f"sft: saved {out}", flush=True)
    return out


def train_sft(
    model: Any,
    tok: Any,
    data: list[tuple[list[int], list[int]]],
    cfg: SFTConfig,
    run: RunDir,
    progress: Any = None,
) -> None:
    """Masked next-token cross-entropy (policy tokens only), token-mean over the batch. `progress`: a RunProgress
    (a bar of SFT steps with the loss; else a printed line every `log_every` steps)."""
    import torch

    from swe_rl.agent.trajectory import Trajectory
    from swe_rl.train.batch import collate, token_logprobs_entropy

    rng = random.Random(cfg.seed)
    opt = torch.optim.AdamW(model.parameters(), lr=cfg.lr, weight_decay=0.0)

    def lr_at(step: int) -> float:
        if step < cfg.warmup:
            return cfg.lr * (step + 1) / cfg.warmup
        p = (step - cfg.warmup) / max(cfg.steps - cfg.warmup, 1)
        return cfg.lr * (0.1 + 0.9 * 0.5 * (1 + math.cos(math.pi * p)))

    model.train()
    t0, acc = time.monotonic(), 0.0
    bar = progress.add("SFT steps", cfg.steps) if progress is not None else None
    for step in range(cfg.steps):
        picks = [data[rng.randrange(len(data))] for _ in range(cfg.batch)]
        batch = collate([Trajectory("sft", token_ids=i, loss_mask=m) for i, m in picks], tok.pad_token_id)
        logp, _ = token_logprobs_entropy(model, batch, with_entropy=False)
        loss = -(logp * batch.loss_mask).sum() / batch.loss_mask.sum().clamp(min=1)
        for g in opt.param_groups:
            g["lr"] = lr_at(step)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        gn = torch.nn.utils.clip_grad_norm_(model.parameters(), cfg.grad_clip)
        opt.step()
        acc += float(loss.detach())
        logged = (step + 1) % cfg.log_every == 0 or step + 1 == cfg.steps
        k = (step % cfg.log_every) + 1  # steps in this logging window
        if bar is not None:
            progress.update(bar, completed=step + 1, log=logged, loss=f"{acc / k:.4f}")
        if logged:
            run.log_metrics(step + 1, {"sft_loss": acc / k, "grad_norm": float(gn), "lr": lr_at(step),
                                       "elapsed_s": time.monotonic() - t0})  # fmt: skip
            if bar is None:
                print(
                    f"sft step {step + 1}/{cfg.steps} loss {acc / k:.4f} ({time.monotonic() - t0:.0f}s)",
                    flush=True,
                )
            acc = 0.0
    model.eval()
