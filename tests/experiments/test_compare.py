"""`swe-rl compare`'s summary: per-seed gains from the first to the last held-out evaluation, and the plots."""

from __future__ import annotations

import itertools
import json

import numpy as np
import pytest

from swe_rl.experiments.compare import summarize
from swe_rl.runs import RunDir


def _write_run(out, name, greedy, sampled, mixed):
    run = RunDir.create(str(out), name)
    for step, (g, s, m) in enumerate(zip(greedy, sampled, mixed, strict=True)):
        row = {"mixed_group_frac": m, "entropy_mean": 0.05, "reward_mean": s}
        if g is not None:
            row |= {"eval/greedy_success": g, "eval/sampled_success": s}
        run.log_metrics(step, row)


def test_summary_gains_and_plots(tmp_path):
    _write_run(tmp_path, "a_s0", [0.5, None, 0.7], [0.3, 0.35, 0.6], [0.9, 0.8, 0.7])
    _write_run(tmp_path, "a_s1", [0.4, None, 0.4], [0.2, 0.3, 0.3], [0.6, 0.5, 0.5])
    _write_run(tmp_path, "b_s0", [0.5, None, 0.45], [0.4, 0.4, 0.35], [0.9, 0.9, 0.9])
    path = summarize(tmp_path, ["a", "b"], [0, 1])
    summary = json.loads(path.read_text())
    assert summary["a"]["greedy_mean_gain"] == pytest.approx(0.1)  # (0.2 + 0.0) / 2
    assert summary["a"]["sampled_mean_gain"] == pytest.approx(0.2)  # (0.3 + 0.1) / 2
    assert summary["a"]["greedy_sd_gain"] == pytest.approx(0.1414, abs=1e-3)
    assert summary["b"]["sampled_mean_gain"] == pytest.approx(-0.05)
    assert summary["b"]["greedy_sd_gain"] is None  # one seed ran
    assert [s["seed"] for s in summary["b"]["seeds"]] == [0]
    assert summary["a"]["seeds"][0]["mixed_first"] == 0.9
    pngs = {p.name for p in (tmp_path / "plots").glob("*.png")}
    assert {"heldout_success.png", "heldout_success_sampled.png", "entropy.png", "mixed_groups.png"} <= pngs


def test_step0_evaluation_is_computed_once_per_key(tmp_path):
    from swe_rl.experiments.compare import Step0Cache

    calls = []

    def evaluator(step):
        calls.append(step)
        return {"greedy_success": 0.5 + 0.1 * len(calls)}

    path = tmp_path / "eval_step0.json"
    a = Step0Cache(evaluator, path, {"init": "ck1"})
    first = a(0)
    assert Step0Cache(evaluator, path, {"init": "ck1"})(0) == first  # a second run reuses it
    assert calls == [0]
    assert a(12) != first and calls == [0, 12]  # later steps are always evaluated
    assert Step0Cache(evaluator, path, {"init": "ck2"})(0) != first  # another checkpoint: evaluated again
    assert calls == [0, 12, 0]


def test_aem_diagnostics_in_summary_plots_and_report(tmp_path):
    from swe_rl.experiments.plots import aem_report_rows

    run = RunDir.create(str(tmp_path), "grpo_aem_s0")
    for step, (rule, tok, edit) in enumerate([(1.0, 1.0, 1.0), (0.5, 0.9, 0.6), (0.25, 0.8, 0.4)]):
        run.log_metrics(step + 1, {
            "mixed_group_frac": 0.5, "algo/aem/alpha_mean": 1.0, "algo/aem/frac_groups_range_rule": rule,
            "algo/aem/alpha_token_mean": tok, "algo/aem/alpha_turn/file_editor:str_replace": edit,
            "algo/aem/alpha_turn/submit": 1.1,
        })  # fmt: skip
    RunDir.create(str(tmp_path), "grpo_s0").log_metrics(1, {"mixed_group_frac": 0.5})
    summary = json.loads(summarize(tmp_path, ["grpo_aem", "grpo"], [0]).read_text())
    aem = summary["grpo_aem"]["aem"]
    assert aem["frac_groups_range_rule"] == pytest.approx(0.5833, abs=1e-3)
    assert aem["alpha_token_mean"] == pytest.approx(0.9)
    assert aem["alpha_by_turn"] == pytest.approx({"file_editor:str_replace": 2 / 3, "submit": 1.1})
    assert "aem" not in summary["grpo"]  # no AEM, no AEM diagnostics
    pngs = {p.name for p in (tmp_path / "plots").glob("*.png")}
    assert {"aem_range_rule.png", "aem_alpha_token_mean.png"} <= pngs
    rows = aem_report_rows(run.read_metrics())
    assert any("range rule" in r and "100%" in r and "25%" in r for r in rows)
    assert any("file_editor:str_replace" in r and "0.400" in r for r in rows)


# --- per-task evaluation records, the primary metric and its paired bootstrap (issue 16's outcome study) ---


def _write_records(out, name, evals):
    """evals: step -> {task_id: [rewards]} of sampled evaluations (and a greedy one of the first sample)."""
    from swe_rl.train.evaluate import write_record

    run = RunDir.create(str(out), name)
    for step, tasks in evals.items():
        write_record(run.root / "eval_tasks", step, {"greedy": {t: r[:1] for t, r in tasks.items()},
                                                     "sampled": tasks})  # fmt: skip
        run.log_metrics(
            step, {"eval/greedy_success": 0.5, "eval/sampled_success": 0.5, "mixed_group_frac": 0.5}
        )
    return run


class _FakeRollouter:
    """rollout(tasks, n, seed) -> n trajectories per task; reward by (task, sample, temperature)."""

    def __init__(self, reward, temp=1.0):
        self.reward, self.temp = reward, temp

    def with_temperature(self, temp):
        return _FakeRollouter(self.reward, temp)

    def rollout(self, tasks, n, seed):
        from swe_rl.agent.trajectory import Trajectory

        return [Trajectory(task_id=t.instance_id, sample_idx=i, reward=self.reward(t.instance_id, i, self.temp),
                           exit_status="submitted") for t in tasks for i in range(n)]  # fmt: skip


def test_heldout_eval_writes_per_task_records(tmp_path):
    from swe_rl.tasks.task import Task
    from swe_rl.train.evaluate import HeldOutEval

    tasks = [Task(instance_id=f"t{i}", problem_statement="x") for i in range(3)]

    def reward(task, i, temp):
        if task == "t2" and i == 1:
            return None  # ungraded: 0.0 in the record
        return 1.0 if (temp == 0.0 or i == 0) and task != "t1" else 0.0

    ev = HeldOutEval(_FakeRollouter(reward), tasks, sampled=2)
    ev.run(0)
    assert not (tmp_path / "rec").exists()  # no record_dir: nothing written
    ev.record_dir = tmp_path / "rec"
    ev.run(7)
    rec = json.loads((tmp_path / "rec" / "step_000007.json").read_text())
    assert rec == {"step": 7, "modes": {"greedy": {"t0": [1.0], "t1": [0.0], "t2": [1.0]},
                                        "sampled": {"t0": [1.0, 0.0], "t1": [0.0, 0.0], "t2": [1.0, 0.0]}}}  # fmt: skip
    assert [p.name for p in (tmp_path / "rec").iterdir()] == ["step_000007.json"]  # no temporary left
    assert not (tmp_path / "eps").exists()  # no episodes_dir: no episodes written

    ev.episodes_dir = tmp_path / "eps"
    ev.run(8)
    assert [p.name for p in (tmp_path / "eps").iterdir()] == ["step_000008.jsonl"]
    lines = [json.loads(x) for x in (tmp_path / "eps" / "step_000008.jsonl").read_text().splitlines()]
    assert [(r["mode"], r["task_id"], r["sample"], r["reward"]) for r in lines] == [
        ("greedy", "t0", 0, 1.0), ("greedy", "t1", 0, 0.0), ("greedy", "t2", 0, 1.0),
        ("sampled", "t0", 0, 1.0), ("sampled", "t0", 1, 0.0), ("sampled", "t1", 0, 0.0), ("sampled", "t1", 1, 0.0),
        ("sampled", "t2", 0, 1.0), ("sampled", "t2", 1, None)]  # fmt: skip
    # the evaluator's failure modes (tasks without a flawed expert: "unknown"; resolved: none)
    assert {(r["resolved"], r["failure"]) for r in lines} == {(False, "unknown")}
    assert set(lines[0]) == {"mode", "task_id", "sample", "reward", "resolved", "exit", "failure", "patch",
                             "messages"}  # fmt: skip


def test_step0_cache_gives_every_run_its_step0_record(tmp_path):
    from swe_rl.experiments.compare import Step0Cache

    calls = []

    class Ev:
        def __init__(self, record_dir, episodes_dir=None):
            self.record_dir, self.episodes_dir, self.last_record = record_dir, episodes_dir, {}

        def __call__(self, step):
            calls.append(step)
            self.last_record = {"sampled": {"a": [1.0, 0.0]}}
            if self.episodes_dir is not None:
                self.episodes_dir.mkdir(parents=True, exist_ok=True)
                (self.episodes_dir / f"step_{step:06d}.jsonl").write_text(EPISODES)
            (self.record_dir / f"step_{step:06d}.json").parent.mkdir(parents=True, exist_ok=True)
            (self.record_dir / f"step_{step:06d}.json").write_text(
                json.dumps({"step": step, "modes": self.last_record})
            )
            return {"sampled_success": 0.5}

    cache = tmp_path / "eval_step0.json"
    assert Step0Cache(Ev(tmp_path / "r1"), cache, {"k": 1})(0) == {"sampled_success": 0.5}
    assert json.loads(cache.read_text())["tasks"] == {"sampled": {"a": [1.0, 0.0]}}
    assert Step0Cache(Ev(tmp_path / "r2"), cache, {"k": 1})(0) == {"sampled_success": 0.5}
    assert calls == [0]  # served from the cache, and the second run still has its record
    assert json.loads((tmp_path / "r2" / "step_000000.json").read_text()) == {
        "step": 0, "modes": {"sampled": {"a": [1.0, 0.0]}}}  # fmt: skip
    cache.write_text(json.dumps({"key": {"k": 1}, "metrics": {"sampled_success": 0.5}}))  # an old cache file
    Step0Cache(Ev(tmp_path / "r3"), cache, {"k": 1})(0)
    assert calls == [0, 0]  # no per-task rewards in it: evaluated again
    cache.write_text('{"key": ')  # torn
    Step0Cache(Ev(tmp_path / "r4"), cache, {"k": 1})(0)
    assert calls == [0, 0, 0] and "tasks" in json.loads(cache.read_text())
    assert not list(tmp_path.glob(".eval_step0.json*"))  # atomic writes leave no temporaries


EPISODES = '{"mode": "sampled", "task_id": "a", "sample": 0, "reward": 1.0}\n'


def test_step0_cache_gives_every_run_its_step0_episodes(tmp_path):
    """Each run's eval_episodes holds the step-0 episodes whether it evaluated them or the cache served them; a
    cached episodes file that is not the one the cache entry names is not copied (no episodes beat wrong ones)."""
    from swe_rl.experiments.compare import Step0Cache

    calls = []

    class Ev:
        def __init__(self, root):
            self.record_dir, self.episodes_dir, self.last_record = root / "rec", root / "eps", {}

        def __call__(self, step):
            calls.append(step)
            self.last_record = {"sampled": {"a": [1.0]}}
            self.episodes_dir.mkdir(parents=True, exist_ok=True)
            (self.episodes_dir / f"step_{step:06d}.jsonl").write_text(EPISODES)
            return {"sampled_success": 1.0}

    cache = tmp_path / "eval_step0.json"
    Step0Cache(Ev(tmp_path / "r1"), cache, {"k": 1})(0)
    assert (tmp_path / "eval_step0.episodes.jsonl").read_text() == EPISODES
    Step0Cache(Ev(tmp_path / "r2"), cache, {"k": 1})(0)
    assert calls == [0]  # served from the cache, episodes included
    assert (tmp_path / "r2" / "eps" / "step_000000.jsonl").read_text() == EPISODES
    (tmp_path / "eval_step0.episodes.jsonl").write_text(
        EPISODES.replace("1.0", "0.0")
    )  # not the cached run's
    Step0Cache(Ev(tmp_path / "r3"), cache, {"k": 1})(0)
    assert calls == [0] and not (tmp_path / "r3" / "eps").exists()


def _study(tmp_path, n_seeds=4):
    """grpo vs grpo_aem: 4 tasks x 2 samples, evaluations at steps 0, 10, 20, 30; aem is better by known amounts."""
    import numpy as np

    rng = np.random.default_rng(0)
    truth = {}
    for s in range(n_seeds):
        for m in ("grpo", "grpo_aem"):
            evals = {}
            for step in (0, 10, 20, 30):
                p = 0.25 if step == 0 else 0.5 + (0.125 * (s + 1) if m == "grpo_aem" else 0.0)
                evals[step] = {f"t{t}": [float(rng.random() < p) for _ in range(2)] for t in range(4)}
            if m == "grpo_aem" and s == 0:
                evals[30]["t9"] = [1.0, 1.0]  # a task only this run has: excluded from the paired difference
            _write_records(tmp_path, f"{m}_s{s}", evals)
            truth[(m, s)] = evals
    return truth


def _primary_by_hand(evals, steps, tasks):
    return sum(sum(evals[st][t]) / 2 for st in steps for t in tasks) / (len(steps) * len(tasks))


def test_summary_primary_metric_and_paired_bootstrap(tmp_path):
    truth = _study(tmp_path)
    path = summarize(tmp_path, ["grpo", "grpo_aem"], [0, 1, 2, 3], draws=2000)
    primary = json.loads(path.read_text())["primary"]
    assert (primary["last_k"], primary["mode"], primary["baseline"]) == (3, "sampled", "grpo")
    tasks = [f"t{t}" for t in range(4)]
    g = [_primary_by_hand(truth[("grpo", s)], (10, 20, 30), tasks) for s in range(4)]
    assert primary["methods"]["grpo"]["per_seed"] == pytest.approx(g)
    assert primary["methods"]["grpo"]["mean"] == pytest.approx(sum(g) / 4)
    assert primary["methods"]["grpo"]["steps"]["0"] == [10, 20, 30]  # step 0 is not among the last three
    d = [_primary_by_hand(truth[("grpo_aem", s)], (10, 20, 30), tasks) - g[s] for s in range(4)]
    p = primary["paired"]["grpo_aem"]
    assert p["per_seed"] == pytest.approx(d)  # t9 is not in the paired difference
    assert p["mean"] == pytest.approx(sum(d) / 4)
    assert p["lo"] <= p["mean"] <= p["hi"] and (p["n_seeds"], p["n_tasks"], p["draws"]) == (4, 4, 2000)
    assert p["n_positive"] == sum(x > 0 for x in d)
    assert "grpo" not in primary["paired"]
    md = (tmp_path / "summary.md").read_text()
    assert "| grpo_aem | 4 |" in md and "(baseline)" in md and f"{p['n_positive']} / 4" in md
    assert f"{100 * p['mean']:+.1f} [{100 * p['lo']:+.1f}, {100 * p['hi']:+.1f}]" in md
    assert (tmp_path / "plots" / "paired_primary.png").stat().st_size > 1000
    # beside the bootstrap: the t-interval over the per-seed differences and the exact sign-flip p (issue 26)
    ss = p["small_seed"]
    half = 3.182 * float(np.std(d, ddof=1)) / 2  # t(0.975, df=3) · sd / sqrt(4)
    assert ss["t95"] == pytest.approx([sum(d) / 4 - half, sum(d) / 4 + half])
    flips = [
        abs(sum(g * x for g, x in zip(signs, d, strict=True)))
        for signs in itertools.product((-1, 1), repeat=4)
    ]
    assert ss["sign_flip_p"] == pytest.approx(sum(f >= abs(sum(d)) - 1e-12 for f in flips) / 16)
    assert (
        f"| {ss['sign_flip_p']:.3f} |" in md
        and f"[{100 * ss['t95'][0]:+.1f}, {100 * ss['t95'][1]:+.1f}]" in md
    )


def test_summary_last_k_baseline_and_missing_seeds(tmp_path):
    truth = _study(tmp_path, n_seeds=3)
    # seed 2 of grpo lost its last evaluation: its last one is step 20
    (tmp_path / "grpo_s2" / "eval_tasks" / "step_000030.json").unlink()
    path = summarize(tmp_path, ["grpo", "grpo_aem"], [0, 1, 2, 5], baseline="grpo_aem", last_k=1, draws=500)
    primary = json.loads(path.read_text())["primary"]
    assert primary["baseline"] == "grpo_aem" and primary["last_k"] == 1
    tasks = [f"t{t}" for t in range(4)]
    p = primary["paired"]["grpo"]
    assert p["seeds"] == [0, 1, 2] and p["steps_mismatched_seeds"] == [2]
    want = [_primary_by_hand(truth[("grpo", s)], (20 if s == 2 else 30,), tasks)
            - _primary_by_hand(truth[("grpo_aem", s)], (30,), tasks) for s in range(3)]  # fmt: skip
    assert p["per_seed"] == pytest.approx(want)


def test_summary_without_records_skips_the_primary_metric(tmp_path, capsys):
    _write_run(tmp_path, "a_s0", [0.5, None, 0.7], [0.3, 0.35, 0.6], [0.9, 0.8, 0.7])
    summary = json.loads(summarize(tmp_path, ["a"], [0]).read_text())
    assert "primary" not in summary and summary["a"]["greedy_mean_gain"] == pytest.approx(0.2)
    assert "primary metric is skipped" in capsys.readouterr().out
    md = (tmp_path / "summary.md").read_text()
    assert "not available" in md and "| a | 1 | +20.0 | +30.0 |" in md
    assert not (tmp_path / "plots" / "paired_primary.png").exists()


def test_summary_md_has_aem_diagnostics(tmp_path):
    run = RunDir.create(str(tmp_path), "grpo_aem_s0")
    run.log_metrics(1, {"algo/aem/alpha_mean": 1.0, "algo/aem/frac_groups_range_rule": 0.25,
                        "algo/aem/alpha_token_mean": 0.9, "algo/aem/alpha_turn/submit": 1.1})  # fmt: skip
    summarize(tmp_path, ["grpo_aem"], [0])
    md = (tmp_path / "summary.md").read_text()
    assert "| grpo_aem | 25% | 0.900 | 1.100 |" in md and "mean α, submit" in md


# --- run_compare: parallel workers on the toy environment ---


@pytest.fixture
def tiny_init(tmp_path):
    from swe_rl.policy.tiny import build_tiny_model, build_tokenizer, save_tokenizer

    tok = build_tokenizer()
    path = tmp_path / "init"
    build_tiny_model(tok, size="tiny", seed=0).save_pretrained(path)
    save_tokenizer(tok, path)
    return path


def _toy_overrides(init):
    return [f"init={init}", "train.data.source=toy", "train.steps=2", "train.save_every=1",
            "train.rollout.tasks_per_step=4", "train.rollout.n_samples=4", "train.model.threads=1",
            "train.log_trajectories=0", "train.eval.every=0"]  # fmt: skip


@pytest.mark.slow  # make test's 15-minute budget (2026-12-04: 21-29 s each); .ci/run still runs it
@pytest.mark.ci_slow
def test_compare_parallel_jobs_match_sequential(tmp_path, tiny_init):
    from swe_rl.experiments.compare import run_compare

    kw = {"methods": ["grpo", "grpo_aem"], "seeds": [0], "overrides": _toy_overrides(tiny_init)}
    run_compare([], out=str(tmp_path / "seq"), jobs=1, **kw)
    run_compare([], out=str(tmp_path / "par"), jobs=2, **kw)
    for name in ("grpo_s0", "grpo_aem_s0"):
        seq = RunDir(tmp_path / "seq" / name).read_metrics()
        par = RunDir(tmp_path / "par" / name).read_metrics()
        assert [r["step"] for r in par] == [1, 2]
        # the same runs in other processes
        assert [r["reward_mean"] for r in par] == [r["reward_mean"] for r in seq]
        assert [r["loss"] for r in par] == pytest.approx([r["loss"] for r in seq], rel=1e-5)
    # resumable: a second call finds every run finished and trains nothing more
    run_compare([], out=str(tmp_path / "par"), jobs=2, **kw)
    assert [r["step"] for r in RunDir(tmp_path / "par" / "grpo_aem_s0").read_metrics()] == [1, 2]


@pytest.mark.slow  # make test's 15-minute budget (2026-12-04: 21-29 s each); .ci/run still runs it
@pytest.mark.ci_slow
def test_compare_parallel_failure_names_the_run(tmp_path, tiny_init):
    from swe_rl.experiments.compare import run_compare

    out = tmp_path / "out"
    out.mkdir()
    (out / "grpo_aem_s0").write_text("not a folder")  # this run cannot create its run directory
    with pytest.raises(RuntimeError, match="grpo_aem_s0"):
        run_compare([], ["grpo", "grpo_aem"], [0], _toy_overrides(tiny_init), str(out), jobs=2)
    assert [r["step"] for r in RunDir(out / "grpo_s0").read_metrics()] == [1, 2]  # the other run finished


def test_a_rerun_with_a_changed_recipe_is_refused_before_any_training(tmp_path, tiny_init):
    # compare resumes its runs: a recipe edited between two calls mixed two setups in one run's curves
    from swe_rl.config import ConfigError
    from swe_rl.experiments.compare import run_compare

    over = [*_toy_overrides(tiny_init), "train.steps=1"]
    run_compare([], ["grpo"], [0], over, str(tmp_path), jobs=1)
    before = (tmp_path / "grpo_s0" / "metrics.jsonl").read_text()
    with pytest.raises(
        ConfigError, match=r"--resume of .*grpo_s0 with settings .*optim\.lr: 0\.0003 -> 0\.5"
    ):
        run_compare([], ["grpo"], [0], [*over, "train.optim.lr=0.5", "train.steps=2"], str(tmp_path), jobs=1)
    assert (tmp_path / "grpo_s0" / "metrics.jsonl").read_text() == before
    run_compare([], ["grpo"], [0], [*over, "train.steps=2"], str(tmp_path), jobs=1)  # a longer run: resumed
    assert [r["step"] for r in RunDir(tmp_path / "grpo_s0").read_metrics()] == [1, 2]


def test_compare_rejects_bad_jobs_and_baseline(tmp_path):
    from swe_rl.experiments.compare import run_compare

    with pytest.raises(ValueError, match="jobs"):
        run_compare([], ["grpo"], [0], [], str(tmp_path), jobs=0)
    with pytest.raises(ValueError, match="baseline"):
        run_compare([], ["grpo"], [0], [], str(tmp_path), baseline="rloo")


def test_compare_writes_eval_records_and_the_primary_metric(tmp_path):
    """End to end (run_compare, as `swe-rl compare` calls it) on the real in-process decisions environment: the
    start is built once, every run's real evaluator records its per-task rewards (step 0 from the shared cache for
    the second run), and the summary's primary block equals the metric recomputed from those records."""
    from swe_rl.experiments.compare import run_compare

    overrides = ["train.data.source=decisions", "train.data.n_train=200", "train.data.decisions.sft_steps=30",
                 "train.model.size=tiny", "train.model.threads=1", "train.steps=2", "train.save_every=1",
                 "train.rollout.tasks_per_step=4", "train.rollout.n_samples=4", "train.log_trajectories=0",
                 "train.eval.every=1", "train.eval.n_tasks=6", "train.eval.sampled=2",
                 "train.eval.split=validation"]  # fmt: skip
    path = run_compare([], ["grpo", "grpo_aem"], [0], overrides, str(tmp_path), last_k=2)
    assert (tmp_path / "start" / "start.json").is_file()
    recs = {}
    for name in ("grpo_s0", "grpo_aem_s0"):
        files = sorted(p.name for p in (tmp_path / name / "eval_tasks").iterdir())
        assert files == ["step_000000.json", "step_000001.json", "step_000002.json"]
        recs[name] = {int(f[5:11]): json.loads((tmp_path / name / "eval_tasks" / f).read_text())["modes"]
                      for f in files}  # fmt: skip
        assert all(len(r["sampled"]) == 6 and all(len(v) == 2 for v in r["sampled"].values())
                   for r in recs[name].values())  # fmt: skip
    assert recs["grpo_s0"][0] == recs["grpo_aem_s0"][0]  # the shared step-0 evaluation
    for name in ("grpo_s0", "grpo_aem_s0"):  # every evaluation's episodes, their rewards those of the record
        eps = tmp_path / name / "eval_episodes"
        assert sorted(p.name for p in eps.iterdir()) == [
            "step_000000.jsonl",
            "step_000001.jsonl",
            "step_000002.jsonl",
        ]
        for step, modes in recs[name].items():
            lines = [json.loads(x) for x in (eps / f"step_{step:06d}.jsonl").read_text().splitlines()]
            got: dict = {}
            for r in lines:
                got.setdefault(r["mode"], {}).setdefault(r["task_id"], []).append(float(r["reward"] or 0.0))
                assert r["messages"] and r["exit"]
            assert got == modes
    step0 = [
        (tmp_path / n / "eval_episodes" / "step_000000.jsonl").read_text() for n in ("grpo_s0", "grpo_aem_s0")
    ]
    assert step0[0] == step0[1]  # the second run's from the cache

    def by_hand(name):  # mean over tasks of the mean over the last two evaluations' samples
        per_task = [sum(recs[name][st]["sampled"][t][i] for st in (1, 2) for i in range(2)) / 4
                    for t in recs[name][1]["sampled"]]  # fmt: skip
        return sum(per_task) / len(per_task)

    primary = json.loads(path.read_text())["primary"]
    assert primary["methods"]["grpo"]["per_seed"] == pytest.approx([by_hand("grpo_s0")])
    d = by_hand("grpo_aem_s0") - by_hand("grpo_s0")
    assert primary["paired"]["grpo_aem"]["per_seed"] == pytest.approx([d])
    assert (
        f"| grpo_aem | 1 | {100 * by_hand('grpo_aem_s0'):.1f} | {100 * d:+.1f} ["
        in (tmp_path / "summary.md").read_text()
    )


def test_summary_md_has_the_entropy_curve_over_seeds(tmp_path):
    for seed, ents in ((0, [1.0, 0.8, 0.4]), (1, [0.8, 0.6, None])):
        run = RunDir.create(str(tmp_path), f"grpo_s{seed}")
        for step, e in enumerate(ents, start=1):
            if e is not None:
                run.log_metrics(step, {"entropy_mean": e})
    summary = json.loads(summarize(tmp_path, ["grpo"], [0, 1]).read_text())
    assert summary["grpo"]["entropy_by_step"] == pytest.approx({"1": 0.9, "2": 0.7, "3": 0.4})
    md = (tmp_path / "summary.md").read_text()
    assert "| method | step 1 | step 2 | step 3 |" in md and "| grpo | 0.900 | 0.700 | 0.400 |" in md
