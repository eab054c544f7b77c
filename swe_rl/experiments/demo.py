"""`swe-rl demo`: SFT warm start (or the shipped checkpoint) -> short GRPO+AEM run -> held-out and micro-suite
evaluation -> report with plots. Prints where the report is.

Everything goes through the real pipeline: generated tasks in Docker sandbox slots, the agent loop, real tests,
swe_rl.algo advantages; the hand-written micro suite through the evaluation harness (`swe-rl eval`'s run_eval).
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from pydantic import Field

from swe_rl.config import StrictModel
from swe_rl.runs import RunDir
from swe_rl.train.config import TrainConfig
from swe_rl.train.sft import SFTConfig

SHIPPED_SFT = Path(__file__).resolve().parents[1] / "train" / "assets" / "demo_sft"  # the trainer ships it


class DemoConfig(StrictModel):
    name: str = "demo"  # runs/<name>
    out_dir: str = "runs"  # base folder
    init: str = str(SHIPPED_SFT)  # SFT checkpoint to start from; "" or a missing folder = run `sft` first
    sft: SFTConfig = Field(default_factory=SFTConfig)  # used only when `init` is not available
    train: TrainConfig = Field(
        default_factory=TrainConfig
    )  # the RL run (model.init is set to the SFT folder)
    micro_suite: bool = True  # also evaluate on the hand-written micro suite with the evaluation harness
    micro_limit: int | None = None  # first N micro-suite tasks (None = all)


def run_demo(cfg: DemoConfig, console: Any = None) -> Path:
    """Run the demo; progress bars (plain lines when not on a terminal) go to `console` (default: stderr)."""
    t0 = time.monotonic()
    root = RunDir.create(cfg.out_dir, cfg.name)
    root.save_config(cfg)
    init = Path(cfg.init) if cfg.init else None
    if init is None or not (init / "config.json").is_file():
        from swe_rl.train.sft import run_sft

        print("demo: no SFT checkpoint, running `swe-rl sft` first", flush=True)
        sft = cfg.sft.model_copy(update={"out_dir": str(root.root), "name": "sft"})
        init = run_sft(sft, console)
    t_sft = time.monotonic() - t0

    from swe_rl.rollout.progress import RunProgress
    from swe_rl.train.loop import train
    from swe_rl.train.progress import resumed_step, step_progress
    from swe_rl.train.run import build_env, check_run_dir, load_policy_model

    tcfg = cfg.train.model_copy(deep=True)
    tcfg.out_dir, tcfg.name, tcfg.model.init = str(root.root), "rl", str(init)
    check_run_dir(tcfg, resume=True)  # a rerun resumes: with other RL settings it would mix two setups
    run = RunDir.create(tcfg.out_dir, tcfg.name)
    run.save_config(tcfg)
    model, tok = load_policy_model(tcfg)
    # Bars for the RL steps and for every rollout / held-out evaluation call (plain lines when not a terminal).
    with RunProgress(console) as bars:
        env = build_env(tcfg, model, tok, bars)
        env.evaluator.keep_in(run)  # every evaluation's per-task rewards and episodes stay in runs/demo/rl
        try:
            print(f"demo: RL for {tcfg.steps} steps from {init}", flush=True)
            on_step = step_progress(bars, tcfg.steps, resumed_step(run.checkpoints, True))
            state = train(tcfg, run, model, tok, env.rollouter, env.tasks, sample_tasks=env.sample_tasks,
                          evaluate=env.evaluator, resume=True, on_step=on_step)  # fmt: skip
            t_rl = time.monotonic() - t0 - t_sft
            rows = run.read_metrics()
            if not any(r["step"] == state.step and "eval/greedy_success" in r for r in rows):
                run.log_metrics(state.step, {f"eval/{k}": v for k, v in env.evaluator(state.step).items()})
                rows = run.read_metrics()
            if "greedy" not in env.evaluator.last:
                # a finished run, resumed: evaluate its last weights again (same seeds, same result) for the
                # held-out report; the metrics already hold this evaluation
                env.evaluator(state.step)
            from swe_rl.train.evaluate import write_eval_report

            held_md = write_eval_report(env.evaluator.last["greedy"], env.evaluator.tasks, root.report / "heldout",
                                        {"dataset": "generated held-out", "policy": "after RL (greedy)"})  # fmt: skip
        finally:
            env.close()
    micro = _micro_suite(cfg, run, root) if cfg.micro_suite else None
    from swe_rl.experiments.demo_report import write_report

    report = write_report(root.report, rows, micro, held_md, (t_sft, t_rl, time.monotonic() - t0))
    print(f"demo: done in {(time.monotonic() - t0) / 60:.1f} min; report: {report}", flush=True)
    return report


def _micro_suite(cfg: DemoConfig, run: RunDir, root: RunDir) -> dict[str, Any] | None:
    """The final checkpoint on the hand-written micro suite through the evaluation harness (greedy)."""
    from swe_rl.evaluation.config import EvalConfig
    from swe_rl.evaluation.harness import run_eval
    from swe_rl.train.checkpoint import latest
    from swe_rl.train.env import demo_agent_config
    from swe_rl.train.sft import prompts_dir

    ck = latest(run.checkpoints)
    if ck is None:
        return None
    ecfg = EvalConfig.model_validate({
        "name": "micro", "output_dir": str(root.report), "model_name": "swe-rl-demo",
        "dataset": {"source": "micro", "limit": cfg.micro_limit},
        "policy": {"kind": "hf", "model": str(ck / "model"), "tokenizer": str(ck / "model" / "tokenizer"),
                   "max_batch": 8},
        "agent": demo_agent_config(prompts_dir(), temperature=0.0).model_dump(),
        "pool": {"backend": "local"},
    })  # fmt: skip
    print(f"demo: micro-suite evaluation of {ck.name} through the evaluation harness (greedy)", flush=True)
    try:
        return run_eval(ecfg)
    except Exception as e:  # the demo's main result is the held-out curve; report the failure, keep going
        print(f"demo: micro-suite evaluation failed: {type(e).__name__}: {e}", flush=True)
        return {"error": f"{type(e).__name__}: {e}"}
