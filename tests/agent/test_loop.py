"""The agent loop in a real LocalSandbox: scripted gold episodes, tiny-model episodes, every exit reason, patches."""

from __future__ import annotations

import asyncio
import subprocess

import pytest

from swe_rl.agent.loop import run_episode
from swe_rl.agent.parsing import format_action
from swe_rl.policy.base import Completion, SamplingParams
from swe_rl.policy.hf import HFLocalPolicy
from swe_rl.policy.scripted import ReplayPolicy, ScriptedGoldPolicy

pytestmark = pytest.mark.timeout(120)


async def test_gold_policy_resolves_and_transcript_matches(
    agent_repo, agent_sandbox, agent_cfg_for, tiny_tokenizer, agent_check
):
    repo, task = agent_repo
    cfg = agent_cfg_for(agent_sandbox)
    policy = ScriptedGoldPolicy(task, tiny_tokenizer, repo_dir=cfg.repo_dir)
    traj = await run_episode(task, agent_sandbox, policy, tiny_tokenizer, cfg)
    assert traj.exit_status == "submitted" and traj.terminated and not traj.truncated
    agent_check(traj, tiny_tokenizer)
    assert traj.patch == task.patch  # the tools reproduced the gold diff exactly (pycache etc. excluded)
    tests_obs = [m["content"] for m in traj.messages if m["role"] == "user"][-1]
    assert "1 passed" in tests_obs
    # ChatML never rewrites history, so a full re-render of the transcript equals the token stream
    msgs = [{"role": m["role"], "content": m["content"]} for m in traj.messages]
    full = tiny_tokenizer.apply_chat_template(msgs, tokenize=False)
    assert (
        tiny_tokenizer.decode(traj.token_ids, skip_special_tokens=False) + "\n" == full
    )  # no obs after submit
    # the patch applies to a clean checkout and fixes the test
    clean = repo.parent / "clean"
    subprocess.run(["git", "clone", "-q", str(repo), str(clean)], check=True)
    subprocess.run(["git", "apply", "-"], input=traj.patch, text=True, cwd=clean, check=True)
    assert "a + b" in (clean / "calc.py").read_text()


async def test_hermes_format_episode(agent_repo, agent_sandbox, agent_cfg_for, tiny_tokenizer, agent_check):
    _, task = agent_repo
    cfg = agent_cfg_for(agent_sandbox, action_format="hermes")
    policy = ScriptedGoldPolicy(task, tiny_tokenizer, repo_dir=cfg.repo_dir, action_format="hermes")
    traj = await run_episode(task, agent_sandbox, policy, tiny_tokenizer, cfg)
    assert traj.exit_status == "submitted" and traj.patch == task.patch
    assert {m["role"] for m in traj.messages} == {"system", "user", "assistant", "tool"}
    agent_check(traj, tiny_tokenizer)


@pytest.mark.parametrize("arch", ["qwen2", "qwen3"])
async def test_tiny_model_episode_is_well_formed(
    arch, agent_repo, agent_sandbox, agent_cfg_for, tiny_tokenizer, agent_check, tmp_path
):
    from swe_rl.policy.tiny import build_tiny_model

    _, task = agent_repo
    model = build_tiny_model(tiny_tokenizer, arch=arch, seed=1)
    policy = HFLocalPolicy(model, tiny_tokenizer)
    system = tmp_path / "system.md"  # a short prompt replaced from the config keeps the CPU forward cheap
    system.write_text("Fix the bug with file_editor, search, execute_bash or submit.")
    task_file = tmp_path / "task.md"
    task_file.write_text("Issue: {problem_statement}")
    cfg = agent_cfg_for(
        agent_sandbox, max_new_tokens=16, max_format_errors=3, max_steps=10, seed=0,
        system_prompt_file=str(system), task_prompt_file=str(task_file),
    )  # fmt: skip
    traj = await run_episode(task, agent_sandbox, policy, tiny_tokenizer, cfg)
    await policy.close()
    agent_check(traj, tiny_tokenizer)
    assert traj.messages[0]["content"].startswith("Fix the bug with") and traj.prompt_len < 120
    assert traj.exit_status == "format_errors" and traj.metrics["format_errors"] == 3
    assert traj.entropy is not None and all(e >= 0 for e in traj.entropy)
    assert all(lp <= 0 for lp in traj.logprobs)
    assert traj.patch == ""  # random text never edits anything


async def test_max_steps(agent_repo, agent_sandbox, agent_cfg_for, tiny_tokenizer, agent_check):
    _, task = agent_repo
    cfg = agent_cfg_for(agent_sandbox, max_steps=3)
    view = format_action("file_editor", {"command": "view", "path": cfg.repo_dir}, "xml")
    traj = await run_episode(task, agent_sandbox, ReplayPolicy(tiny_tokenizer, [view]), tiny_tokenizer, cfg)
    assert traj.exit_status == "max_steps" and traj.truncated and not traj.terminated
    assert traj.metrics["steps"] == 3 and traj.metrics["tool_calls"] == 3
    notes = [m["content"].splitlines()[-1] for m in traj.messages if m["role"] == "user"]
    assert (
        notes == ["You have reached the maximum number of steps. Please submit your answer NOW."] * 0 + notes
    )
    assert notes[1:] == [
        "Steps Remaining: 2",
        "You have reached the maximum number of steps. Please submit your answer NOW.",
    ]
    agent_check(traj, tiny_tokenizer)


async def test_context_limit_and_token_warning(
    agent_repo, agent_sandbox, agent_cfg_for, tiny_tokenizer, agent_check
):
    _, task = agent_repo
    view = format_action("file_editor", {"command": "view", "path": agent_sandbox.root + "/calc.py"}, "xml")
    probe = agent_cfg_for(agent_sandbox)
    short = await run_episode(
        task,
        agent_sandbox,
        ReplayPolicy(tiny_tokenizer, [view]),
        tiny_tokenizer,
        probe.model_copy(update={"max_steps": 2}),
    )
    budget = len(short.token_ids) + 40  # room for a bit more than one turn
    cfg = agent_cfg_for(agent_sandbox, max_context_tokens=budget, token_warning_fraction=0.5)
    traj = await run_episode(task, agent_sandbox, ReplayPolicy(tiny_tokenizer, [view]), tiny_tokenizer, cfg)
    assert traj.exit_status == "context_limit" and traj.truncated
    assert len(traj.token_ids) <= budget
    assert any("running out of tokens" in m["content"] for m in traj.messages if m["role"] == "user")
    agent_check(traj, tiny_tokenizer)


async def test_prompt_alone_over_context_limit(agent_repo, agent_sandbox, agent_cfg_for, tiny_tokenizer):
    _, task = agent_repo
    cfg = agent_cfg_for(agent_sandbox, max_context_tokens=50)
    traj = await run_episode(task, agent_sandbox, ReplayPolicy(tiny_tokenizer, ["x"]), tiny_tokenizer, cfg)
    assert traj.exit_status == "context_limit" and traj.metrics["steps"] == 0


class HangAfter:
    """Answers its first `n` calls at once, then never: a policy stuck past any wall-clock budget."""

    def __init__(self, inner, n: int):
        self.inner, self.n, self.calls = inner, n, 0

    async def generate(self, prompt_ids: list[int], sampling: SamplingParams) -> Completion:
        self.calls += 1
        if self.calls > self.n:
            await asyncio.Event().wait()
        return await self.inner.generate(prompt_ids, sampling)


async def test_wall_clock_timeout(agent_repo, agent_sandbox, agent_cfg_for, tiny_tokenizer, agent_check):
    _, task = agent_repo
    bash = format_action("execute_bash", {"command": "true"}, "xml")
    submit = format_action("submit", {}, "xml")
    # The budget comes from this host's speed now (issue 27: a fixed 1 s with a 0.4 s policy raced setup on a
    # loaded host): one bash step + submit, measured in this test, fits it three times over.
    probe = ReplayPolicy(tiny_tokenizer, [bash, submit])
    first = await run_episode(task, agent_sandbox, probe, tiny_tokenizer, agent_cfg_for(agent_sandbox))
    assert first.exit_status == "submitted", first.exit_status
    cfg = agent_cfg_for(agent_sandbox, max_wall_s=3 * first.metrics["wall_s"] + 0.5)
    policy = HangAfter(ReplayPolicy(tiny_tokenizer, [bash]), 1)
    traj = await run_episode(task, agent_sandbox, policy, tiny_tokenizer, cfg)
    assert traj.exit_status == "timeout" and traj.truncated
    assert traj.metrics["steps"] == 1 and policy.calls == 2  # step 1 ran; the stuck 2nd call was cut off
    agent_check(traj, tiny_tokenizer)


async def test_tool_slower_than_wall_clock_times_out(
    agent_repo, agent_sandbox, agent_cfg_for, tiny_tokenizer
):
    _, task = agent_repo
    cfg = agent_cfg_for(agent_sandbox, max_wall_s=2.0)
    bash = format_action("execute_bash", {"command": "sleep 30"}, "xml")
    traj = await run_episode(task, agent_sandbox, ReplayPolicy(tiny_tokenizer, [bash]), tiny_tokenizer, cfg)
    assert traj.exit_status == "timeout" and traj.metrics["wall_s"] < 20


async def test_tool_errors_are_observations(
    agent_repo, agent_sandbox, agent_cfg_for, tiny_tokenizer, agent_check
):
    _, task = agent_repo
    cfg = agent_cfg_for(agent_sandbox, max_steps=6)
    replies = [
        format_action(
            "file_editor",
            {"command": "str_replace", "path": cfg.repo_dir + "/calc.py", "old_str": "nope", "new_str": "x"},
            "xml",
        ),
        format_action("no_such_tool", {"x": "1"}, "xml"),
        format_action("execute_bash", {"command": "git reset --hard"}, "xml"),
        format_action("file_editor", {"path": cfg.repo_dir}, "xml"),  # missing `command`
        format_action("execute_bash", {"command": "exit 3"}, "xml") + "\n<function=submit></function>",
        format_action("submit", {}, "xml"),
    ]
    traj = await run_episode(task, agent_sandbox, ReplayPolicy(tiny_tokenizer, replies), tiny_tokenizer, cfg)
    assert traj.exit_status == "submitted"
    obs = [m["content"] for m in traj.messages if m["role"] == "user"][1:]
    assert "did not appear verbatim" in obs[0]
    assert "Unknown function 'no_such_tool'" in obs[1]
    assert "not allowed" in obs[2]
    assert "Missing required parameter(s) ['command']" in obs[3]
    assert "[exit code: 3]" in obs[4] and "only the first function call" in obs[4]
    assert traj.metrics["multi_calls"] == 1 and traj.metrics["format_errors"] == 0
    agent_check(traj, tiny_tokenizer)


async def test_length_cut_turn_is_closed_by_loop(
    agent_repo, agent_sandbox, agent_cfg_for, tiny_tokenizer, agent_check
):
    _, task = agent_repo
    cfg = agent_cfg_for(agent_sandbox, max_new_tokens=5, max_format_errors=2)
    long = format_action("execute_bash", {"command": "echo " + "x" * 200}, "xml")
    traj = await run_episode(task, agent_sandbox, ReplayPolicy(tiny_tokenizer, [long]), tiny_tokenizer, cfg)
    assert traj.exit_status == "format_errors"
    turns = [m for m in traj.messages if m["role"] == "assistant"]
    assert all(t["closed_by_loop"] and t["finish_reason"] == "length" for t in turns)
    assert "Truncated" in turns[0]["parse_error"] or "No function call" in turns[0]["parse_error"]
    agent_check(traj, tiny_tokenizer)


async def test_binary_and_new_files_in_patch(agent_repo, agent_sandbox, agent_cfg_for, tiny_tokenizer):
    repo, task = agent_repo
    cfg = agent_cfg_for(agent_sandbox, max_steps=5)
    cmd = (
        "printf '\\x00\\x01\\xff' > blob.bin && echo new > notes.txt && rm test_calc.py && python3 -c 'import calc'"
        " && seq 1 20000 > big.txt"  # > 48 KB of diff: read back from the file instead of inline
    )
    replies = [format_action("execute_bash", {"command": cmd}, "xml"), format_action("submit", {}, "xml")]
    traj = await run_episode(task, agent_sandbox, ReplayPolicy(tiny_tokenizer, replies), tiny_tokenizer, cfg)
    assert (
        "GIT binary patch" in traj.patch and "notes.txt" in traj.patch and "deleted file mode" in traj.patch
    )
    assert "__pycache__" not in traj.patch
    clean = repo.parent / "clean"
    subprocess.run(["git", "clone", "-q", str(repo), str(clean)], check=True)
    subprocess.run(["git", "apply", "--binary", "-"], input=traj.patch.encode(), cwd=clean, check=True)
    assert (clean / "blob.bin").read_bytes() == b"\x00\x01\xff" and not (clean / "test_calc.py").exists()
    assert (clean / "big.txt").read_text().splitlines()[-1] == "20000"


def test_inline_patch_transport():
    import base64

    from swe_rl.agent.patch import INLINE_MARK, _inline

    data = b"diff --git a/x b/x\n+\xc3\xa9\n"
    out = f"noise\n{INLINE_MARK} {len(data)}\n{base64.b64encode(data).decode()}"
    assert _inline(out) == data
    assert _inline(out[:-8]) is None  # clipped output -> read the file instead
    assert _inline("no marker") is None


async def test_infrastructure_error_escapes_with_partial_trajectory(
    agent_repo, agent_sandbox, agent_cfg_for, tiny_tokenizer
):
    from sandboxes.base import SandboxError

    _, task = agent_repo
    cfg = agent_cfg_for(agent_sandbox)
    view = format_action("file_editor", {"command": "view", "path": cfg.repo_dir}, "xml")

    class ClosingPolicy(ReplayPolicy):
        async def generate(self, prompt_ids, sampling):
            if self.calls == 1:
                await agent_sandbox.close()  # the sandbox dies between turns
            return await super().generate(prompt_ids, sampling)

    with pytest.raises(SandboxError) as info:
        await run_episode(task, agent_sandbox, ClosingPolicy(tiny_tokenizer, [view]), tiny_tokenizer, cfg)
    partial = info.value.trajectory
    assert partial.exit_status == "error" and partial.truncated and not partial.terminated
    assert partial.error and partial.metrics["steps"] == 2 and partial.reward is None


async def test_concurrent_episodes_share_one_batching_policy(
    agent_repo, agent_cfg_for, tiny_tokenizer, agent_check, tmp_path
):
    """The rollout pattern: many episodes, one HFLocalPolicy; their turns are generated in shared batches."""
    from sandboxes.config import LocalSandboxConfig
    from sandboxes.local import LocalSandbox
    from swe_rl.policy.tiny import build_tiny_model

    repo, task = agent_repo
    (tmp_path / "s.md").write_text("Fix it.")
    (tmp_path / "t.md").write_text("{problem_statement}")
    policy = HFLocalPolicy(
        build_tiny_model(tiny_tokenizer, seed=3), tiny_tokenizer, max_batch=8, batch_wait_s=0.05
    )
    boxes = [LocalSandbox(LocalSandboxConfig(), copy_from=repo) for _ in range(4)]
    try:
        for sb in boxes:
            await sb.start()
        cfgs = [
            agent_cfg_for(sb, system_prompt_file=str(tmp_path / "s.md"), task_prompt_file=str(tmp_path / "t.md"),
                          max_new_tokens=8, max_format_errors=2, seed=0)
            for sb in boxes
        ]  # fmt: skip
        trajs = await asyncio.gather(
            *(
                run_episode(task, sb, policy, tiny_tokenizer, cfg, sample_idx=i)
                for i, (sb, cfg) in enumerate(zip(boxes, cfgs, strict=True))
            )
        )
    finally:
        for sb in boxes:
            await sb.close()
        await policy.close()
    for i, traj in enumerate(trajs):
        assert traj.sample_idx == i
        agent_check(traj, tiny_tokenizer)
    turns = sum(t.metrics["steps"] for t in trajs)
    assert policy.stats["requests"] == turns and policy.stats["batches"] < turns
    assert len({tuple(t.token_ids) for t in trajs}) == 4  # per-sample seeds: different samples


async def test_same_size_edit_right_after_commit_is_in_the_patch(
    agent_repo, agent_sandbox, agent_cfg_for, tiny_tokenizer
):
    """Racy git: commit and a same-size edit in the same second, the patch taken a second later (git compares
    whole-second mtimes here): the temp index must keep the real index's mtime so git re-reads the file."""
    _, task = agent_repo
    cfg = agent_cfg_for(agent_sandbox, max_steps=4)
    task = task.model_copy(update={"base_commit": ""})  # base = HEAD at episode start
    to_next_second = "python3 -c 'import time; time.sleep(1.02 - time.time() % 1)'"
    setup = f"{to_next_second} && printf 'v = 1\\n' > r.py && git add r.py && git -c user.name=a -c user.email=a@b commit -qm r"
    assert (await agent_sandbox.exec(setup, cwd=cfg.repo_dir)).exit_code == 0
    edit = {"command": "str_replace", "path": f"{cfg.repo_dir}/r.py", "old_str": "v = 1", "new_str": "v = 9"}
    replies = [
        format_action("file_editor", edit, "xml"),
        format_action("execute_bash", {"command": "sleep 1.1"}, "xml"),
        format_action("submit", {}, "xml"),
    ]
    traj = await run_episode(task, agent_sandbox, ReplayPolicy(tiny_tokenizer, replies), tiny_tokenizer, cfg)
    assert "-v = 1\n+v = 9" in traj.patch, traj.patch


async def test_the_patch_leaves_out_the_images_setup_commit(
    agent_repo, agent_sandbox, agent_cfg_for, tiny_tokenizer
):
    """A SWE-bench image's HEAD is a setup commit on top of task.base_commit (sphinx's pre_install edits tox.ini):
    the grader applies the patch onto that image, so the patch holds the agent's edits only (found by the scripted
    gold policy on three real sphinx instances: the patch repeated the tox.ini edit and did not apply)."""
    _, task = agent_repo
    cfg = agent_cfg_for(agent_sandbox, max_steps=3)
    setup = "sed -i 's/a \\* b/b * a/' calc.py && git -c user.name=s -c user.email=s@s commit -qam setup"
    assert (await agent_sandbox.exec(setup, cwd=cfg.repo_dir)).exit_code == 0
    edit = {
        "command": "str_replace",
        "path": f"{cfg.repo_dir}/calc.py",
        "old_str": "a - b",
        "new_str": "a + b",
    }
    replies = [format_action("file_editor", edit, "xml"), format_action("submit", {}, "xml")]
    traj = await run_episode(task, agent_sandbox, ReplayPolicy(tiny_tokenizer, replies), tiny_tokenizer, cfg)
    assert "-    return a - b\n+    return a + b" in traj.patch, traj.patch
    assert "b * a" not in traj.patch and "a * b" not in traj.patch, traj.patch


def test_turn_seeds_differ_across_tasks_samples_and_turns_and_repeat():
    """Sample i of two tasks must not share one stream (they did with seed + 1000 * sample_idx + step)."""
    from swe_rl.agent.loop import turn_seed

    seeds = {
        (t, i, s): turn_seed(7, t, i, s) for t in ("a__a-1", "b__b-2") for i in range(3) for s in range(4)
    }
    assert len(set(seeds.values())) == len(seeds)
    assert all(0 <= v < 2**31 for v in seeds.values())
    assert (
        turn_seed(7, "a__a-1", 1, 2) == seeds[("a__a-1", 1, 2)]
        and turn_seed(8, "a__a-1", 1, 2) != seeds[("a__a-1", 1, 2)]
    )
