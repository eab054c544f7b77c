"""SWE-ReX `AbstractRuntime` over a `sandboxes` sandbox (PyPI `swe-rex` 1.x; imported here, never by `sandboxes`).

Sessions: every named bash session lives in the sandbox's one persistent shell. A session's command runs in a
subshell that first restores that session's cwd and exported variables from its state file and saves them
again, atomically, on exit (an EXIT trap, so `exit N` keeps them too); sessions therefore do not see each other's `cd` or
`export`, and nothing leaks into the shell itself. Not persisted, as in the sandbox shell: unexported variables,
functions, aliases, `set` options. The command is syntax-checked first with the sandbox's own `bash -n`
(BashIncorrectSyntaxError, as swe-rex's local runtime does). A command never outlives its call: a timeout kills
its process group and raises CommandTimeoutError (the session's state is then the last saved one, or what the
killed command had set when SIGTERM let its trap run), so an interrupt afterwards has nothing left to stop. No pty:
interactive actions (`is_interactive_command`, `expect`) are refused.

`execute` runs one fresh process (the backend's `exec_once`; no session state), like `subprocess.run`: a list is
an argv, `shell=True` a shell string, `env` replaces the environment. Timeouts of None mean the sandbox's
default `exec_timeout`, never unbounded. Infrastructure failures raise the sandbox's own SandboxError.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import secrets
import shlex
import threading
from collections.abc import Coroutine
from typing import Any, TypeVar

from swerex.exceptions import (
    BashIncorrectSyntaxError,
    CommandTimeoutError,
    NonZeroExitCodeError,
    SessionDoesNotExistError,
    SessionExistsError,
    SwerexException,
)
from swerex.runtime.abstract import (
    AbstractRuntime,
    Action,
    BashInterruptAction,
    BashObservation,
    CloseBashSessionResponse,
    CloseResponse,
    CloseSessionRequest,
    CloseSessionResponse,
    Command,
    CommandResponse,
    CreateBashSessionResponse,
    CreateSessionRequest,
    CreateSessionResponse,
    IsAliveResponse,
    Observation,
    ReadFileRequest,
    ReadFileResponse,
    UploadRequest,
    UploadResponse,
    WriteFileRequest,
    WriteFileResponse,
)

from sandboxes.base import ExecResult, Sandbox, SandboxError

T = TypeVar("T")
q = shlex.quote


class LoopThread:
    """A private event loop in a daemon thread. Sandboxes belong to the loop that started them, while SWE-ReX
    callers (SWE-agent, mini-swe-agent) often wrap each call in a fresh `asyncio.run`: every sandbox call is
    therefore submitted here and awaited from whatever loop the caller runs."""

    def __init__(self) -> None:
        self.loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self.loop.run_forever, name="swerex-sandbox-loop", daemon=True)
        self._thread.start()

    async def run(self, coro: Coroutine[Any, Any, T]) -> T:
        if self.loop.is_closed():
            coro.close()
            raise SandboxError("the sandbox loop is closed")
        return await asyncio.wrap_future(asyncio.run_coroutine_threadsafe(coro, self.loop))

    def close(self) -> None:
        if not self.loop.is_closed():
            self.loop.call_soon_threadsafe(self.loop.stop)
            self._thread.join(timeout=10)
            self.loop.close()


class SandboxRuntime(AbstractRuntime):
    """SWE-ReX runtime whose sessions, commands and files are those of one started `sandboxes` sandbox."""

    def __init__(
        self,
        sandbox: Sandbox,
        *,
        loop: LoopThread | None = None,
        owns: bool = False,
        state_dir: str = "/dev/shm",
        logger: logging.Logger | None = None,
    ) -> None:
        """sandbox: started. loop: where it was started (None = the caller's loop, which must then stay the
        same). owns: close() also closes the sandbox. state_dir: sandbox dir for the sessions' state files."""
        self.sandbox, self._loop, self._owns = sandbox, loop, owns
        self._prefix = f"{state_dir.rstrip('/')}/swerex-{secrets.token_hex(6)}"
        self._sessions: dict[str, str] = {}  # session name -> its state-file prefix
        self._count = 0
        self._closed = False
        self.logger = logger or logging.getLogger("sandboxes.swerex")

    async def _call(self, coro: Coroutine[Any, Any, T]) -> T:
        if self._closed:
            coro.close()
            raise SandboxError("the SWE-ReX runtime is closed", sandbox_id=self.sandbox.id)
        return await (self._loop.run(coro) if self._loop is not None else coro)

    # --- sessions -------------------------------------------------------------------------------------------
    async def create_session(self, request: CreateSessionRequest) -> CreateSessionResponse:
        if request.session in self._sessions:
            raise SessionExistsError(f"session {request.session} already exists")
        self._count += 1
        state = f"{self._prefix}-{self._count}"
        init = f"mkdir -p -- {q(state.rsplit('/', 1)[0])} && printf 'cd -- %q\\n' \"$PWD\" > {q(state)}"
        r = await self._call(self.sandbox.exec(init, timeout=30))
        if r.exit_code != 0:
            raise SandboxError(
                f"could not create session {request.session!r}: {r.output}", sandbox_id=self.sandbox.id
            )
        self._sessions[request.session] = state
        output = ""
        if request.startup_source:
            # swe-rex's startup_timeout is a prompt wait; a floor keeps a busy host from killing the sourcing
            source = " && ".join(f"source {q(p)}" for p in request.startup_source)
            r = await self._session_exec(state, source, max(request.startup_timeout, 10.0))
            output = r.output
        return CreateBashSessionResponse(output=output)

    async def run_in_session(self, action: Action) -> Observation:
        if action.session not in self._sessions:
            raise SessionDoesNotExistError(f"session {action.session!r} does not exist")
        if isinstance(action, BashInterruptAction):  # commands end with their call: nothing is left running
            return BashObservation(output="", exit_code=0)
        if action.is_interactive_command or action.is_interactive_quit or action.expect:
            raise SwerexException("interactive actions need a pty; the sandboxes runtime has none")
        marker = f"__SWEREX_SYNTAX_{secrets.token_hex(6)}__"
        r = await self._session_exec(self._sessions[action.session], action.command, action.timeout, marker)
        if r.exit_code == 2 and marker in r.output:  # (output of a setsid process may come first)
            detail = r.output.split(marker, 1)[1].strip()
            raise BashIncorrectSyntaxError(
                f"Error while checking bash command\n{action.command!r}\n---- Stderr ----\n{detail}",
                extra_info={"bash_stdout": "", "bash_stderr": detail},
            )
        if r.timed_out:
            raise CommandTimeoutError(
                f"timeout after {action.timeout} seconds while running command {action.command!r}"
            )
        if action.check == "ignore":
            return BashObservation(output=r.output, exit_code=None)
        if action.check == "raise" and r.exit_code != 0:
            msg = f"Command {action.command!r} failed with exit code {r.exit_code}. Here is the output:\n{r.output!r}"
            raise NonZeroExitCodeError(f"{action.error_msg}: {msg}" if action.error_msg else msg)
        return BashObservation(output=r.output, exit_code=r.exit_code)

    async def _session_exec(
        self, state: str, command: str, timeout: float | None, marker: str | None = None
    ) -> ExecResult:
        """`command` in a subshell carrying the session's cwd and exports in and out (see the module doc).

        The state is one file (a `cd` line, then `export -p`), written to a temporary name and renamed over the
        old one: a kill that lands mid-save (a timed-out command's trap) leaves the previous state whole."""
        tmp = f"{state}.tmp"
        save = (
            f'__rc=$?; {{ printf \'cd -- %q\\n\' "$PWD"; export -p; }} > {q(tmp)} && PATH="$PATH:/usr/bin:/bin" mv -f -- {q(tmp)} {q(state)}; '
            "exit $__rc"
        )
        body = f"( trap {q(save)} EXIT\n. {q(state)} 2>/dev/null\neval {q(command)}\n)"
        if marker is not None:
            check = f"__e=$(printf '%s\\n' {q(command)} | bash -n 2>&1)"
            body = f"if {check}; then\n{body}\nelse printf '%s\\n%s\\n' {q(marker)} \"$__e\"; (exit 2); fi"
        return await self._call(self.sandbox.exec(body, timeout=timeout))

    async def close_session(self, request: CloseSessionRequest) -> CloseSessionResponse:
        state = self._sessions.pop(request.session, None)
        if state is None:
            raise SessionDoesNotExistError(f"session {request.session!r} does not exist")
        await self._call(self.sandbox.exec(f"rm -f -- {q(state)} {q(state)}.tmp", timeout=30))
        return CloseBashSessionResponse()

    # --- commands and files ---------------------------------------------------------------------------------
    async def execute(self, command: Command) -> CommandResponse:
        cmd = command.command
        text = shlex.join(cmd) if isinstance(cmd, list) else (cmd if command.shell else q(cmd))
        if command.env is not None:  # subprocess semantics: env replaces the environment
            assigns = " ".join(q(f"{k}={v}") for k, v in command.env.items())
            shell_text = text if isinstance(cmd, list) or not command.shell else f"sh -c {q(text)}"
            text = f"env -i {assigns} {shell_text}"
        marker = f"__SWEREX_STDERR_{secrets.token_hex(6)}__"
        err = f"{self._prefix}-err-{secrets.token_hex(4)}"
        if not command.merge_output_streams:  # stderr to a file, appended after a marker, split here
            text = f"{{ {text}\n}} 2>{q(err)}; __rc=$?; printf %s {q(marker)}; cat {q(err)}; rm -f {q(err)}; exit $__rc"
            text = f"mkdir -p -- {q(err.rsplit('/', 1)[0])}; {text}"
        one_shot = getattr(self.sandbox, "exec_once", None)
        if one_shot is not None:
            r = await self._call(one_shot(text, timeout=command.timeout, cwd=command.cwd))
        else:  # a backend without one-shot mode: a subshell of the persistent shell (its state untouched)
            r = await self._call(self.sandbox.exec(f"( {text}\n)", timeout=command.timeout, cwd=command.cwd))
        stdout, _, stderr = r.output.partition(marker)
        if r.timed_out:
            raise CommandTimeoutError(f"Timeout ({command.timeout}s) exceeded while running command")
        if command.check and r.exit_code != 0:
            msg = f"Command {command.command!r} failed with exit code {r.exit_code}. Stdout:\n{stdout!r}\nStderr:\n{stderr!r}"
            raise NonZeroExitCodeError(f"{command.error_msg}: {msg}" if command.error_msg else msg)
        return CommandResponse(stdout=stdout, stderr=stderr, exit_code=r.exit_code)

    async def read_file(self, request: ReadFileRequest) -> ReadFileResponse:
        data = await self._call(self.sandbox.read_file(request.path))
        return ReadFileResponse(content=data.decode(request.encoding or "utf-8", request.errors or "strict"))

    async def write_file(self, request: WriteFileRequest) -> WriteFileResponse:
        await self._call(self.sandbox.write_file(request.path, request.content))
        return WriteFileResponse()

    async def upload(self, request: UploadRequest) -> UploadResponse:
        """A host file to the sandbox path `target_path`; a host directory's contents into that directory."""
        await self._call(self.sandbox.upload(request.source_path, request.target_path))
        return UploadResponse()

    # --- lifetime -------------------------------------------------------------------------------------------
    async def is_alive(self, *, timeout: float | None = None) -> IsAliveResponse:
        if self._closed:
            return IsAliveResponse(is_alive=False, message="the runtime is closed")
        try:
            r = await self._call(self.sandbox.exec("true", timeout=timeout or 30))
        except SandboxError as e:
            return IsAliveResponse(is_alive=False, message=str(e))
        return IsAliveResponse(is_alive=r.ok, message="" if r.ok else r.output)

    async def close(self) -> CloseResponse:
        """Remove the sessions' state; close the sandbox too when this runtime owns it (idempotent)."""
        if self._closed:
            return CloseResponse()
        try:
            with contextlib.suppress(SandboxError):  # state files (on the host itself with backend: local)
                await self._call(self.sandbox.exec(f"rm -f -- {q(self._prefix)}-*", timeout=30))
            if self._owns:
                await self._call(self.sandbox.close())
        finally:
            self._sessions.clear()
            self._closed = True
        return CloseResponse()
