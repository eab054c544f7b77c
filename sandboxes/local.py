"""LocalSandbox: a persistent bash on THIS host, in a temporary copy of a directory.

It ISOLATES NOTHING: commands run as the calling user with full access to the host's files, network, processes
and resources. Use it to debug agents and on hosts without Docker, never for untrusted code. It offers the same
persistent shell, timeouts, output cap and file API as DockerSandbox. Relative file paths resolve against the
sandbox directory (`sb.root`); absolute paths are host paths.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import shutil
import signal
import tempfile
import time
import weakref
from pathlib import Path

from sandboxes.base import ExecResult, SandboxDiedError, SandboxError
from sandboxes.config import LocalSandboxConfig
from sandboxes.shell import ONE_SHOT_DRAIN_S, OutputCap, check_env, check_output_limit, one_shot_argv
from sandboxes.shellbox import ShellSandbox


def kill_session(sid: int) -> None:
    """SIGKILL every process whose session id is `sid` (the shell, its commands and their background children)."""
    for _ in range(3):  # repeat: a process may fork while we iterate
        for entry in os.listdir("/proc") if os.path.isdir("/proc") else []:
            if not entry.isdigit():
                continue
            try:
                with open(f"/proc/{entry}/stat", "rb") as f:
                    fields = f.read().rsplit(b")", 1)[1].split()
                if int(fields[3]) == sid:
                    os.kill(int(entry), signal.SIGKILL)
            except (OSError, IndexError, ValueError):
                continue
    with contextlib.suppress(OSError):
        os.killpg(sid, signal.SIGKILL)


class _Sink(asyncio.Protocol):
    """Feeds a one-shot command's output pipe to its OutputCap; `eof` is done when every writer closed it."""

    def __init__(self, cap: OutputCap, loop: asyncio.AbstractEventLoop) -> None:
        self.cap = cap
        self.eof: asyncio.Future[None] = loop.create_future()

    def data_received(self, data: bytes) -> None:
        self.cap.add(data)

    def connection_lost(self, exc: Exception | None) -> None:
        if not self.eof.done():
            self.eof.set_result(None)


class _PipeTransport:
    def __init__(self, proc: asyncio.subprocess.Process) -> None:
        self.proc = proc

    async def read(self) -> bytes:
        assert self.proc.stdout is not None
        return await self.proc.stdout.read(1 << 20)

    async def write(self, data: bytes) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write(data)
        await self.proc.stdin.drain()

    def close(self) -> None:
        if self.proc.stdin is not None:
            self.proc.stdin.close()


class LocalSandbox(ShellSandbox):
    """A bash process in a temporary directory on this host. Isolates nothing (see the module docstring)."""

    own_pid_namespace = False  # /proc is the host's: never kill "everything else" from here

    def __init__(
        self, config: LocalSandboxConfig | None = None, *, copy_from: str | Path | None = None
    ) -> None:
        self.config = config or LocalSandboxConfig()
        self._tmp = tempfile.mkdtemp(prefix="sandbox-local-")
        if (
            not self.config.keep_dir
        ):  # removed at close, or at garbage collection / interpreter exit if never closed
            self._finalizer = weakref.finalize(self, shutil.rmtree, self._tmp, True)
        self.root = os.path.join(self._tmp, "work")  # the sandbox's working directory (a copy of copy_from)
        super().__init__(
            exec_timeout=self.config.exec_timeout,
            kill_grace=self.config.kill_grace,
            client_grace=self.config.client_grace,
            output_limit=self.config.output_limit,
            startup_timeout=self.config.startup_timeout,
            state_dir=os.path.join(self._tmp, "state"),
            workdir=self.root,
        )
        self.kill_background = self.config.kill_background
        self.id = f"local-{os.path.basename(self._tmp)}"
        self._copy_from = copy_from
        self._procs: list[asyncio.subprocess.Process] = []

    async def start(self) -> None:
        if self._started:
            return
        if self._closed:
            raise SandboxError("sandbox was closed; make a new one", sandbox_id=self.id)
        if self._copy_from is not None:
            if not os.path.isdir(self._copy_from):
                raise FileNotFoundError(f"copy_from: {self._copy_from!r} is not a directory")
            await asyncio.to_thread(shutil.copytree, self._copy_from, self.root, symlinks=True)
        else:
            os.makedirs(self.root)
        self._started = True
        try:
            await self._start_shell()
        except BaseException:
            await self.close()
            raise

    async def close(self) -> None:
        self._closed = True
        if self._transport is not None:
            self._transport.close()
            self._transport = None
        if self._shell_pid is not None:
            kill_session(self._shell_pid)
            self._shell_pid = None
        for proc in self._procs:
            with contextlib.suppress(Exception):
                await asyncio.wait_for(proc.wait(), 5)
        self._procs.clear()
        if not self.config.keep_dir:
            await asyncio.to_thread(self._finalizer)

    async def _open_transport(self) -> _PipeTransport:
        env = {**os.environ, **self.config.env}
        proc = await asyncio.create_subprocess_exec(
            "bash",
            "--noprofile",
            "--norc",
            cwd=self.root,
            env=env,
            start_new_session=True,
            stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.STDOUT,
            limit=1 << 22,
        )
        self._procs = [p for p in self._procs if p.returncode is None] + [proc]
        return _PipeTransport(proc)

    async def exec_once(
        self,
        cmd: str,
        *,
        timeout: float | None = None,
        cwd: str | None = None,
        env: dict[str, str] | None = None,
        output_limit: int | None = None,
    ) -> ExecResult:
        """One-shot mode: a fresh bash in the sandbox directory (no shell state), same timeouts; `output_limit`:
        bytes kept of this command's output (default: the sandbox's cap). As with Docker, what it writes is read
        until it exits and then for at most ONE_SHOT_DRAIN_S more: a process it left that holds the pipe open
        (`cmd &`, setsid or not) does not hold the command."""
        if self._closed or not self._started:
            raise SandboxError("sandbox is not running", sandbox_id=self.id)
        timeout = self._check_timeout(timeout)
        cap, t0 = OutputCap(check_output_limit(output_limit, self.output_limit)), time.monotonic()
        loop = asyncio.get_running_loop()
        # our own pipe, not asyncio's: on Python 3.11, Process.wait() also waits for its pipes to close
        r, w = os.pipe()
        try:
            proc = await asyncio.create_subprocess_exec(
                *one_shot_argv(cmd, timeout, self.kill_grace),
                cwd=self._path(cwd or "."),
                env={**os.environ, **self.config.env, **check_env(env)},
                start_new_session=True,
                stdin=asyncio.subprocess.DEVNULL,
                stdout=w,
                stderr=w,
            )
        except BaseException:
            os.close(r)
            raise
        finally:
            os.close(w)
        reader, sink = await loop.connect_read_pipe(lambda: _Sink(cap, loop), os.fdopen(r, "rb", buffering=0))
        killed = False
        try:
            try:
                code = await asyncio.wait_for(proc.wait(), timeout + self.kill_grace + self.client_grace)
            except asyncio.TimeoutError:
                kill_session(proc.pid)
                await proc.wait()
                code, killed = -1, True
            with contextlib.suppress(asyncio.TimeoutError):
                await asyncio.wait_for(asyncio.shield(sink.eof), ONE_SHOT_DRAIN_S)
        finally:
            reader.close()
        duration = time.monotonic() - t0
        if killed:
            return ExecResult(-1, cap.text() + "\n[sandbox: killed by the client]", True, duration, cap.total)
        return ExecResult(code, cap.text(), code in (124, 137) and duration >= timeout, duration, cap.total)

    async def _kill_session(self, sid: int, *, runaway: bool) -> None:
        kill_session(sid)

    async def _check_alive(self) -> None:
        if not os.path.isdir(self.root):
            raise SandboxDiedError("sandbox directory vanished", sandbox_id=self.id)

    def _path(self, path: str) -> str:
        return path if os.path.isabs(path) else os.path.join(self.root, path)

    async def read_file(self, path: str) -> bytes:
        return await asyncio.to_thread(Path(self._path(path)).read_bytes)

    async def write_file(self, path: str, data: bytes | str, *, mode: int = 0o644) -> None:
        def write() -> None:
            p = Path(self._path(path))
            p.parent.mkdir(parents=True, exist_ok=True)
            p.write_bytes(data.encode(errors="surrogateescape") if isinstance(data, str) else bytes(data))
            p.chmod(mode)

        await asyncio.to_thread(write)

    async def upload(self, src: str, dst: str) -> None:
        await asyncio.to_thread(_copy, src, self._path(dst))

    async def download(self, src: str, dst: str) -> None:
        await asyncio.to_thread(_copy, self._path(src), dst)


def _copy(src: str, dst: str) -> None:
    if not os.path.exists(src):
        raise FileNotFoundError(f"{src!r} does not exist")
    if os.path.isdir(src):
        shutil.copytree(src, dst, symlinks=True, dirs_exist_ok=True)
    else:
        os.makedirs(os.path.dirname(os.path.abspath(dst)), exist_ok=True)
        shutil.copy2(src, dst)
