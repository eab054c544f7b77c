"""Run our launcher on a recipe shrunk to the micro suite, with Ray declaring the recipe's GPUs, and report the
first failure inside the openrlhf wheel (see cpu_probe.sh). Exit 0 only if training ran to the end."""

from __future__ import annotations

import argparse
import sys
import time
import traceback
from pathlib import Path


def tiny_model(path: Path) -> Path:
    from swe_rl.policy.tiny import build_tiny_model, build_tokenizer, save_tokenizer

    if not (path / "config.json").is_file():
        tok = build_tokenizer()
        build_tiny_model(tok).save_pretrained(path)
        save_tokenizer(tok, path)
    return path


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("recipe", nargs="?", default="configs/train/qwen25_coder_7b_grpo_aem.yaml")
    ap.add_argument("--work", type=Path, default=Path("/tmp/swe-rl-cpu-probe"))
    ap.add_argument(
        "--tiny-model", action="store_true", help="a tiny local Qwen2, 1 actor GPU, 1 vLLM engine"
    )
    ap.add_argument("-o", "--override", action="append", default=[], help="more dotted overrides")
    args = ap.parse_args()
    import ray

    from swe_rl.config import load_config
    from swe_rl.tasks.loaders import load_tasks
    from swe_rl.train.openrlhf import launch
    from swe_rl.train.openrlhf.config import OpenRLHFTrainConfig
    from swe_rl.train.openrlhf.data import write_prompt_dataset
    from swe_rl.train.openrlhf.preflight import gpus_needed

    rows = args.work / "rows.jsonl"
    write_prompt_dataset(load_tasks("micro")[:2], rows)
    overrides = [f"data.prompt_dataset={rows}", "rollout.prompts_per_step=2", "optim.train_batch_size=16",
                 f"ckpt.path={args.work}/ckpt", f"ckpt.output_dir={args.work}/final",
                 "logging.wandb_project=null", "logging.tensorboard_dir=null"]  # fmt: skip
    if args.tiny_model:
        overrides += [f"model.path={tiny_model(args.work / 'model')}", "model.attn_implementation=sdpa",
                      "cluster.nodes=1", "cluster.gpus_per_node=1", "cluster.vllm_engines=1", "cluster.vllm_tp=1",
                      "rollout.max_len=2048", "rollout.max_new_tokens=256", "rollout.max_tokens_per_gpu=4096",
                      'agent.loop={"max_new_tokens": 64}']  # fmt: skip
    overrides += args.override
    cfg = load_config(OpenRLHFTrainConfig, files=[args.recipe], overrides=overrides)
    gpus = gpus_needed(cfg)
    ray.init(num_cpus=2, num_gpus=gpus, include_dashboard=False, runtime_env=launch.build_runtime_env(cfg))
    print(f"ray: {ray.cluster_resources().get('GPU', 0):.0f} declared GPUs", flush=True)
    t0 = time.time()
    try:
        launch.run_openrlhf(cfg, runs_dir=str(args.work / "runs"))
    except BaseException as e:  # the probe reports whatever stops the run
        root = e
        while root.__cause__ is not None:  # launch.py re-raises a missing GPU stack with advice
            root = root.__cause__
        frames = traceback.extract_tb(root.__traceback__)
        print(f"stopped after {time.time() - t0:.1f}s: {type(e).__name__}: {e}")
        for f in frames:
            print(f"  {f.filename}:{f.lineno}  {f.line}")
        wheel = [f for f in frames if "/openrlhf/" in f.filename]
        if wheel:
            w = wheel[-1]
            print(
                f"first failing line in the openrlhf wheel: openrlhf/{w.filename.split('/openrlhf/', 1)[1]}:{w.lineno}"
            )
        return 1
    finally:
        ray.shutdown()
    print(f"training ran to the end in {time.time() - t0:.1f}s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
