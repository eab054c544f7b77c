"""The Sandbox protocol and its result/error types: the one seam every backend and every caller shares.

Importable with the standard library only: users reuse this package for other agents without swe_rl, torch or ray.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol, runtime_checkable


@dataclass(frozen=True)
class ExecResult:
    """Outcome of one command. A non-zero exit code is a result, not an error."""

    exit_code: int  # the command's exit status; -1 when it was killed by the client-side deadline
    output: str  # stdout and stderr interleaved, decoded with errors="replace", capped (head + marker + tail)
    timed_out: bool = False  # True when the command hit its timeout (inside or client-side)
    duration: float = 0.0  # seconds, wall clock as seen by the client
    output_total: int | None = None  # bytes the command wrote, before the cap (None: not counted)

    @property
    def ok(self) -> bool:
        return self.exit_code == 0 and not self.timed_out


class SandboxError(RuntimeError):
    """Infrastructure failure (not a failing command). Carries the container/sandbox id and the cause."""

    def __init__(self, message: str, *, sandbox_id: str | None = None, cause: BaseException | None = None):
        detail = message if sandbox_id is None else f"{message} [sandbox {sandbox_id[:12]}]"
        if cause is not None:
            detail = f"{detail}: {type(cause).__name__}: {cause}"
        super().__init__(detail)
        self.sandbox_id = sandbox_id
        self.cause = cause


class SandboxStartError(SandboxError):
    """The sandbox could not be created or did not become ready in time."""


class SandboxDiedError(SandboxError):
    """The sandbox disappeared or stopped answering mid-session (killed, OOM, engine restarted)."""


class SandboxTimeoutError(SandboxError):
    """The sandbox itself (not a command in it) exceeded its lifetime or an operation deadline."""


class EngineUnreachableError(SandboxError):
    """The container engine (Docker daemon, Ray cluster) could not be reached."""


@runtime_checkable
class Sandbox(Protocol):
    """Async sandbox: a shell with a working directory and files. `async with` starts and closes it."""

    id: str

    async def start(self) -> None: ...

    async def exec(
        self,
        cmd: str,
        *,
        timeout: float | None = None,
        cwd: str | None = None,
        env: dict[str, str] | None = None,
    ) -> ExecResult: ...

    async def read_file(self, path: str) -> bytes: ...

    async def write_file(self, path: str, data: bytes | str, *, mode: int = 0o644) -> None: ...

    async def upload(self, src: str, dst: str) -> None: ...

    async def download(self, src: str, dst: str) -> None: ...

    async def close(self) -> None: ...

    async def __aenter__(self) -> Sandbox: ...

    async def __aexit__(self, *exc: object) -> None: ...
