"""SyncSandbox: a blocking facade over any async Sandbox, for sync callers (scripts, mini-swe-agent).

It runs a private event loop in a daemon thread and submits each call to it, so it also works when the calling
thread already runs a loop of its own (that loop is blocked meanwhile, as with any blocking call).
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Coroutine
from typing import Any, TypeVar

from sandboxes.base import ExecResult, Sandbox, SandboxError

T = TypeVar("T")


class SyncSandbox:
    """`with SyncSandbox(make_sandbox(cfg, image=...)) as sb: sb.exec("ls")`."""

    def __init__(self, sandbox: Sandbox) -> None:
        self.sandbox = sandbox
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, name="sandbox-loop", daemon=True)
        self._thread.start()

    @property
    def id(self) -> str:
        return self.sandbox.id

    def _run(self, coro: Coroutine[Any, Any, T]) -> T:
        if self._loop.is_closed():
            coro.close()
            raise SandboxError("sandbox is closed", sandbox_id=self.sandbox.id)
        return asyncio.run_coroutine_threadsafe(coro, self._loop).result()

    def start(self) -> None:
        self._run(self.sandbox.start())

    def exec(
        self,
        cmd: str,
        *,
        timeout: float | None = None,
        cwd: str | None = None,
        env: dict[str, str] | None = None,
    ) -> ExecResult:
        return self._run(self.sandbox.exec(cmd, timeout=timeout, cwd=cwd, env=env))

    def exec_once(
        self,
        cmd: str,
        *,
        timeout: float | None = None,
        cwd: str | None = None,
        env: dict[str, str] | None = None,
        output_limit: int | None = None,
    ) -> ExecResult:
        """One-shot mode of backends that have it (Docker, local, ray): a fresh process, no shell state."""
        once = self.sandbox.exec_once  # type: ignore[attr-defined]
        return self._run(once(cmd, timeout=timeout, cwd=cwd, env=env, output_limit=output_limit))

    def read_file(self, path: str) -> bytes:
        return self._run(self.sandbox.read_file(path))

    def write_file(self, path: str, data: bytes | str, *, mode: int = 0o644) -> None:
        self._run(self.sandbox.write_file(path, data, mode=mode))

    def upload(self, src: str, dst: str) -> None:
        self._run(self.sandbox.upload(src, dst))

    def download(self, src: str, dst: str) -> None:
        self._run(self.sandbox.download(src, dst))

    def close(self) -> None:
        """Close the sandbox and stop the private loop (idempotent)."""
        if self._loop.is_closed():
            return
        try:
            self._run(self.sandbox.close())
        finally:
            self._loop.call_soon_threadsafe(self._loop.stop)
            self._thread.join(timeout=10)
            self._loop.close()

    def __enter__(self) -> SyncSandbox:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
