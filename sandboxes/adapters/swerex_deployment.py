"""SWE-ReX `AbstractDeployment` whose runtime is a hardened `sandboxes` sandbox (PyPI `swe-rex` 1.x).

Anything that talks SWE-ReX (SWE-agent's `SWEEnv(deployment=...)`, mini-swe-agent's swerex environments, your
own code) then runs in our containers: limits and `network: none` by default, ownership labels, the janitor and
`sandboxes reap`, the host-wide start cap, and optionally a warm pool:

    dep = SandboxDeployment(image="swe-rl/base:bookworm", sandbox={"backend": "docker"})
    await dep.start()
    await dep.runtime.create_session(CreateBashSessionRequest())
    obs = await dep.runtime.run_in_session(BashAction(command="cd /tmp && ls", check="silent"))
    await dep.stop()

    pool = SandboxDeploymentPool(sandbox={"backend": "docker", "warm_pool": {"size": 4}})
    dep = pool.deployment(image)  # start() takes a pre-started sandbox; stop() gives it back
    ...
    pool.close()  # drains the pool
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from typing import Any, Literal

from pydantic import Field
from swerex.deployment.abstract import AbstractDeployment
from swerex.deployment.hooks.abstract import CombinedDeploymentHook, DeploymentHook
from swerex.exceptions import DeploymentNotStartedError, DeploymentStartupError
from swerex.runtime.abstract import IsAliveResponse

from sandboxes.adapters.swerex_runtime import LoopThread, SandboxRuntime
from sandboxes.base import Sandbox, SandboxStartError
from sandboxes.config import DockerSandboxConfig, SandboxConfig, StrictConfig, make_sandbox


class SandboxDeploymentConfig(StrictConfig):
    """A SWE-ReX deployment config (same shape as swe-rex's own: `type` + fields + get_deployment)."""

    type: Literal["sandboxes"] = "sandboxes"  # discriminator, like swe-rex's deployment configs
    image: str | None = None  # sandbox image (null = the backend config's default image)
    sandbox: SandboxConfig = Field(default_factory=lambda: DockerSandboxConfig())  # backend config
    run_id: str = "swe-rex"  # run label of the sandboxes (`sandboxes ls/reap --run-id`)
    labels: dict[str, str] = Field(default_factory=dict)  # extra container labels
    state_dir: str = "/dev/shm"  # directory inside the sandbox for the bash sessions' state files

    def get_deployment(self) -> SandboxDeployment:
        return SandboxDeployment(**self.model_dump())


class SandboxDeployment(AbstractDeployment):
    """One sandbox per start(); its SWE-ReX runtime is `SandboxRuntime`. stop() removes (or pools) it."""

    def __init__(
        self,
        *,
        sandbox_instance: Sandbox | None = None,
        loop: LoopThread | None = None,
        logger: logging.Logger | None = None,
        **kwargs: Any,
    ) -> None:
        """kwargs: SandboxDeploymentConfig fields. sandbox_instance: an unstarted Sandbox to use instead of
        building one (e.g. a pool's). loop: a shared LoopThread (kept open at stop); None = one of its own."""
        self._config = SandboxDeploymentConfig(**kwargs)
        self.logger = logger or logging.getLogger("sandboxes.swerex")
        self._given, self._shared_loop = sandbox_instance, loop
        self._loop: LoopThread | None = None
        self._runtime: SandboxRuntime | None = None
        self._hooks = CombinedDeploymentHook()

    @classmethod
    def from_config(cls, config: SandboxDeploymentConfig) -> SandboxDeployment:
        return cls(**config.model_dump())

    def add_hook(self, hook: DeploymentHook) -> None:
        self._hooks.add_hook(hook)

    async def start(self) -> None:
        if self._runtime is not None:
            return
        cfg = self._config
        if (
            self._given is None
            and isinstance(cfg.sandbox, DockerSandboxConfig)
            and cfg.sandbox.warm_pool.size
        ):
            self.logger.warning(
                "sandbox.warm_pool is served by SandboxDeploymentPool; this deployment starts cold"
            )
        sb = self._given or make_sandbox(cfg.sandbox, image=cfg.image, run_id=cfg.run_id, labels=cfg.labels)
        self._given = None  # a sandbox is started once; a later start() builds a new one
        loop = self._shared_loop or LoopThread()
        self._hooks.on_custom_step("Starting sandbox")
        try:
            await loop.run(sb.start())
        except SandboxStartError as e:
            if loop is not self._shared_loop:
                loop.close()
            raise DeploymentStartupError(str(e)) from e
        self._loop = loop
        self._runtime = SandboxRuntime(sb, loop=loop, owns=True, state_dir=cfg.state_dir, logger=self.logger)
        self.logger.info("sandbox %s started", sb.id)

    async def stop(self) -> None:
        """Close the runtime and its sandbox (idempotent)."""
        runtime, self._runtime = self._runtime, None
        loop, self._loop = self._loop, None
        try:
            if runtime is not None:
                await runtime.close()
        finally:
            if loop is not None and loop is not self._shared_loop:
                loop.close()

    async def is_alive(self, *, timeout: float | None = None) -> IsAliveResponse:
        return await self.runtime.is_alive(timeout=timeout)

    @property
    def runtime(self) -> SandboxRuntime:
        if self._runtime is None:
            raise DeploymentNotStartedError()
        return self._runtime

    @property
    def sandbox(self) -> Sandbox:
        """The running sandbox (e.g. to grade in it after the agent is done)."""
        return self.runtime.sandbox

    def __del__(self) -> None:
        # upstream's __del__ runs stop() on whatever loop it finds; ours needs none: close only what is left
        runtime, loop = getattr(self, "_runtime", None), getattr(self, "_loop", None)
        if runtime is not None and loop is not None and not loop.loop.is_closed():
            with contextlib.suppress(
                RuntimeError
            ):  # the loop closed meanwhile: the janitor removes it at exit
                asyncio.run_coroutine_threadsafe(runtime.sandbox.close(), loop.loop)


class SandboxDeploymentPool:
    """Deployments served by one `sandboxes.pool.WarmPool` (Docker): start() takes a pre-started sandbox of the
    image, stop() gives it back (closed, or restored and verified with `warm_pool.reuse`). All its deployments
    share one loop thread, the pool's."""

    def __init__(self, logger: logging.Logger | None = None, **kwargs: Any) -> None:
        """kwargs: SandboxDeploymentConfig fields; `sandbox` must be a Docker config (its warm_pool sets the size)."""
        from sandboxes.pool import WarmPool

        self.config = SandboxDeploymentConfig(**kwargs)
        if not isinstance(self.config.sandbox, DockerSandboxConfig):
            raise ValueError(
                "SandboxDeploymentPool: sandbox.backend must be docker (the warm pool's backend)"
            )
        self.logger = logger
        self.loop = LoopThread()
        self.pool = WarmPool(self.config.sandbox, run_id=self.config.run_id, labels=self.config.labels)

    def deployment(self, image: str | None = None) -> SandboxDeployment:
        cfg = self.config.model_dump() | {"image": image or self.config.image}
        box = self.pool.sandbox(cfg["image"])
        return SandboxDeployment(sandbox_instance=box, loop=self.loop, logger=self.logger, **cfg)

    async def warm(self, images: list[str], *, timeout: float = 300.0) -> None:
        """Fill the pool for `images` and wait until each has `warm_pool.size` idle sandboxes (or timeout)."""
        await self.loop.run(self.pool.warm(images, wait=True, timeout=timeout))

    def close(self) -> None:
        """Drain the pool (every idle sandbox removed) and stop the loop thread (idempotent)."""
        if self.loop.loop.is_closed():
            return
        try:
            asyncio.run_coroutine_threadsafe(self.pool.close(), self.loop.loop).result(timeout=300)
        finally:
            self.loop.close()
