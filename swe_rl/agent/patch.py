"""The episode's result: `git diff --binary` of the sandbox repo (tracked + untracked files) against the base commit.

A throwaway index (a copy of the repo's) collects the working tree with `git add -A`, so the repo's own index and
history stay untouched and commits made by the agent are still diffed against the base commit. The patch is written
to a file; small ones come back base64-encoded in the same exec, big ones are read back as bytes, so a patch is never
clipped by exec's output cap.

The sandbox belongs to the agent, so nothing of its git setup may steer the diff: git runs under `env -i` (no
exported GIT_DIR / GIT_INDEX_FILE / GIT_CONFIG_* / GIT_EXTERNAL_DIFF of the agent's shell), without system or
global config, and every repository setting that changes the format is overridden on the command line (prefixes,
quoting, renames, external diff and textconv drivers, relative mode, colour, line endings). Bytecode (`*.pyc`,
`*.pyo`, `__pycache__/`) is never part of a patch: the grader removes any that a patch carries.
"""

from __future__ import annotations

import base64
import binascii
import shlex
import uuid
from typing import Any

from sandboxes.base import SandboxError

INLINE_MAX = 48_000  # bytes; base64 of it stays well under exec output caps (100 KB by default)
INLINE_MARK = "SWE_RL_PATCH_INLINE"
BYTECODE_EXCLUDES = ("*.pyc", "*.pyo", "__pycache__")
# git in a clean environment: nothing the agent exported or configured globally reaches it
_GIT_ENV = (
    "env -i PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin HOME=/nonexistent LC_ALL=C "
)
_GIT_ENV += "GIT_CONFIG_NOSYSTEM=1 GIT_CONFIG_GLOBAL=/dev/null"
_GIT_CFG = " ".join(f"-c {kv}" for kv in (
    "core.fsmonitor=false", "core.hooksPath=/dev/null", "core.quotepath=off", "core.autocrlf=false",
    "core.safecrlf=false", "core.attributesFile=/dev/null", "core.excludesFile=/dev/null", "diff.noprefix=false",
    "diff.mnemonicPrefix=false", "diff.relative=false", "diff.external=", "diff.renames=false",
    "diff.suppressBlankEmpty=false", "diff.context=3", "diff.interHunkContext=0", "diff.orderFile=/dev/null",
    "diff.srcPrefix=a/", "diff.dstPrefix=b/", "color.ui=false",
))  # fmt: skip
_DIFF_FLAGS = (
    "--cached --binary --no-color --no-ext-diff --no-textconv --no-renames "
    "--src-prefix=a/ --dst-prefix=b/ -U3"
)


def patch_command(
    repo_dir: str, base_commit: str, exclude: list[str], index_file: str, patch_file: str
) -> str:
    q = shlex.quote
    specs = " ".join(q(f":(exclude,glob)**/{p}") for p in [*exclude, *BYTECODE_EXCLUDES])
    git = f"{_GIT_ENV} GIT_INDEX_FILE={index_file} git {_GIT_CFG}"
    return (
        f"(cd {q(repo_dir)} && rm -f {index_file} && "
        f'(cp -p "$({_GIT_ENV} git {_GIT_CFG} rev-parse --git-path index)" {index_file} 2>/dev/null || true) && '
        f"{git} add -A -- . {specs} && "
        f"{git} diff {_DIFF_FLAGS} {q(base_commit)} -- "
        f"> {patch_file}; rc=$?; rm -f {index_file}; [ $rc -eq 0 ])"  # subshell: the persistent shell keeps its cwd
    )


async def base_commit_of(sandbox: Any, repo_dir: str, timeout: float) -> str:
    res = await sandbox.exec(
        f"{_GIT_ENV} git {_GIT_CFG} -C {shlex.quote(repo_dir)} rev-parse HEAD", timeout=timeout
    )
    if res.exit_code != 0:
        raise SandboxError(f"cannot read HEAD of {repo_dir}: {res.output.strip()[:300]}")
    return res.output.strip().splitlines()[-1]


def _inline(output: str) -> bytes | None:
    """The patch bytes when the exec output carried them whole (size line + base64), else None."""
    _, sep, rest = output.partition(INLINE_MARK)
    if not sep:
        return None
    size_text, _, b64 = rest.strip().partition("\n")
    try:
        data = base64.b64decode(b64.strip(), validate=True)
    except (ValueError, binascii.Error):
        return None
    return data if size_text.strip().isdigit() and len(data) == int(size_text) else None


async def get_patch(sandbox: Any, repo_dir: str, base_commit: str, exclude: list[str], timeout: float) -> str:
    """The diff as text (bytes that are not UTF-8 become U+FFFD; binary files are base85 via --binary).

    Small patches come back base64-encoded in the same exec's output (one round trip); larger ones, or output
    that was clipped, are read back from the file."""
    # per-call file names: sandboxes that share /tmp (LocalSandbox) may extract patches concurrently
    tag = uuid.uuid4().hex[:12]
    f, index = f"/tmp/.swe_rl_patch_{tag}.diff", f"/tmp/.swe_rl_index_{tag}"
    inline = f'{{ S=$(wc -c < {f}); if [ "$S" -le {INLINE_MAX} ]; then echo "{INLINE_MARK} $S"; base64 -w0 {f}; fi; true; }}'
    cmd = patch_command(repo_dir, base_commit, exclude, index, f) + " && " + inline
    res = await sandbox.exec(cmd, timeout=timeout)
    if res.exit_code != 0:
        raise SandboxError(
            f"git diff in {repo_dir} failed (exit {res.exit_code}): {res.output.strip()[:500]}"
        )
    data = _inline(res.output)
    if data is None:
        data = await sandbox.read_file(f)
    return data.decode("utf-8", errors="replace")
