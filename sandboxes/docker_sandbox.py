"""DockerSandbox: one container per sandbox, limits on by default, a persistent bash over an attached exec socket.

The container's main process reads the owner's lease stream until it closes or the TTL ends (sandboxes/lease.py;
`sleep TTL` without a lease) under Docker's init (which reaps orphans), and it is auto-removed when it stops, so a
container whose owner is gone, or that was forgotten, disappears by itself. Blocking Docker SDK calls run in
worker threads; the shell stream itself is read on the event loop, so many sandboxes share one thread.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import random
import secrets
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from sandboxes import lease, transfer
from sandboxes.base import (
    EngineUnreachableError,
    ExecResult,
    SandboxDiedError,
    SandboxError,
    SandboxStartError,
    SandboxTimeoutError,
)
from sandboxes.config import DockerSandboxConfig
from sandboxes.engine import SocketTransport, docker_client, open_exec_transport
from sandboxes.lifecycle import Janitor, default_janitor, owner_labels
from sandboxes.shell import OutputCap, check_env, check_output_limit, one_shot_argv
from sandboxes.shellbox import ShellSandbox
from sandboxes.startgate import StartGate, default_gate_dir, default_slots

__all__ = ["STATE_DIR", "DockerSandbox", "docker_client"]  # docker_client re-exported: callers import it here

# an image asks for at least this many CPUs (a float) when the config sets a quota (SWE-bench nano_cpus)
MIN_CPUS_LABEL = "org.swe-rl.min-cpus"
STATE_DIR = "/dev/shm/.sandboxes"  # survives a read-only root; not under /tmp, which tests may fill
# Start failures worth another try: the engine was busy, restarting or slow (a missing image is marked permanent).
_RETRYABLE = (SandboxStartError, EngineUnreachableError)
# Kill every process of one session with bash builtins only (no fork: works when the pids limit is exhausted).
_KILL_SESSION = (
    'for _ in 1 2 3; do for d in /proc/[0-9]*; do read -r l < "$d/stat" 2>/dev/null || continue; '
    'l=${l##*) }; set -- $l; [ "$4" = "$SID" ] && kill -9 "${d#/proc/}" 2>/dev/null; done; done; true'
)


class DockerSandbox(ShellSandbox):
    """A hardened container with a persistent shell. Start with `await sb.start()` or `async with`."""

    # every process in /proc here is the sandbox's own (a PID namespace): a caller may kill what its commands left
    own_pid_namespace = True

    def __init__(
        self,
        config: DockerSandboxConfig | None = None,
        *,
        image: str | None = None,
        copy_from: str | Path | None = None,
        run_id: str | None = None,
        labels: Mapping[str, str] | None = None,
        client: Any = None,
        janitor: Janitor | None = None,
    ) -> None:
        self.config = config or DockerSandboxConfig()
        super().__init__(
            exec_timeout=self.config.exec_timeout,
            kill_grace=self.config.kill_grace,
            client_grace=self.config.client_grace,
            output_limit=self.config.output_limit,
            startup_timeout=self.config.startup_timeout,
            state_dir=STATE_DIR,
            workdir=self.config.workdir,
        )
        self.image = image or self.config.image
        self.run_id = run_id or secrets.token_hex(4)
        self.name = f"sbx-{self.run_id}-{secrets.token_hex(5)}"  # known before create: a timed-out create is removable
        self.kill_background = self.config.kill_background
        self.id = self.name  # replaced by the container id once created
        self._copy_from = copy_from
        self._extra_labels = dict(self.config.labels) | dict(labels or {})
        self._client = client
        self._janitor = janitor or default_janitor()
        self._expires_at = float("inf")  # unix time the TTL ends (set at create)
        self._lease: Any = None  # the attached stdin whose close ends the container (owner_lease)
        self.start_wait_s = 0.0  # seconds start() queued for a host-wide start slot
        self.start_s = 0.0  # seconds start() took in all (queue, tries, backoff)
        self._janitor.install()  # here, not in start(): this may be the main thread, start() may not be

    @property
    def expires_at(self) -> float:
        """Unix time at which the container's TTL ends (inf before it is created)."""
        return self._expires_at

    # --- lifecycle ------------------------------------------------------------------------------------------
    async def start(self) -> None:
        """Create the container and its shell: queued behind the host-wide start cap, transient failures (engine
        errors, startup timeout) tried again with backoff, all within `start_budget`; else SandboxStartError."""
        if self._started:
            return
        if self._closed:
            raise SandboxError("sandbox was closed; make a new one", sandbox_id=self.id)
        cfg = self.config
        t0 = time.monotonic()
        deadline, delay = t0 + cfg.start_budget, cfg.start_backoff
        gate = StartGate(
            cfg.start_gate_dir or default_gate_dir(cfg.docker_host), cfg.max_starting or default_slots()
        )
        for attempt in range(1, cfg.start_attempts + 1):
            try:
                async with gate.slot(deadline):
                    self.start_wait_s += gate.waited_s
                    await self._start_once(min(cfg.startup_timeout, max(deadline - time.monotonic(), 0.01)))
                break
            except SandboxError as e:
                last = attempt == cfg.start_attempts or time.monotonic() + delay >= deadline
                if last or getattr(e, "permanent", False) or not isinstance(e, _RETRYABLE):
                    if attempt > 1 and isinstance(e, SandboxStartError):
                        raise SandboxStartError(
                            f"start failed {attempt} times in {time.monotonic() - t0:.1f}s",
                            sandbox_id=self.id,
                            cause=e,
                        ) from e
                    raise
                await asyncio.sleep(delay * random.uniform(0.5, 1.5))
                delay *= 2
                self.name = self.id = f"sbx-{self.run_id}-{secrets.token_hex(5)}"
                self._closed = False
        self.start_s = time.monotonic() - t0
        if self._copy_from is not None:
            try:
                await self.upload(str(self._copy_from), self.config.workdir or ".")
            except BaseException as e:
                await self.close()
                if isinstance(e, SandboxError) or not isinstance(e, Exception):
                    raise
                raise SandboxStartError("could not copy copy_from in", sandbox_id=self.id, cause=e) from e

    async def _start_once(self, timeout: float) -> None:
        self._janitor.hold(self.name, self.config.docker_host)
        create = asyncio.ensure_future(asyncio.to_thread(self._create_blocking))
        try:
            await asyncio.wait_for(asyncio.shield(create), timeout)
            self._started = True
            await self._start_shell()
        except BaseException as e:
            # the create may still be running in its thread: wait for it, then remove whatever it made
            with contextlib.suppress(BaseException):
                await create
            await self._remove()
            self._started, self._closed = False, True
            if isinstance(e, SandboxError) or not isinstance(e, Exception):
                raise
            if isinstance(e, asyncio.TimeoutError):
                msg = f"not ready within startup_timeout={timeout:g}s"
                raise SandboxStartError(msg, sandbox_id=self.id, cause=e) from e
            raise SandboxStartError(f"could not start image {self.image}", sandbox_id=self.id, cause=e) from e

    def _create_blocking(self) -> None:
        import docker

        if self._client is None:
            self._client = docker_client(self.config.docker_host)
        api = self._client.api
        try:
            cid = self._create_container(api)
        except docker.errors.ImageNotFound:
            from sandboxes.images import ensure_image

            try:
                ensure_image(
                    self._client, self.image, pull=self.config.pull, disk_floor_gb=self.config.disk_floor_gb
                )
            except SandboxStartError as e:
                e.permanent = True  # type: ignore[attr-defined]  # trying again cannot make the image appear
                raise
            cid = self._create_container(api)
        self.id = cid
        if self.config.owner_lease:  # attached before start: no moment where the owner could die unnoticed
            self._lease = lease.hold(api, cid)
        api.start(cid)

    def _create_container(self, api: Any) -> str:
        import docker

        lim, cfg = self.config.limits, self.config
        host_config = api.create_host_config(
            network_mode=lim.network,
            mem_limit=lim.memory,
            memswap_limit=lim.memory,
            pids_limit=lim.pids,
            nano_cpus=int(cpus * 1e9) if (cpus := self._cpus(api, lim.cpus)) else None,
            security_opt=["no-new-privileges:true"] if lim.no_new_privileges else None,
            cap_drop=lim.cap_drop or None,
            cap_add=lim.cap_add or None,
            read_only=lim.read_only_root,
            tmpfs=dict(lim.tmpfs) or None,
            storage_opt={"size": lim.storage_size} if lim.storage_size else None,
            ulimits=None if lim.core_dumps else [docker.types.Ulimit(name="core", soft=0, hard=0)],
            init=True,
            auto_remove=True,
        )
        labels = owner_labels(self.run_id, cfg.ttl) | self._extra_labels
        self._expires_at = time.time() + cfg.ttl
        resp = api.create_container(
            self.image,
            command=lease.main_command(cfg.ttl, cfg.owner_lease),
            name=self.name,
            labels=labels,
            environment=dict(cfg.env) or None,
            working_dir=cfg.workdir,
            user=cfg.user,
            host_config=host_config,
            **lease.create_options(cfg.owner_lease),
        )
        return resp["Id"]

    def _cpus(self, api: Any, quota: float | None) -> float | None:
        """The CPU quota, raised to what the image declares it needs (label MIN_CPUS_LABEL): SWE-bench gives some
        instances 2 CPUs (pylint 2.15's spec), and a test that needs two cores skips itself under a 1-CPU quota,
        which fails the gold patch. Never above the host's cores; an unlimited quota stays unlimited."""
        if not quota:
            return quota
        want = (api.inspect_image(self.image).get("Config") or {}).get("Labels") or {}
        try:
            need = min(float(want.get(MIN_CPUS_LABEL, 0)), float(os.cpu_count() or 1))
        except ValueError:
            return quota
        return max(quota, need)

    async def close(self) -> None:
        """Remove the container (idempotent)."""
        self._closed = True
        if self._transport is not None:
            self._transport.close()
            self._transport = None
        await self._remove()

    async def _remove(self) -> None:
        def rm() -> None:
            with contextlib.suppress(Exception):
                if self._client is not None:
                    self._client.api.remove_container(self.name, force=True)

        await asyncio.to_thread(rm)
        lease.release(self._lease)
        self._lease = None
        self._janitor.release(self.name)

    # --- shell backend hooks --------------------------------------------------------------------------------
    async def _open_transport(self) -> SocketTransport:
        def open_exec() -> Any:
            api = self._client.api
            ex = api.exec_create(
                self.id,
                ["bash", "--noprofile", "--norc"],
                stdin=True,
                stdout=True,
                stderr=True,
                tty=False,
                workdir=self.config.workdir,
            )
            return api.exec_start(ex["Id"], socket=True)

        try:
            sock_io = await asyncio.to_thread(open_exec)
        except Exception as e:
            await self._check_alive()
            raise SandboxStartError("could not open the sandbox shell", sandbox_id=self.id, cause=e) from e
        return await open_exec_transport(sock_io)

    async def _kill_session(self, sid: int, *, runaway: bool) -> None:
        def kill() -> bool:
            try:
                argv = ["bash", "-c", _KILL_SESSION]
                rc, _, _ = transfer.exec_io(self._client, self.id, argv, env={"SID": str(sid)}, timeout=30)
                return rc == 0
            except Exception:  # e.g. the pids limit is exhausted: no process can be exec'd
                return False

        if await asyncio.to_thread(kill) or not runaway:
            return  # a shell that died on its own needs no restart; a dead container shows at the next step
        await self._check_alive()  # never resurrect a container that was killed from outside
        try:  # last resort for a runaway nothing can be exec'd beside: STOPSIGNAL SIGKILL, files are kept
            await asyncio.to_thread(self._restart_blocking)
        except Exception as e:
            await self._check_alive()
            raise SandboxDiedError("could not kill a runaway command", sandbox_id=self.id, cause=e) from e

    def _restart_blocking(self) -> None:
        """Restart the container (files kept); the restarted main process reads a new stdin: attach the lease."""
        self._client.api.restart(self.id, timeout=0)
        if self._lease is not None:
            old, self._lease = self._lease, lease.hold(self._client.api, self.id)
            lease.release(old)

    async def _check_alive(self) -> None:
        def state() -> dict[str, Any]:
            return self._client.api.inspect_container(self.id)["State"]

        try:
            st = await asyncio.to_thread(state)
        except Exception as e:
            if time.time() >= self._expires_at:
                raise SandboxTimeoutError(
                    f"sandbox reached its ttl={self.config.ttl:g}s and is gone", sandbox_id=self.id, cause=e
                ) from e
            raise SandboxDiedError("sandbox container is gone", sandbox_id=self.id, cause=e) from e
        if not st.get("Running"):
            detail = f"status={st.get('Status')} exit={st.get('ExitCode')} oom={st.get('OOMKilled')}"
            raise SandboxDiedError(f"sandbox container stopped ({detail})", sandbox_id=self.id)

    async def exec_once(
        self,
        cmd: str,
        *,
        timeout: float | None = None,
        cwd: str | None = None,
        env: dict[str, str] | None = None,
        output_limit: int | None = None,
    ) -> ExecResult:
        """One-shot mode: a fresh `docker exec` (no shell state, may run alongside `exec`), same limits; its exit
        code is the engine's (one that ended by a signal in a sandbox that is gone raises SandboxDiedError, as `exec`
        does). `output_limit`: bytes kept of this command's output (default: the sandbox's cap).
        Docker ends the stream ~2 s after the command exits, even where a process it left still holds it."""
        timeout = self._check_timeout(timeout)
        cap = OutputCap(check_output_limit(output_limit, self.output_limit))
        argv = one_shot_argv(cmd, timeout, self.kill_grace)
        self._io()  # raises when not running
        t0 = time.monotonic()
        try:
            code, _, _ = await asyncio.to_thread(
                transfer.exec_io,
                self._client,
                self.id,
                argv,
                env=check_env(env) or None,
                workdir=cwd or self.config.workdir,
                timeout=timeout + self.kill_grace + self.client_grace,
                sink=cap.add,
            )
        except TimeoutError:  # the inside timeout failed to end it; it is left to that timeout's SIGKILL
            note = f"\n[sandbox: one-shot command abandoned by the client after {timeout:g}s]"
            return ExecResult(-1, cap.text() + note, True, time.monotonic() - t0, cap.total)
        except Exception as e:
            await self._check_alive()
            raise SandboxError("one-shot exec failed", sandbox_id=self.id, cause=e) from e
        duration = time.monotonic() - t0
        timed_out = code in (124, 137) and duration >= timeout
        # killed by a signal: the sandbox may have died under it (SandboxDiedError, as `exec` says)
        if not 0 <= code < 128 and not timed_out:
            await self._confirm_alive()
        return ExecResult(code, cap.text(), timed_out, duration, cap.total)

    async def _confirm_alive(self) -> None:
        """SandboxDiedError when the container is gone or can no longer start a process (its init has exited and
        the engine has not yet marked it stopped: a one-shot command can end a moment before its container does)."""
        await self._check_alive()
        try:
            code, _, _ = await asyncio.to_thread(
                transfer.exec_io, self._client, self.id, ["true"], timeout=30
            )
        except Exception as e:
            await self._check_alive()
            raise SandboxDiedError(
                "the sandbox can no longer start a process", sandbox_id=self.id, cause=e
            ) from e
        if code != 0:
            await self._check_alive()
            raise SandboxDiedError(
                f"the sandbox can no longer start a process (`true` gave {code})", sandbox_id=self.id
            )

    # --- files ----------------------------------------------------------------------------------------------
    async def read_file(self, path: str) -> bytes:
        return await self._io_call(transfer.read_file, path)

    async def write_file(self, path: str, data: bytes | str, *, mode: int = 0o644) -> None:
        raw = data.encode(errors="surrogateescape") if isinstance(data, str) else bytes(data)
        await self._io_call(transfer.write_file, path, raw, mode)

    async def upload(self, src: str, dst: str) -> None:
        """Copy a host file to container path `dst`, or a host directory's contents into directory `dst`."""
        await self._io_call(transfer.upload, src, dst)

    async def download(self, src: str, dst: str) -> None:
        """Copy a container file to host path `dst`, or a container directory's contents into host dir `dst`."""
        await self._io_call(transfer.download, src, dst)

    async def _io_call(self, fn: Callable[..., Any], *args: Any) -> Any:
        """Run a blocking transfer; engine/socket failures become SandboxError subclasses (file errors stay)."""
        ctx = self._io()
        try:
            return await asyncio.to_thread(fn, self._client, self.id, *args, ctx)
        except (SandboxError, FileNotFoundError):
            raise
        except TimeoutError as e:
            await self._check_alive()
            raise SandboxTimeoutError(
                f"{fn.__name__} exceeded io_timeout={ctx.timeout:g}s", sandbox_id=self.id, cause=e
            ) from e
        except Exception as e:
            if isinstance(e, OSError) and e.errno is not None and not isinstance(e, ConnectionError):
                raise  # a host-side file problem (permissions, not a directory ...) is the caller's to see
            await self._check_alive()
            raise SandboxError(f"{fn.__name__} failed", sandbox_id=self.id, cause=e) from e

    def _io(self) -> transfer.IoContext:
        if not self._started or self._closed:
            raise SandboxError("sandbox is not running", sandbox_id=self.id)
        cfg = self.config
        return transfer.IoContext(workdir=cfg.workdir, timeout=cfg.io_timeout, max_bytes=cfg.io_max_bytes)
