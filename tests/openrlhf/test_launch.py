"""`swe-rl train-openrlhf`: dry run of both recipes, config errors, runtime env, prompt-dataset rows."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from swe_rl.cli import app
from swe_rl.config import ConfigError, load_config
from swe_rl.tasks.task import Task
from swe_rl.train.openrlhf import flags, launch
from swe_rl.train.openrlhf.config import AemConfig, OpenRLHFTrainConfig
from swe_rl.train.openrlhf.data import task_from_label, write_prompt_dataset
from swe_rl.train.openrlhf.loggers import MissingKeyError, secret_argv

R7B = "configs/train/qwen25_coder_7b_grpo_aem.yaml"
R32B = "configs/train/qwen3_32b_deepswe_grpo_pp_aem.yaml"
R7B_ASYNC = "configs/train/qwen25_coder_7b_grpo_aem_async.yaml"
R32B_ASYNC = "configs/train/qwen3_32b_deepswe_grpo_pp_aem_async.yaml"
SECRET = "wandb-test-key-0123456789abcdef"


@pytest.mark.parametrize("recipe", [R7B, R32B, R7B_ASYNC, R32B_ASYNC])
def test_dry_run_prints_command_runtime_env_and_config(recipe, tmp_path, monkeypatch):
    monkeypatch.setenv("WANDB_API_KEY", SECRET)
    monkeypatch.delenv("RAY_ADDRESS", raising=False)
    res = CliRunner().invoke(app, ["train-openrlhf", "-c", recipe, "--dry-run", "--runs-dir", str(tmp_path)])
    assert res.exit_code == 0, res.output
    out = res.output
    assert out.startswith("# OpenRLHF 0.11.2 command")
    assert "python -m openrlhf.cli.train_ppo_ray \\\n  --actor.num_nodes" in out
    assert f"--train.agent_func_path {launch.agent_func_path()}" in out
    assert "worker_process_setup_hook" not in out  # our classes are installed in the driver, no hook
    assert "# resolved config" in out and "entropy_source: exact" in out
    assert '--logger.wandb.key "$WANDB_API_KEY"' in out and SECRET not in out
    assert "# logger wandb: project swe-rl" in out and "(key from $WANDB_API_KEY: set)" in out
    assert "# logger tensorboard: runs/" in out
    assert "# fresh run: no checkpoint at runs/" in out
    is_async = "async" in recipe
    assert ("# trainer: PPOTrainerAsync" in out) == is_async
    assert ("--train.async_enable" in out) == is_async and ("--vllm.enable_sleep" in out) != is_async
    # no cluster to join (the recipes' ray_address is null): no Ray is started, and it says where nodes are checked
    assert "# sandbox nodes: not checked (no cluster.ray_address / RAY_ADDRESS to join)" in out
    assert not list(tmp_path.iterdir()), "a dry run must not create anything"


def test_dry_run_says_which_logger_is_active(monkeypatch):
    monkeypatch.delenv("WANDB_API_KEY", raising=False)
    cfg = load_config(OpenRLHFTrainConfig, files=[R7B])
    out = launch.render_dry_run(cfg)
    assert "(key from $WANDB_API_KEY: NOT SET: the launch refuses to start)" in out
    off = load_config(
        OpenRLHFTrainConfig,
        files=[R7B],
        overrides=["logging.wandb_project=null", "logging.tensorboard_dir=null"],
    )
    out = launch.render_dry_run(off)
    assert "--logger.wandb.key" not in out and "--logger.tensorboard_dir" not in out
    assert "# logger metrics go to stdout only" in out


def test_wandb_key_reaches_upstream_parser_but_never_its_printout(orl_parse):
    """The redacted key through OpenRLHF's own parser: equal to the key (upstream's `if args.logger.wandb.key`
    and wandb.login get it), while printing the namespace (train_ppo_ray's strategy.print(args)) shows
    `$WANDB_API_KEY`; it pickles unchanged, as Ray ships the args to the trainer actor."""
    import pickle

    cfg = load_config(OpenRLHFTrainConfig, files=[R7B])
    argv = secret_argv(flags.to_argv(cfg, launch.agent_func_path()), environ={"WANDB_API_KEY": SECRET})
    args = orl_parse(argv)
    assert args.logger.wandb.key == SECRET and args.logger.wandb.project == "swe-rl"
    assert SECRET not in repr(args) and "'$WANDB_API_KEY'" in repr(args)
    assert pickle.loads(pickle.dumps(args)).logger.wandb.key == SECRET
    assert args.logger.tensorboard_dir == f"runs/{cfg.name}/tensorboard"
    with pytest.raises(MissingKeyError, match="WANDB_API_KEY"):
        secret_argv(flags.to_argv(cfg, "x.py"), environ={})


def test_packing_off_reaches_upstream_parser(orl_parse):
    """The rehearsal's knob: packing (flash-attention's varlen kernels) off, with dynamic batching off too, is what
    upstream's parser and its post-parse rules keep; the recipes keep packing on."""
    off = ["model.packing_samples=false", "rollout.max_tokens_per_gpu=null"]
    on = orl_parse(flags.to_argv(load_config(OpenRLHFTrainConfig, files=[R7B]), "x.py"))
    args = orl_parse(flags.to_argv(load_config(OpenRLHFTrainConfig, files=[R7B], overrides=off), "x.py"))
    assert on.ds.packing_samples and on.train.dynamic_batch_enable
    assert not args.ds.packing_samples and not args.train.dynamic_batch_enable


def test_launch_refuses_wandb_without_key_and_reports_resume(tmp_path, monkeypatch):
    monkeypatch.delenv("WANDB_API_KEY", raising=False)
    data = tmp_path / "rows.jsonl"
    write_prompt_dataset([Task(instance_id="a__b-1")], data)
    ckpt = tmp_path / "ckpt"
    cfg = load_config(
        OpenRLHFTrainConfig, files=[R7B], overrides=[f"data.prompt_dataset={data}", f"ckpt.path={ckpt}"]
    )
    with pytest.raises(MissingKeyError):
        launch.run_openrlhf(cfg, runs_dir=str(tmp_path / "runs"))
    assert not (tmp_path / "runs").exists(), "refused before anything was created"
    assert launch.resume_status(cfg).startswith(f"fresh run: no checkpoint at {ckpt}/_actor")
    (ckpt / "_actor").mkdir(parents=True)
    (ckpt / "_actor" / "latest").write_text("global_step20\n")
    assert launch.resume_status(cfg).startswith(f"resuming from {ckpt}/_actor (global_step20)")
    res = CliRunner().invoke(app, ["train-openrlhf", "-c", R7B, "-o", f"data.prompt_dataset={data}"])
    assert res.exit_code == 2 and "WANDB_API_KEY is not" in res.output


def test_launch_with_key_never_writes_it_and_stops_before_ray_without_gpu_stack(tmp_path, monkeypatch):
    monkeypatch.setenv("WANDB_API_KEY", SECRET)
    data = tmp_path / "rows.jsonl"
    write_prompt_dataset([Task(instance_id="a__b-1")], data)
    cfg = load_config(OpenRLHFTrainConfig, files=[R7B], overrides=[f"data.prompt_dataset={data}"])
    import ray

    ray_was_up = ray.is_initialized()  # the session's shared local Ray may be up already
    with pytest.raises(ImportError, match=r"pip install -e \.\[gpu\]"):  # flash-attn / vLLM absent on CPU
        launch.run_openrlhf(cfg, runs_dir=str(tmp_path / "runs"))
    assert not (tmp_path / "runs").exists() and ray.is_initialized() == ray_was_up
    root = launch._save_resolved(cfg, str(tmp_path / "runs"))  # what a real launch writes
    written = "".join(f.read_text() for f in root.rglob("*") if f.is_file())
    assert '--logger.wandb.key "$WANDB_API_KEY"' in written and SECRET not in written


def test_32b_recipe_is_the_papers_setting():
    cfg = load_config(OpenRLHFTrainConfig, files=[R32B])
    assert (cfg.rollout.prompts_per_step, cfg.rollout.samples_per_prompt) == (64, 8)
    assert cfg.optim.train_batch_size == 64 * 8 and cfg.optim.lr == 1e-6
    assert (cfg.optim.clip_high, cfg.optim.kl_coef, cfg.optim.entropy_coef) == (0.28, 0.0, None)
    assert cfg.rollout.max_len == 32768 and cfg.rollout.dynamic_filtering and cfg.aem.compact_filter
    assert (cfg.agent.max_steps, cfg.agent.command_timeout_s) == (50, 90.0)
    steps = cfg.data.max_samples * cfg.rollout.samples_per_prompt // cfg.optim.train_batch_size
    assert steps * cfg.optim.num_episodes == 250  # OpenRLHF's max_steps formula (prepare_datasets)


def _flat(tree: dict, prefix: str = "") -> dict:
    out = {}
    for k, v in tree.items():
        out.update(_flat(v, f"{prefix}{k}.") if isinstance(v, dict) else {f"{prefix}{k}": v})
    return out


def test_the_aem_arm_and_its_baseline_differ_only_in_aem():
    """The paper's comparison: the baseline recipe is the AEM recipe with AEM off, nothing else (its name and
    where its outputs go aside). A grading setting, budget or seed that differs is a confound of the result."""
    base = _flat(load_config(OpenRLHFTrainConfig, files=[R32B.replace("_aem", "")]).model_dump())
    aem = _flat(load_config(OpenRLHFTrainConfig, files=[R32B]).model_dump())
    differ = {k for k in base.keys() | aem.keys() if base.get(k) != aem.get(k)}
    paths = {"name", "ckpt.path", "ckpt.output_dir", "logging.tensorboard_dir"}
    assert differ == {"aem.enabled"} | (differ & paths), sorted(differ)
    assert base["aem.enabled"] is False and aem["aem.enabled"] is True


@pytest.mark.parametrize("recipe", [R7B, R7B_ASYNC, R32B.replace("_aem", ""), R32B, R32B_ASYNC])
def test_every_cluster_recipe_grades_the_same_way(recipe):
    """Rewards mean the same in every cluster recipe: a run's grading settings are the 32B AEM recipe's."""
    keys = ("grade", "grade_timeout_s", "grade_timeout_gold_factor", "fail_fast", "suspicious", "unsubmitted")
    ref = load_config(OpenRLHFTrainConfig, files=[R32B]).agent
    cfg = load_config(OpenRLHFTrainConfig, files=[recipe]).agent
    assert {k: getattr(cfg, k) for k in keys} == {k: getattr(ref, k) for k in keys}
    assert ref.grade_timeout_gold_factor == 10 and ref.grade_timeout_s == 1800


def test_overrides_and_bad_config_errors(tmp_path):
    cfg = load_config(OpenRLHFTrainConfig, files=[R7B], overrides=["aem.entropy_source=surprisal"])
    env = launch.build_env_vars(cfg, environ={})
    assert env["RAY_ENABLE_ZERO_COPY_TORCH_TENSORS"] == "1"
    assert json.loads(env[launch.AEM_ENV])["entropy_source"] == "surprisal"
    assert AemConfig.model_validate_json(env[launch.AEM_ENV]) == cfg.aem  # what actors.aem_config reads back
    with pytest.raises(ConfigError, match="colocate_all"):
        load_config(OpenRLHFTrainConfig, files=[R7B], overrides=["cluster.vllm_engines=4"])
    with pytest.raises(ConfigError, match=r"aem\.no_such_key"):
        load_config(OpenRLHFTrainConfig, files=[R7B], overrides=["aem.no_such_key=1"])
    res = CliRunner().invoke(app, ["train-openrlhf", "-c", R7B, "-o", "optim.estimator=ppo", "--dry-run"])
    assert res.exit_code == 2 and "optim.estimator" in res.output


def test_launch_without_dataset_fails_before_starting_ray(tmp_path):
    cfg = load_config(
        OpenRLHFTrainConfig, files=[R7B], overrides=[f"data.prompt_dataset={tmp_path}/none.jsonl"]
    )
    with pytest.raises(FileNotFoundError, match=r"data\.prompt_dataset"):
        launch.run_openrlhf(cfg, runs_dir=str(tmp_path))


def test_actor_side_reads_the_env_name_the_launcher_sets():
    # actors.py imports DeepSpeed / vLLM at module level (not importable here): read its source instead.
    src = (Path(launch.__file__).parent / "actors.py").read_text()
    assert f'AEM_ENV = "{launch.AEM_ENV}"' in src
    assert "write_metrics_line(global_step, logs_dict, client_states, prompts)" in src


def test_metrics_jsonl_path_reaches_the_trainer_and_gets_one_line_per_step(tmp_path, monkeypatch):
    """logging.metrics_jsonl: the launcher passes it absolute in the job's env; the trainer's line carries the step,
    upstream's scalars (not its sample text), the consumed prompts and every sample's prompt."""
    from swe_rl.train.openrlhf.loggers import METRICS_ENV, write_metrics_line

    cfg = load_config(OpenRLHFTrainConfig, files=[R7B], overrides=["logging.metrics_jsonl=run/metrics.jsonl"])
    monkeypatch.chdir(tmp_path)  # a relative path resolves against the launcher's directory
    path = launch.build_env_vars(cfg)[METRICS_ENV]
    assert path == str(tmp_path / "run" / "metrics.jsonl")
    (tmp_path / "run").mkdir()
    monkeypatch.setenv(METRICS_ENV, path)
    status = {"reward": 0.5, "policy_loss": -0.1, "generated_samples": ["text", 1.0], "flag": True}
    states = {"episode": 0, "global_step": 3, "total_consumed_prompts": 24}
    write_metrics_line(3, status, states, ["t1"] * 2 + ["t2"] * 2)
    write_metrics_line(4, status, {**states, "total_consumed_prompts": 32}, None)
    rows = [json.loads(x) for x in Path(path).read_text().splitlines()]
    assert [r["step"] for r in rows] == [3, 4] and rows[1]["total_consumed_prompts"] == 32
    assert rows[0]["prompts"] == ["t1", "t1", "t2", "t2"] and "prompts" not in rows[1]
    assert rows[0]["reward"] == 0.5 and "generated_samples" not in rows[0] and "flag" not in rows[0]
    monkeypatch.delenv(METRICS_ENV)
    write_metrics_line(5, status, states, None)  # no path: nothing written
    assert len(Path(path).read_text().splitlines()) == 2


@pytest.mark.parametrize(
    ("overrides", "match"),
    [
        (["async_train.enabled=true"], "colocate_all: false"),  # engines need GPUs of their own
        (["async_train.partial_rollout=true"], "partial_rollout needs async_train.enabled"),
        (["optim.is_correction.level=seq", "optim.is_correction.mode=clip"], "clip .TIS. needs level token"),
        (["optim.is_correction.level=token", "optim.is_correction.gating=tv"], "upper bound only"),
        (["optim.is_correction.threshold=[5.0, 0.5]"], "LOW must be below HIGH"),
        # upstream turns packing back on for dynamic batching and ring attention, with a warning only
        (["model.packing_samples=false"], "rollout.max_tokens_per_gpu .dynamic batching. needs packing"),
        (
            ["model.packing_samples=false", "rollout.max_tokens_per_gpu=null", "cluster.ring_attn_size=2"],
            "ring attention",
        ),
    ],
)
def test_async_and_is_correction_config_errors(overrides, match):
    """The rules upstream asserts after the GPUs are up (train_ppo_ray's __main__, PolicyLoss) fail at load."""
    with pytest.raises(ConfigError, match=match):
        load_config(OpenRLHFTrainConfig, files=[R7B], overrides=overrides)


def test_prompt_rows_round_trip(tmp_path):
    tasks = [Task(instance_id="a__b-1", repo="a/b", FAIL_TO_PASS=["t::x"]), Task(instance_id="c__d-2")]
    path = tmp_path / "rows.jsonl"
    assert write_prompt_dataset(tasks, path) == 2
    rows = [json.loads(line) for line in path.read_text().splitlines()]
    assert [r["prompt"] for r in rows] == ["a__b-1", "c__d-2"]
    assert task_from_label(rows[0]["label"]) == tasks[0]
    with pytest.raises(ValueError, match="Task JSON"):
        task_from_label("a__b-1")


@pytest.mark.parametrize(
    ("recipe", "eval_cfg"),
    [
        (R7B, "configs/eval/swe_bench_verified_qwen25_coder_7b.yaml"),
        (R32B, "configs/eval/swe_bench_verified_qwen3_32b.yaml"),
    ],
)
def test_eval_settings_match_the_training_recipe(recipe, eval_cfg):
    from swe_rl.evaluation.config import EvalConfig

    train = load_config(OpenRLHFTrainConfig, files=[recipe])
    ev = load_config(EvalConfig, files=[eval_cfg])
    loop = train.agent.loop_config(
        max_context_tokens=train.rollout.max_len,
        temperature=train.rollout.temperature,
        top_p=train.rollout.top_p,
    )
    keys = ("action_format", "max_steps", "tool_timeout_s", "max_context_tokens", "max_new_tokens", "temperature",
            "max_wall_s", "chat_template_kwargs", "profile", "top_p")  # fmt: skip
    assert {k: getattr(ev.agent, k) for k in keys} == {k: getattr(loop, k) for k in keys}
    assert ev.dataset.source == "princeton-nlp/SWE-bench_Verified" and ev.grader == "official"
