"""WarmPool: a bounded pool of pre-started, never-used Docker sandboxes per image, refilled in the background.

`pool.sandbox(image)` is an unstarted `Sandbox` whose `start()` takes an idle sandbox of that image (or starts one
cold when none is idle) and whose `close()` gives it back: the pool closes it, or, with `reuse: true`, restores
its whole state (sandboxes/restore.py) and keeps it only when the restore verified. What is kept ready per image:
`refill: always` keeps `size` idle for every image asked for; `refill: expected` pre-starts only hand-outs
announced with `expect(image, n)` (or `warm`), up to `size`: with one image per task (SWE-bench) a sandbox kept
for every image seen would mostly be started for nothing. Idle sandboxes are started with TTL `ttl + max_idle` and handed out only while at least `ttl` is left,
so a sandbox from the pool lives as long as a cold one. `close()` drains the pool (the janitor covers exits).

A pool belongs to one event loop (the shell streams do); used from a new loop, it drops what the old one held.
"""

from __future__ import annotations

import asyncio
import time
from collections import deque
from collections.abc import Mapping
from typing import Any

from sandboxes.base import ExecResult, SandboxError
from sandboxes.config import DockerSandboxConfig
from sandboxes.docker_sandbox import DockerSandbox
from sandboxes.lifecycle import default_janitor, reap_at_start


class WarmPool:
    """Idle started sandboxes per image; `config.warm_pool` sets the size, fill concurrency, reuse and idle time."""

    def __init__(
        self,
        config: DockerSandboxConfig,
        *,
        run_id: str | None = None,
        labels: Mapping[str, str] | None = None,
    ) -> None:
        self.config = config
        self.pool_cfg = config.warm_pool
        self._box_cfg = config.model_copy(update={"ttl": config.ttl + self.pool_cfg.max_idle})
        self.run_id = run_id
        self._labels = {"sandboxes.pool": "1", **dict(labels or {})}
        self._idle: dict[str, deque[DockerSandbox]] = {}
        self._filling: dict[str, int] = {}
        self._demand: dict[str, int] = {}  # image -> hand-outs announced with expect() and not yet taken
        self._lent: dict[str, int] = {}  # image -> sandboxes handed out that may come back restored (reuse)
        self._tasks: set[asyncio.Task[Any]] = set()  # fills in flight
        self._closing: set[asyncio.Task[Any]] = set()  # closes of stale or surplus sandboxes
        self._loop: asyncio.AbstractEventLoop | None = None
        self._refs: dict[str, Any] = {}  # image -> overlay.Reference (reuse only)
        self._closed = False
        self.stats = dict.fromkeys(
            ("hits", "misses", "reused", "not_restored", "surplus", "stale", "fill_failed"), 0
        )
        reap_at_start("sandbox pool", config.docker_host)  # dead runs' sandboxes go before this pool fills

    def sandbox(self, image: str | None = None, *, then_expect: int = 0) -> PooledSandbox:
        """An unstarted Sandbox served by this pool (`async with pool.sandbox(img) as sb:`); `then_expect`: once
        it is started, announce that many more hand-outs of the image (e.g. the grading sandbox of an episode)."""
        return PooledSandbox(self, image or self.config.image, then_expect)

    def expect(self, image: str, n: int = 1) -> None:
        """Announce `n` hand-outs of `image` to come: pre-start them (up to `size` idle). Call on the pool's loop."""
        self._bind()
        self._demand[image] = self._demand.get(image, 0) + n
        self._refill(image)

    def idle(self, image: str | None = None) -> int:
        return len(self._idle.get(image or self.config.image, ()))

    async def warm(self, images: list[str], *, wait: bool = True, timeout: float = 300.0) -> None:
        """Fill `images` to `size` idle sandboxes; with `wait`, return once they are (or at the timeout)."""
        self._bind()
        for image in images:
            self._demand[image] = max(self._demand.get(image, 0), self.pool_cfg.size)
            self._refill(image)
        deadline = time.monotonic() + timeout
        while wait and time.monotonic() < deadline:
            if all(self.idle(i) >= self.pool_cfg.size or not self._filling.get(i) for i in images):
                return
            await asyncio.sleep(0.02)

    async def acquire(self, image: str) -> DockerSandbox:
        """A started, never-used (or verified-restored) sandbox of `image`: idle if there is one, else cold."""
        if self._closed:
            raise SandboxError("the warm pool is closed")
        self._bind()
        self._demand[image] = max(self._demand.get(image, 0) - 1, 0)
        idle = self._idle.setdefault(image, deque())
        try:
            while idle:
                sb = idle.popleft()
                if sb.expires_at - time.time() >= self.config.ttl:
                    self.stats["hits"] += 1
                    break
                self.stats["stale"] += 1
                self._spawn(sb.close(), closing=True)
            else:
                self.stats["misses"] += 1
                sb = await self._start(image)
            if self.pool_cfg.reuse:
                self._lent[image] = self._lent.get(image, 0) + 1
            return sb
        finally:
            self._refill(image)

    async def release(self, sb: DockerSandbox) -> None:
        """Take back a used sandbox: restored and kept (reuse on, verified, room left) or closed."""
        idle = self._idle.setdefault(sb.image, deque())
        if self.pool_cfg.reuse:
            self._lent[sb.image] = max(self._lent.get(sb.image, 0) - 1, 0)
        reuse = self.pool_cfg.reuse and not self._closed and asyncio.get_running_loop() is self._loop
        if reuse and len(idle) >= self._want(sb.image):
            self.stats["surplus"] += 1  # enough ready already: not worth a restore
        elif reuse:
            from sandboxes.restore import restore

            try:
                if await restore(sb) and sb.expires_at - time.time() >= self.config.ttl:
                    self.stats["reused"] += 1
                    idle.appendleft(sb)  # handed out next; a fresh one filled meanwhile may be one too many
                    while len(idle) > self.pool_cfg.size:
                        self._spawn(idle.pop().close(), closing=True)
                    return
            except Exception:  # an engine error mid-restore: the sandbox is closed, like any unverified one
                pass
            self.stats["not_restored"] += 1
        await sb.close()
        self._refill(sb.image)

    async def close(self) -> None:
        """Drain: stop refilling, close every idle sandbox and every start in flight."""
        self._closed = True
        tasks, self._tasks = list(self._tasks), set()
        for t in tasks:
            t.cancel()
        await asyncio.gather(*tasks, *self._closing, return_exceptions=True)
        boxes = [sb for q in self._idle.values() for sb in q]
        self._idle.clear()
        await asyncio.gather(*(sb.close() for sb in boxes), return_exceptions=True)
        refs, self._refs = list(self._refs.values()), {}
        for ref in refs:
            await asyncio.to_thread(ref.remove)
            default_janitor().release(ref.id)

    # --- internals ------------------------------------------------------------------------------------------
    async def _start(self, image: str) -> DockerSandbox:
        """A started sandbox; with reuse on, its fresh state recorded (what a restore must get back to)."""
        sb = DockerSandbox(self._box_cfg, image=image, run_id=self.run_id, labels=self._labels)
        await sb.start()
        if self.pool_cfg.reuse:
            from sandboxes.restore import probe

            try:
                sb._fresh = await asyncio.to_thread(probe, sb._client, sb.id)  # type: ignore[attr-defined]
                sb._restore_ref = await self._reference(image, sb)  # type: ignore[attr-defined]
            except BaseException:
                await sb.close()
                raise
        return sb

    async def _reference(self, image: str, sb: DockerSandbox) -> Any:
        """The pristine reference container of `image` (created once, never started; removed at close)."""
        if image not in self._refs:
            from sandboxes.lifecycle import owner_labels
            from sandboxes.overlay import Reference

            labels = owner_labels(self.run_id or sb.run_id, self._box_cfg.ttl) | self._labels
            labels["sandboxes.role"] = "reference"
            ref = await asyncio.to_thread(Reference, sb._client, image, labels)
            if image in self._refs:  # another start made one meanwhile
                await asyncio.to_thread(ref.remove)
            else:
                self._refs[image] = ref
                sb._janitor.hold(ref.id, self.config.docker_host)
        return self._refs[image]

    def _bind(self) -> None:
        loop = asyncio.get_running_loop()
        if self._loop is loop:
            return
        stale = [sb for q in self._idle.values() for sb in q]  # their shell streams belong to the old loop
        self._loop, self._idle, self._filling, self._tasks, self._closing = loop, {}, {}, set(), set()
        self._lent = {}
        for sb in stale:
            self._spawn(sb.close(), closing=True)

    def _spawn(self, coro: Any, *, closing: bool = False) -> None:
        """Run `coro` in the background: fills are cancelled at close, closes are waited for."""
        tasks = self._closing if closing else self._tasks
        task = asyncio.ensure_future(coro)
        tasks.add(task)
        task.add_done_callback(tasks.discard)

    def _want(self, image: str) -> int:
        """Idle sandboxes of `image` worth having: `size`, or (refill "expected") the announced hand-outs."""
        cfg = self.pool_cfg
        return cfg.size if cfg.refill == "always" else min(cfg.size, self._demand.get(image, 0))

    def _refill(self, image: str) -> None:
        if self._closed:
            return
        want = self._want(image) - self._lent.get(image, 0)  # with reuse, what is out may come back restored
        while (
            len(self._idle.get(image, ())) + self._filling.get(image, 0) < want
            and self._filling.get(image, 0) < self.pool_cfg.max_filling
        ):
            self._filling[image] = self._filling.get(image, 0) + 1
            self._spawn(self._fill_one(image))

    async def _fill_one(self, image: str) -> None:
        ok = False
        try:
            try:
                sb = await self._start(image)
            except (SandboxError, OSError):
                self.stats["fill_failed"] += 1  # no retry loop here: the next hand-out tries again
                return
            if self._closed:
                await sb.close()
                return
            self._idle.setdefault(image, deque()).append(sb)
            ok = True
        finally:
            self._filling[image] = self._filling.get(image, 1) - 1
            if ok:
                self._refill(image)


class PooledSandbox:
    """The `Sandbox` protocol over a pool: `start()` acquires, `close()` releases; the rest is the inner box."""

    def __init__(self, pool: WarmPool, image: str, then_expect: int = 0) -> None:
        self._pool, self.image, self._then_expect = pool, image, then_expect
        self._sb: DockerSandbox | None = None
        self.id = f"pooled-{image}"

    @property
    def inner(self) -> DockerSandbox:
        if self._sb is None:
            raise SandboxError("sandbox is not running (start it or use `async with`)", sandbox_id=self.id)
        return self._sb

    async def start(self) -> None:
        if self._sb is None:
            self._sb = await self._pool.acquire(self.image)
            self.id = self._sb.id
            if self._then_expect:
                self._pool.expect(self.image, self._then_expect)

    async def close(self) -> None:
        sb, self._sb = self._sb, None
        if sb is not None:
            await self._pool.release(sb)

    async def exec(
        self,
        cmd: str,
        *,
        timeout: float | None = None,
        cwd: str | None = None,
        env: dict[str, str] | None = None,
    ) -> ExecResult:
        return await self.inner.exec(cmd, timeout=timeout, cwd=cwd, env=env)

    async def exec_once(
        self,
        cmd: str,
        *,
        timeout: float | None = None,
        cwd: str | None = None,
        env: dict[str, str] | None = None,
        output_limit: int | None = None,
    ) -> ExecResult:
        return await self.inner.exec_once(cmd, timeout=timeout, cwd=cwd, env=env, output_limit=output_limit)

    async def read_file(self, path: str) -> bytes:
        return await self.inner.read_file(path)

    async def write_file(self, path: str, data: bytes | str, *, mode: int = 0o644) -> None:
        await self.inner.write_file(path, data, mode=mode)

    async def upload(self, src: str, dst: str) -> None:
        await self.inner.upload(src, dst)

    async def download(self, src: str, dst: str) -> None:
        await self.inner.download(src, dst)

    async def __aenter__(self) -> PooledSandbox:
        await self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()
