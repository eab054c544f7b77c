"""Backend-independent half of a sandbox: drives the persistent shell (sandboxes/shell.py) over a transport.

A backend supplies four things: open a shell transport, kill a shell's session, check the sandbox is alive, and
the file operations. This class adds the command lock, the two-level timeout (inside `timeout -k`, then the
client deadline: kill the session, restart the shell, timed_out=True), death detection and `async with`.
"""

from __future__ import annotations

import abc
import asyncio
import time
from typing import Protocol, TypeVar

from sandboxes.base import ExecResult, SandboxDiedError, SandboxError, SandboxStartError
from sandboxes.shell import MarkerScanner, OutputCap, command_script, init_script, new_nonce

_S = TypeVar("_S", bound="ShellSandbox")


class ShellTransport(Protocol):
    """A byte stream to a bash's stdin and from its merged stdout/stderr."""

    async def read(self) -> bytes: ...  # next chunk of output; b"" at end of stream

    async def write(self, data: bytes) -> None: ...

    def close(self) -> None: ...


class ShellSandbox(abc.ABC):
    """Persistent-shell sandbox logic shared by the Docker and local backends."""

    id: str

    def __init__(
        self,
        *,
        exec_timeout: float,
        kill_grace: float,
        client_grace: float,
        output_limit: int,
        startup_timeout: float,
        state_dir: str,
        workdir: str | None,
    ) -> None:
        self.exec_timeout = exec_timeout  # default per-command timeout (s)
        self.kill_grace = kill_grace  # SIGTERM -> SIGKILL delay of the inside timeout (s)
        self.client_grace = client_grace  # extra wait before the client kills from outside (s)
        self.output_limit = output_limit  # bytes kept per command
        self.kill_background = True  # backends set this from their config
        self.startup_timeout = startup_timeout  # shell (re)start deadline (s)
        self._state_dir = state_dir  # where the shell commits cwd/env between commands
        self._workdir = workdir  # first cwd of the shell
        self._transport: ShellTransport | None = None
        self._shell_pid: int | None = None  # pid (= session id) of the current parent shell
        self._dirty = False  # a command was interrupted (cancelled); its shell must be replaced
        self._lock = asyncio.Lock()
        self._closed = False
        self._started = False

    # --- backend hooks -------------------------------------------------------------------------------------
    @abc.abstractmethod
    async def _open_transport(self) -> ShellTransport: ...

    @abc.abstractmethod
    async def _kill_session(self, sid: int, *, runaway: bool) -> None:
        """Kill every process in session `sid` (the shell, its commands, their background children).

        runaway: a command is still running (deadline, cancel); the backend may use heavier means."""

    @abc.abstractmethod
    async def _check_alive(self) -> None:
        """Raise SandboxDiedError when the sandbox itself is gone."""

    # --- shell ----------------------------------------------------------------------------------------------
    async def _start_shell(self) -> None:
        transport = await self._open_transport()
        nonce = new_nonce()
        scanner = MarkerScanner(nonce, OutputCap(4096))
        try:
            await transport.write(init_script(self._state_dir, self._workdir, nonce))
            seen = await asyncio.wait_for(self._read_until(transport, scanner), self.startup_timeout)
        except (asyncio.TimeoutError, OSError) as e:
            transport.close()
            raise SandboxStartError("shell did not become ready", sandbox_id=self.id, cause=e) from e
        text = scanner.cap.text()
        if not seen or not text.startswith("pid="):
            transport.close()
            raise SandboxStartError(f"shell did not start (said {text[-500:]!r})", sandbox_id=self.id)
        self._transport, self._shell_pid, self._dirty = transport, int(text[4:]), False

    @staticmethod
    async def _read_until(transport: ShellTransport, scanner: MarkerScanner) -> bool:
        while True:
            data = await transport.read()
            if not data:
                return False
            if scanner.feed(data):
                return True

    async def _replace_shell(self, *, runaway: bool = True) -> None:
        """Kill the current shell's whole session (shell, command, background children) and start a new shell."""
        old, sid = self._transport, self._shell_pid
        self._transport = self._shell_pid = None
        if old is not None:
            old.close()
        if sid is not None:
            await self._kill_session(sid, runaway=runaway)
        await self._start_shell()

    # --- public API -----------------------------------------------------------------------------------------
    async def exec(
        self,
        cmd: str,
        *,
        timeout: float | None = None,
        cwd: str | None = None,
        env: dict[str, str] | None = None,
    ) -> ExecResult:
        """Run `cmd` in the persistent shell. cwd/env apply to this command only; `cd`/`export` inside persist."""
        if self._closed or not self._started:
            raise SandboxError("sandbox is not running (start it or use `async with`)", sandbox_id=self.id)
        timeout = self._check_timeout(timeout)
        nonce = new_nonce()
        script = command_script(
            cmd,
            state_dir=self._state_dir,
            nonce=nonce,
            timeout=timeout,
            kill_grace=self.kill_grace,
            cwd=cwd,
            env=env,
            kill_background=self.kill_background,
        )
        async with self._lock:
            if self._transport is None or self._dirty:
                await self._replace_shell()
            assert self._transport is not None
            scanner = MarkerScanner(nonce, OutputCap(self.output_limit))
            t0 = time.monotonic()
            try:
                await self._transport.write(script)
                seen = await asyncio.wait_for(
                    self._read_until(self._transport, scanner), timeout + self.kill_grace + self.client_grace
                )
            except asyncio.TimeoutError:
                scanner.flush()
                await self._replace_shell()
                note = f"\n[sandbox: command killed by the client after {timeout:g}s; shell restarted]"
                return ExecResult(
                    -1, scanner.cap.text() + note, True, time.monotonic() - t0, scanner.cap.total
                )
            except (OSError, ConnectionError):
                seen = False
            except BaseException:  # cancelled mid-command: the shell is still busy, replace it next time
                self._dirty = True
                raise
            duration = time.monotonic() - t0
            if not seen:
                scanner.flush()
                await self._check_alive()  # raises SandboxDiedError when the whole sandbox is gone
                try:
                    await self._replace_shell(runaway=False)
                except SandboxError as e:  # e.g. the container was dying while it still looked alive
                    await self._check_alive()
                    raise SandboxDiedError(
                        "the sandbox shell died and could not be restarted", sandbox_id=self.id, cause=e
                    ) from e
                note = "\n[sandbox: the shell exited unexpectedly; restarted]"
                return ExecResult(-1, scanner.cap.text() + note, False, duration, scanner.cap.total)
            code = scanner.exit_code if scanner.exit_code is not None else -1
            timed_out = code in (124, 137) and duration >= timeout
            return ExecResult(code, scanner.cap.text(), timed_out, duration, scanner.cap.total)

    def _check_timeout(self, timeout: float | None) -> float:
        timeout = self.exec_timeout if timeout is None else float(timeout)
        if timeout <= 0:
            raise ValueError(f"timeout: expected a positive number of seconds, got {timeout}")
        return timeout

    async def __aenter__(self: _S) -> _S:
        await self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    @abc.abstractmethod
    async def start(self) -> None: ...

    @abc.abstractmethod
    async def close(self) -> None: ...
