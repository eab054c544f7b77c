"""`swe-rl show`: JSONL round trip of a real episode and its terminal rendering through the CLI."""

from __future__ import annotations

from typer.testing import CliRunner

from swe_rl.agent.loop import run_episode
from swe_rl.agent.trajectory import Trajectory, read_jsonl, span_ids, write_jsonl
from swe_rl.cli import app
from swe_rl.policy.scripted import ScriptedGoldPolicy


async def test_show_renders_a_recorded_episode(
    agent_repo, agent_sandbox, agent_cfg_for, tiny_tokenizer, tmp_path
):
    _, task = agent_repo
    cfg = agent_cfg_for(agent_sandbox)
    traj = await run_episode(
        task,
        agent_sandbox,
        ScriptedGoldPolicy(task, tiny_tokenizer, repo_dir=cfg.repo_dir),
        tiny_tokenizer,
        cfg,
    )
    path = write_jsonl(
        tmp_path / "trajs.jsonl", [traj, Trajectory(task_id="other", exit_status="error", error="Boom")]
    )
    back = read_jsonl(path)
    assert back[0] == traj and back[1].error == "Boom"
    runner = CliRunner()
    res = runner.invoke(app, ["show", str(path), "--max-chars", "400"], env={"COLUMNS": "120"})
    assert res.exit_code == 0, res.output
    for needle in (
        "calc-add",
        "submitted",
        "str_replace",
        "Steps Remaining",
        "return a + b",
        "step 4 · submit",
    ):
        assert needle in res.output
    res = runner.invoke(app, ["show", str(path), "--tokens", "--max-chars", "100"])
    assert res.exit_code == 0 and "policy tokens highlighted" in res.output
    res = runner.invoke(app, ["show", str(path), "--task", "other"])
    assert res.exit_code == 0 and "Boom" in res.output and "(empty patch)" in res.output
    res = runner.invoke(app, ["show", str(path), "--index", "5"])
    assert res.exit_code != 0 and "index 5 is out of range" in res.output
    (tmp_path / "bad.jsonl").write_text('{"task_id": "x"}\nnot json\n')
    res = runner.invoke(app, ["show", str(tmp_path / "bad.jsonl")])
    assert res.exit_code != 0 and "bad.jsonl:2" in res.output


def test_span_ids():
    assert span_ids([0, 1, 1, 0, 0, 1, 0, 1]) == [-1, 0, 0, -1, -1, 1, -1, 2]
