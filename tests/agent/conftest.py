"""Agent test helpers: a small buggy git repo as a Task, a LocalSandbox over it, a trajectory well-formedness check.

Fixture names start with `agent_` to avoid clashes with other test folders.
"""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from swe_rl.agent.config import AgentConfig
from swe_rl.agent.trajectory import Trajectory, mask_runs
from swe_rl.tasks.task import Task

BUGGY = "def add(a, b):\n    return a - b\n\n\ndef mul(a, b):\n    return a * b\n"
FIXED = BUGGY.replace("a - b", "a + b")
TESTS = "from calc import add\n\n\ndef test_add():\n    assert add(1, 2) == 3\n"


def _git(repo: Path, *args: str) -> str:
    env = {
        "GIT_AUTHOR_NAME": "t",
        "GIT_AUTHOR_EMAIL": "t@t",
        "GIT_COMMITTER_NAME": "t",
        "GIT_COMMITTER_EMAIL": "t@t",
    }
    res = subprocess.run(
        ["git", *args], cwd=repo, capture_output=True, text=True, env={**env, "PATH": "/usr/bin:/bin"}
    )
    assert res.returncode == 0, res.stderr
    return res.stdout


@pytest.fixture
def agent_repo(tmp_path) -> tuple[Path, Task]:
    """A git repo with a bug in calc.add and a failing test, and the Task (gold patch, base commit) for it."""
    repo = tmp_path / "repo"
    repo.mkdir()
    (repo / "calc.py").write_text(BUGGY)
    (repo / "test_calc.py").write_text(TESTS)
    _git(repo, "init", "-q")
    _git(repo, "add", "-A")
    _git(repo, "commit", "-qm", "base")
    (repo / "calc.py").write_text(FIXED)
    gold = _git(repo, "diff")
    _git(repo, "checkout", "-q", "calc.py")
    base = _git(repo, "rev-parse", "HEAD").strip()
    task = Task(
        instance_id="calc-add", base_commit=base, problem_statement="add(1, 2) returns -1, not 3.", patch=gold
    )
    return repo, task


@pytest.fixture
async def agent_sandbox(agent_repo):
    from sandboxes.config import LocalSandboxConfig
    from sandboxes.local import LocalSandbox

    repo, _ = agent_repo
    sb = LocalSandbox(LocalSandboxConfig(), copy_from=repo)
    await sb.start()
    yield sb
    await sb.close()


@pytest.fixture
def agent_cfg_for(tmp_path):
    """AgentConfig pointing at a LocalSandbox's copy of the repo, tools outside the repo."""

    def make(sb, **kw) -> AgentConfig:
        base = dict(
            repo_dir=sb.root, tools_dir=str(tmp_path / "tools"), max_context_tokens=60000, max_wall_s=120
        )
        return AgentConfig(**{**base, **kw})

    return make


def check_trajectory(traj: Trajectory, tokenizer) -> None:
    """Token stream and transcript agree: spans tile the tokens, mask runs == assistant turns, text round-trips."""
    n = len(traj.token_ids)
    assert len(traj.loss_mask) == n and len(traj.logprobs) == n
    if traj.entropy is not None:
        assert len(traj.entropy) == n
    assert traj.exit_status in ("submitted", "max_steps", "context_limit", "timeout", "format_errors")
    assert traj.terminated == (traj.exit_status in ("submitted", "format_errors"))
    assert traj.truncated == (traj.exit_status in ("max_steps", "context_limit", "timeout"))
    spans = [tuple(m["span"]) for m in traj.messages if "span" in m]
    assert spans[0] == (0, traj.prompt_len)
    # mask runs are exactly the (non-empty) assistant turns
    assistant = [
        tuple(m["span"]) for m in traj.messages if m["role"] == "assistant" and m["span"][1] > m["span"][0]
    ]
    assert mask_runs(traj.loss_mask) == assistant
    # every token is covered once: spans in order, gaps only for loop-closed turn ends (mask 0, one token each)
    pos = 0
    pieces = []
    for m in traj.messages:
        if "span" not in m:
            continue
        s, e = m["span"]
        if s != pos:
            assert s == pos + 1 and traj.loss_mask[pos] == 0
            pieces.append(tokenizer.decode(traj.token_ids[pos:s], skip_special_tokens=False))
        piece = tokenizer.decode(traj.token_ids[s:e], skip_special_tokens=False)
        if m["role"] == "assistant":
            assert piece.startswith(m["content"])  # content + its stop token
            assert all(traj.loss_mask[s:e])
        else:
            assert piece == m["text"]  # observations: exactly the template delta that was appended
            assert not any(traj.loss_mask[s:e])
        pieces.append(piece)
        pos = e
    if pos != n:  # a last assistant turn closed by the loop
        assert n == pos + 1 and traj.loss_mask[pos] == 0
        pieces.append(tokenizer.decode(traj.token_ids[pos:], skip_special_tokens=False))
    assert "".join(pieces) == tokenizer.decode(traj.token_ids, skip_special_tokens=False)


@pytest.fixture
def agent_check():
    return check_trajectory
