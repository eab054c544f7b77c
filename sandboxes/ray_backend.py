"""RaySandbox: a sandbox whose container lives in a Ray actor, placed on a node that advertises a custom resource.

On a cluster, agents (and their policy) run where the GPUs are, while containers run on CPU nodes that have Docker
and disk: start those nodes with `ray start --resources='{"sandbox": 32}'` and every RaySandbox lands on one of
them, scheduled by Ray. The caller sees the plain `Sandbox` protocol; each call is one actor method call.
On one machine it runs on local Ray (tests). Ray is imported only when a RaySandbox starts.

File transfer crosses nodes: `upload` tars the caller's file or directory and ships the bytes; `download` does the
reverse. Errors keep their meaning: a failure inside the actor re-raises the same SandboxError subclass here, and
a dead actor (node lost, killed) raises SandboxDiedError.
"""

from __future__ import annotations

import asyncio
import contextlib
import io
import os
import tarfile
import tempfile
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from sandboxes.base import ExecResult, SandboxDiedError, SandboxError, SandboxStartError

if TYPE_CHECKING:
    from sandboxes.config import RaySandboxConfig


def _tar_path(src: str) -> bytes:
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w") as tar:
        tar.add(src, arcname=os.path.basename(os.path.normpath(src)) or "root")
    return buf.getvalue()


def _untar_single(data: bytes, into: str) -> str:
    """Extract a one-entry tar (file or directory tree) into `into`; returns the path of that entry."""
    with tarfile.open(fileobj=io.BytesIO(data), mode="r") as tar:
        names = tar.getnames()
        if hasattr(
            tarfile, "data_filter"
        ):  # Python >= 3.10.12 / 3.11.4: refuse links and paths out of `into`
            tar.extractall(into, filter="data")
        else:
            tar.extractall(into)
    top = names[0].split("/")[0] if names else ""
    return os.path.join(into, top)


class SandboxActor:
    """The actor body: owns one sandbox of the inner backend (Docker by default) on its node."""

    def __init__(
        self, inner: dict[str, Any], image: str | None, copy_tar: bytes | None, run_id: str | None, labels
    ):
        from sandboxes.config import parse_sandbox_config

        self._tmp = tempfile.mkdtemp(prefix="raysbx-")
        copy_from = _untar_single(copy_tar, self._tmp) if copy_tar else None
        self.sb = parse_sandbox_config(inner).build(
            image=image, copy_from=copy_from, run_id=run_id, labels=labels
        )

    async def start(self) -> str:
        await self.sb.start()
        return self.sb.id

    async def exec(
        self, cmd: str, timeout: float | None, cwd: str | None, env: dict[str, str] | None
    ) -> ExecResult:
        return await self.sb.exec(cmd, timeout=timeout, cwd=cwd, env=env)

    async def exec_once(
        self,
        cmd: str,
        timeout: float | None,
        cwd: str | None,
        env: dict[str, str] | None,
        output_limit: int | None,
    ) -> ExecResult:
        once = getattr(self.sb, "exec_once", None)
        if once is None:
            raise SandboxError(
                f"the inner backend {type(self.sb).__name__} has no one-shot mode (exec_once)",
                sandbox_id=self.sb.id,
            )
        return await once(cmd, timeout=timeout, cwd=cwd, env=env, output_limit=output_limit)

    async def read_file(self, path: str) -> bytes:
        return await self.sb.read_file(path)

    async def write_file(self, path: str, data: bytes | str, mode: int) -> None:
        await self.sb.write_file(path, data, mode=mode)

    async def upload(self, data: bytes, dst: str) -> None:
        with tempfile.TemporaryDirectory(dir=self._tmp) as d:
            await self.sb.upload(_untar_single(data, d), dst)

    async def download(self, src: str) -> bytes:
        with tempfile.TemporaryDirectory(dir=self._tmp) as d:
            target = os.path.join(d, os.path.basename(os.path.normpath(src)) or "root")
            await self.sb.download(src, target)
            return await asyncio.to_thread(_tar_path, target)

    async def close(self) -> None:
        import shutil

        try:
            await self.sb.close()
        finally:
            shutil.rmtree(self._tmp, ignore_errors=True)


class RaySandbox:
    """`Sandbox` protocol over a SandboxActor. Build it through `make_sandbox({"backend": "ray", ...})`."""

    def __init__(
        self,
        config: RaySandboxConfig,
        *,
        image: str | None = None,
        copy_from: str | Path | None = None,
        run_id: str | None = None,
        labels: Mapping[str, str] | None = None,
    ):
        self.config = config
        self.id = f"ray-sandbox-{run_id or 'anon'}"
        self._args = (image, str(copy_from) if copy_from is not None else None, run_id, dict(labels or {}))
        self._actor: Any = None
        self._closed = False

    async def start(self) -> None:
        if self._actor is not None:
            return
        if self._closed:
            raise SandboxError("sandbox was closed; make a new one", sandbox_id=self.id)
        import ray

        self._ensure_ray(ray)
        image, copy_from, run_id, labels = self._args
        copy_tar = await asyncio.to_thread(_tar_path, copy_from) if copy_from else None
        resources = {self.config.resource: self.config.resource_amount} if self.config.resource else None
        # A named strategy ("SPREAD" or "DEFAULT"): placed by its resource, never inside the caller's placement
        # group. OpenRLHF's vLLM engines capture their children into theirs (GPU bundles without `sandbox`): Ray
        # refused every sandbox at once.
        strategy = "SPREAD" if self.config.scheduling == "spread" else "DEFAULT"
        self._actor = (
            ray.remote(SandboxActor)
            .options(
                num_cpus=self.config.num_cpus,
                resources=resources,
                max_restarts=0,
                max_task_retries=0,
                scheduling_strategy=strategy,
            )
            .remote(self.config.inner.model_dump(mode="json"), image, copy_tar, run_id, labels)
        )
        try:
            self.id = await asyncio.wait_for(self._call("start"), self.config.startup_timeout)
        except BaseException as e:
            await self.close()
            if isinstance(e, SandboxError) or not isinstance(e, Exception):
                raise
            raise SandboxStartError("Ray sandbox actor did not start", sandbox_id=self.id, cause=e) from e

    def _ensure_ray(self, ray: Any) -> None:
        from sandboxes.raystart import connect_ray

        # No Ray yet: join ray_address (or RAY_ADDRESS), else a private local Ray advertising the resource.
        resources = {self.config.resource: self.config.local_slots} if self.config.resource else {}
        connect_ray(
            self.config.ray_address,
            purpose="ray sandbox",
            local={"resources": resources},
            log_to_driver=False,
            configure_logging=False,
        )
        if self.config.resource and self.config.resource not in ray.cluster_resources():
            raise SandboxStartError(
                f"no Ray node advertises the custom resource {self.config.resource!r}; start the sandbox nodes "
                f"with `ray start --resources='{{\"{self.config.resource}\": 32}}'`, or set resource: null"
            )

    async def _call(self, method: str, *args: Any) -> Any:
        from ray.exceptions import RayActorError, RayTaskError

        if self._actor is None:
            raise SandboxError("sandbox is not started", sandbox_id=self.id)
        try:
            return await getattr(self._actor, method).remote(*args)
        except RayActorError as e:
            raise SandboxDiedError("Ray sandbox actor died", sandbox_id=self.id, cause=e) from None
        except RayTaskError as e:
            cause = e.cause if isinstance(getattr(e, "cause", None), BaseException) else e
            if isinstance(cause, SandboxError):
                raise cause from None
            raise SandboxError(
                f"{method} failed in the Ray sandbox actor", sandbox_id=self.id, cause=cause
            ) from None

    async def exec(
        self,
        cmd: str,
        *,
        timeout: float | None = None,
        cwd: str | None = None,
        env: dict[str, str] | None = None,
    ) -> ExecResult:
        return await self._call("exec", cmd, timeout, cwd, env)

    async def exec_once(
        self,
        cmd: str,
        *,
        timeout: float | None = None,
        cwd: str | None = None,
        env: dict[str, str] | None = None,
        output_limit: int | None = None,
    ) -> ExecResult:
        """The inner sandbox's one-shot mode (a fresh process, no shell state; Docker and local have it)."""
        return await self._call("exec_once", cmd, timeout, cwd, env, output_limit)

    async def read_file(self, path: str) -> bytes:
        return await self._call("read_file", path)

    async def write_file(self, path: str, data: bytes | str, *, mode: int = 0o644) -> None:
        await self._call("write_file", path, data, mode)

    async def upload(self, src: str, dst: str) -> None:
        await self._call("upload", await asyncio.to_thread(_tar_path, src), dst)

    async def download(self, src: str, dst: str) -> None:
        data = await self._call("download", src)
        parent = os.path.dirname(os.path.abspath(dst))
        os.makedirs(parent, exist_ok=True)
        with tempfile.TemporaryDirectory(dir=parent) as d:
            got = await asyncio.to_thread(_untar_single, data, d)
            os.replace(got, dst)

    async def close(self) -> None:
        """Close the inner sandbox (its container is removed), then end the actor. Idempotent."""
        self._closed = True
        actor, self._actor = self._actor, None
        if actor is None:
            return
        import ray

        with contextlib.suppress(Exception):
            await asyncio.wait_for(actor.close.remote(), 60)
        with contextlib.suppress(Exception):
            ray.kill(actor, no_restart=True)

    async def __aenter__(self) -> RaySandbox:
        await self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()
