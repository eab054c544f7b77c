"""The episode's result: `git diff --binary` of the sandbox repo (tracked + untracked files) against the base commit.

A throwaway index (a copy of the repo's) collects the working tree with `git add -A`, so the repo's own index and
history stay untouched and commits made by the agent are still diffed against the base commit. The patch is written
to a file and read back as bytes, so it is never clipped by exec's output cap.
"""

from __future__ import annotations

import shlex
from typing import Any

from sandboxes.base import SandboxError

PATCH_FILE = "/tmp/.swe_rl_patch.diff"
INDEX_FILE = "/tmp/.swe_rl_index"


def patch_command(repo_dir: str, base_commit: str, exclude: list[str]) -> str:
    q = shlex.quote
    specs = " ".join(q(f":(exclude,glob)**/{p}") for p in exclude)
    return (
        f"cd {q(repo_dir)} && rm -f {INDEX_FILE} && "
        f'(cp "$(git rev-parse --git-path index)" {INDEX_FILE} 2>/dev/null || true) && '
        f"GIT_INDEX_FILE={INDEX_FILE} git add -A -- . {specs} && "
        f"GIT_INDEX_FILE={INDEX_FILE} git diff --cached --binary --no-color --no-ext-diff {q(base_commit)} "
        f"> {PATCH_FILE}"
    )


async def base_commit_of(sandbox: Any, repo_dir: str, timeout: float) -> str:
    res = await sandbox.exec(f"git -C {shlex.quote(repo_dir)} rev-parse HEAD", timeout=timeout)
    if res.exit_code != 0:
        raise SandboxError(f"cannot read HEAD of {repo_dir}: {res.output.strip()[:300]}")
    return res.output.strip().splitlines()[-1]


async def get_patch(sandbox: Any, repo_dir: str, base_commit: str, exclude: list[str], timeout: float) -> str:
    """The diff as text. Non-UTF-8 bytes in text hunks are kept via surrogateescape-free replacement (rare)."""
    res = await sandbox.exec(patch_command(repo_dir, base_commit, exclude), timeout=timeout)
    if res.exit_code != 0:
        raise SandboxError(
            f"git diff in {repo_dir} failed (exit {res.exit_code}): {res.output.strip()[:500]}"
        )
    data = await sandbox.read_file(PATCH_FILE)
    return data.decode("utf-8", errors="replace")
