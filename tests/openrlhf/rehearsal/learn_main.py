"""`make rehearsal-learn`: OpenRLHF's own loop learns on CPU, side by side with the built-in trainer (issue 37).

    PYTHONPATH=tests/openrlhf/cuda_fakes:tests/openrlhf/rehearsal:. .venv/bin/python \
        tests/openrlhf/rehearsal/learn_main.py [--work DIR] [--steps 12] [--interrupt-at 6] [--arms ...]

From the demo's SFT checkpoint, on generated micro tasks, GRPO + AEM and no entropy term (the reward is the
gradient's only source). Arms, each resumable (a finished arm's result file is kept):
- `start`: the held-out evaluation of the SFT checkpoint (learn_eval.evaluate: swe-rl eval's harness, greedy and
  sampled);
- `openrlhf`: OpenRLHF's whole train_ppo_ray through our launcher with the rehearsal's CPU pieces
  (rehearsal_main.py), STEPS rollout steps of 8 tasks x 8 samples, 2 optimizer updates each, then the evaluation
  of its final save (ckpt.output_dir, read back with from_pretrained);
- `resumed`: the same run interrupted (SIGINT to its launcher, as Ctrl-C does) once step K's checkpoint is on disk,
  then launched again: upstream resumes from the checkpoint; then the same evaluation;
- `builtin`: the built-in trainer (swe_rl.train.loop) from the same start with the demo's settings, the same tasks
  and the same number of policy updates; then the same evaluation.
The OpenRLHF dataset is exactly the tasks the built-in trainer draws (its task sampler replayed), so both arms
train on the same tasks; OpenRLHF's sampler orders them its own way. The analysis is fixed in PLAN.md (see
learn_eval.py); `summary.json`, `table.md` and `gains.png` go to --work.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[2]
PROMPTS, SAMPLES, MINIBATCH = 8, 8, 32  # the demo's tasks x samples per step and its PPO minibatch
ARMS = ("start", "openrlhf", "resumed", "builtin")
SLOTS_RUN_ID = "swe-rl-train"  # swe_rl.train.env.SandboxSlots' containers (the executor's with agent.slots)


def demo_train_config(steps: int, out: Path):
    """The demo's built-in TrainConfig (configs/demo.yaml), `steps` long, no in-run evaluation."""
    from swe_rl.config import load_config
    from swe_rl.experiments.demo import DemoConfig

    cfg = load_config(DemoConfig, files=[ROOT / "configs/demo.yaml"]).train.model_copy(deep=True)
    cfg.steps, cfg.save_every, cfg.eval.every = steps, steps, 0
    cfg.out_dir, cfg.name, cfg.model.init = str(out), "builtin", str(start_model())
    return cfg


def start_model() -> Path:
    from swe_rl.experiments.demo import SHIPPED_SFT

    return SHIPPED_SFT


def train_tasks(steps: int):
    """The tasks the built-in trainer draws in `steps` steps (loop.train's task sampler, replayed)."""
    from swe_rl.tasks.generator import generate_tasks, sample_batch

    cfg = demo_train_config(steps, Path("/nonexistent"))
    pool = generate_tasks(cfg.data.n_train, "train", cfg.data.seed, cfg.data.n_funcs)
    rng = random.Random(cfg.seed)
    return [t for _ in range(steps) for t in sample_batch(pool, cfg.rollout.tasks_per_step, rng)]


def openrlhf_config(work: Path, arm: str, steps: int):
    """The rehearsal's recipe with the demo's learning settings (lr and warm-up over the same updates, Adam betas,
    clip, compact filtering, the agent's limits and sandbox slots), AEM on, no entropy term, a checkpoint every
    step."""
    import rehearsal_main

    from swe_rl.config import load_config
    from swe_rl.train.openrlhf.config import OpenRLHFTrainConfig

    demo = demo_train_config(steps, work)
    updates = steps * PROMPTS * SAMPLES // MINIBATCH
    ns = argparse.Namespace(async_train=False, zero_stage=3, temperature=1.0)
    base = rehearsal_main.overrides(work / arm, work / "rows.jsonl", ns)
    ov = [*base, f"name=learn-{arm}", f"rollout.prompts_per_step={PROMPTS}", f"rollout.samples_per_prompt={SAMPLES}",
          f"optim.train_batch_size={MINIBATCH}", "optim.micro_batch_size=8", "optim.rollout_micro_batch_size=8",
          f"optim.lr={demo.optim.lr}", f"optim.warmup_ratio={min(1.0, demo.optim.warmup * 2 / updates)!r}",
          "optim.lr_scheduler=constant_with_warmup", "optim.entropy_coef=null", "optim.estimator=group_norm",
          f"optim.max_norm={demo.optim.grad_clip}", "aem.enabled=true", "aem.compact_filter=true",
          "agent.max_steps=4", f"agent.max_concurrent_sandboxes={PROMPTS * SAMPLES}",
          f"agent.slots={demo.rollout.slots}",  # the built-in trainer's environment: reused slots, cached grading
          f"logging.metrics_jsonl={work / arm / 'metrics.jsonl'}", "ckpt.save_steps=1",
          'extra_flags=["--vllm.sync_backend", "nccl", "--actor.adam.betas", "0.9", "0.999"]']  # fmt: skip
    return load_config(OpenRLHFTrainConfig, files=[ROOT / rehearsal_main.RECIPE], overrides=ov)


def launch(work: Path, arm: str, steps: int) -> int:
    """Child process: one launch of OpenRLHF for `arm` (a new Ray, our launcher, upstream's CLI)."""
    import rehearsal_main

    cfg = openrlhf_config(work, arm, steps)
    env = rehearsal_main.job_env(cfg, work / arm)
    os.environ["SWE_RL_REHEARSAL_OUT"] = str(work / arm)
    error, _, wall = rehearsal_main.run_phase(cfg, env, work / arm, arm)
    print(f"learn {arm}: {'stopped: ' + error if error else 'ran to the end'} after {wall:.0f} s", flush=True)
    return 0 if error is None else 1


def _slot_ids() -> set[str]:
    from sandboxes.engine import docker_client
    from sandboxes.lifecycle import list_managed

    return {c.id for c in list_managed(docker_client(), run_id=SLOTS_RUN_ID)}


def reap_launch_slots(before: set[str]) -> int:
    """Remove the executor's sandbox slots this launch started and left behind (their owner, a rollout actor, is
    gone once Ray shut down): containers of the slots' run id that were not there before the launch."""
    from sandboxes.engine import docker_client
    from sandboxes.lifecycle import list_managed, owner_alive, remove_all

    client = docker_client()
    doomed = [c.id for c in list_managed(client, run_id=SLOTS_RUN_ID)
              if c.id not in before and owner_alive(c.labels) is False]  # fmt: skip
    remove_all(client, doomed)
    return len(doomed)


def run_launch(work: Path, arm: str, steps: int, interrupt_at: int | None = None) -> dict:
    """Run `launch` in a child process; with `interrupt_at`, SIGINT it once DeepSpeed's `latest` tag says that
    step's checkpoint is complete. Returns {rc, wall_s, interrupted}."""
    cmd = [sys.executable, str(Path(__file__)), "--work", str(work), "--steps", str(steps), "--launch", arm]
    before = _slot_ids()
    t0 = time.time()
    log = (work / arm).with_suffix(f".launch{int(t0)}.log")
    (work / arm).mkdir(parents=True, exist_ok=True)
    with log.open("w") as f:
        proc = subprocess.Popen(cmd, stdout=f, stderr=subprocess.STDOUT, cwd=ROOT)
        latest = work / arm / "ckpt" / "_actor" / "latest"
        interrupted = False
        while proc.poll() is None:
            time.sleep(2)
            tag = latest.read_text().strip() if latest.is_file() else ""
            if interrupt_at is not None and not interrupted and tag == f"global_step{interrupt_at}":
                proc.send_signal(signal.SIGINT)  # Ctrl-C: the launcher's ray.shutdown() ends the job's actors
                interrupted = True
        rc = proc.wait()
    reaped = reap_launch_slots(before)
    print(f"learn {arm}: launch rc {rc} in {time.time() - t0:.0f} s{' (interrupted)' if interrupted else ''}; "
          f"{reaped} leftover slots removed; log {log}", flush=True)  # fmt: skip
    return {"rc": rc, "wall_s": time.time() - t0, "interrupted": interrupted, "log": str(log)}


def read_metrics(path: Path) -> list[dict]:
    return [json.loads(x) for x in path.read_text().splitlines() if x.strip()] if path.is_file() else []


def train_builtin(work: Path, steps: int) -> Path:
    """The built-in trainer's run (the demo's settings); returns its final checkpoint's model folder."""
    from swe_rl.rollout.progress import RunProgress
    from swe_rl.runs import RunDir
    from swe_rl.train.checkpoint import latest
    from swe_rl.train.loop import train
    from swe_rl.train.run import build_env, load_policy_model

    cfg = demo_train_config(steps, work)
    run = RunDir.create(cfg.out_dir, cfg.name)
    run.save_config(cfg)
    model, tok = load_policy_model(cfg)
    with RunProgress() as bars:
        env = build_env(cfg, model, tok, bars)
        try:
            train(cfg, run, model, tok, env.rollouter, env.tasks, sample_tasks=env.sample_tasks, resume=True)
        finally:
            env.close()
    ck = latest(run.checkpoints)
    assert ck is not None, f"no checkpoint in {run.checkpoints}"
    return ck / "model"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--work", type=Path, default=Path("/tmp/swe-rl-rehearsal-learn"))
    ap.add_argument("--steps", type=int, default=12)
    ap.add_argument("--interrupt-at", type=int, default=6)
    ap.add_argument("--arms", default=",".join(ARMS))
    ap.add_argument("--launch", help=argparse.SUPPRESS)  # internal: the child process of one OpenRLHF launch
    args = ap.parse_args()
    os.chdir(ROOT)
    work = args.work.resolve()
    if args.launch:
        return launch(work, args.launch, args.steps)
    from learn_report import run_arms

    return run_arms(work, args.steps, args.interrupt_at, [a for a in args.arms.split(",") if a])


if __name__ == "__main__":
    sys.exit(main())
