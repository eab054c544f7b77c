"""Sandbox images on every sandbox node of a Ray cluster: which node lacks which image, and shipping them there.

Each node's containers run on that node's own Docker engine (its workers' DOCKER_HOST, or the default socket), so
an image built on the driver is not an image on the nodes. `image_report` runs one task pinned to each alive node
that advertises the sandbox resource (NodeAffinitySchedulingStrategy, soft=False) and lists what that node's engine
lacks. `ship_images` sends the missing ones: the source engine's `docker save` stream (the driver's engine when it
has them all, else a node's that has them) cut into chunks that travel through Ray's object store, straight to an
actor pinned on the target node that feeds them to its engine's `docker load`; a few chunks in flight at a time,
so neither side holds an image in memory and the object store stays small. Shared layers travel once per node
(one save of all of a node's missing images). Called by `swe-rl eval` on a cluster (harness.ensure_images) and by
the preflight, which names each node that lacks an image.
"""

from __future__ import annotations

import subprocess
import time
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

CHUNK = 16 << 20  # bytes per object-store chunk of a `docker save` stream
IN_FLIGHT = 4  # chunks sent ahead of the loader's acknowledgements (object store use per target: ~64 MiB)


@dataclass(frozen=True)
class NodeImages:
    node_id: str  # Ray node id (hex)
    address: str  # the node's IP as Ray advertises it
    engine: str  # the node's Docker engine (DOCKER_HOST of its workers, or the default socket)
    missing: tuple[str, ...]  # images its engine lacks
    error: str | None = None  # the engine did not answer (then `missing` is every image)

    def name(self) -> str:
        return f"node {self.address} {self.node_id[:8]} (engine {self.engine})"


def _node_gone() -> tuple[type[BaseException], ...]:
    """Ray's errors for work pinned to a node that is gone (evaluated in an `except`: Ray is imported lazily)."""
    from ray import exceptions as rx

    return (rx.TaskUnschedulableError, rx.ActorUnschedulableError, rx.NodeDiedError, rx.ActorDiedError,
            rx.ActorUnavailableError, rx.WorkerCrashedError)  # fmt: skip


def _engine_name() -> str:
    import os

    return os.environ.get("DOCKER_HOST", "unix:///var/run/docker.sock")


def local_missing(images: list[str]) -> tuple[str, list[str]]:
    """(engine, the images this process's engine lacks); runs on a node (or the driver)."""
    import docker

    client = docker.from_env(timeout=30)
    try:
        tags = {t for img in client.images.list() for t in img.tags}
        missing = []
        for image in images:
            if image in tags or f"{image}:latest" in tags:
                continue
            try:
                client.images.get(image)  # by id or digest
            except docker.errors.ImageNotFound:
                missing.append(image)
        return _engine_name(), missing
    finally:
        client.close()


def _probe(images: list[str]) -> tuple[str, list[str] | None, str | None]:
    try:
        engine, missing = local_missing(images)
        return engine, missing, None
    except Exception as e:  # no engine on that node: every image is missing there
        return _engine_name(), None, f"{type(e).__name__}: {e}"


def sandbox_nodes(resource: str | None = "sandbox") -> list[dict[str, Any]]:
    import ray

    return [
        n for n in ray.nodes() if n.get("Alive") and (resource is None or resource in n.get("Resources", {}))
    ]


def _pinned(node_id: str) -> dict[str, Any]:
    from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

    return {"scheduling_strategy": NodeAffinitySchedulingStrategy(node_id, soft=False)}


def image_report(
    images: list[str], resource: str | None = "sandbox", timeout: float = 300
) -> list[NodeImages]:
    """What every alive node advertising `resource` lacks (Ray must be initialized)."""
    import ray

    probe = ray.remote(num_cpus=0, max_retries=0)(_probe)
    nodes = sandbox_nodes(resource)
    refs = [probe.options(**_pinned(n["NodeID"])).remote(list(images)) for n in nodes]
    deadline = time.monotonic() + timeout
    out = []
    for n, ref in zip(nodes, refs, strict=True):
        try:
            engine, missing, error = ray.get(ref, timeout=max(deadline - time.monotonic(), 1.0))
        except (
            _node_gone()
        ):  # listed alive, gone since (Ray marks a lost node dead seconds later): no node to fill
            continue
        lacks = tuple(images) if missing is None else tuple(missing)
        out.append(NodeImages(n["NodeID"], n.get("NodeManagerAddress", "?"), engine, lacks, error))
    return out


class ImageIO:
    """Actor body on one node: `save` streams its engine's `docker save`; `begin`/`feed`/`end` feed a `docker load`
    (the Docker CLI, which honours the node's DOCKER_HOST as the workers' SDK does)."""

    def __init__(self) -> None:
        self._load: subprocess.Popen | None = None

    def save(self, images: list[str]) -> Iterator[bytes]:
        yield from save_chunks(images)

    def begin(self) -> None:
        self._load = subprocess.Popen(["docker", "load", "-q"], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                      stderr=subprocess.STDOUT)  # fmt: skip

    def feed(self, chunk: bytes) -> int:
        assert self._load is not None and self._load.stdin is not None
        self._load.stdin.write(chunk)
        return len(chunk)

    def end(self) -> str:
        assert self._load is not None
        out, _ = self._load.communicate()
        if self._load.returncode != 0:
            raise RuntimeError(
                f"docker load failed ({self._load.returncode}): {out.decode(errors='replace')[-500:]}"
            )
        return out.decode(errors="replace")


def save_chunks(images: list[str]) -> Iterator[bytes]:
    """This engine's `docker save` of `images` (one tar, shared layers once) in CHUNK-sized pieces."""
    proc = subprocess.Popen(["docker", "save", *images], stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    assert proc.stdout is not None
    try:
        while chunk := proc.stdout.read(CHUNK):
            yield chunk
    finally:
        proc.stdout.close()
        err = proc.stderr.read().decode(errors="replace") if proc.stderr else ""
        if proc.wait() != 0:
            raise RuntimeError(f"docker save {images} failed ({proc.returncode}): {err[-500:]}")


def _send(chunks: Iterator[Any], loader: Any) -> int:
    """Feed `chunks` (bytes or ObjectRefs) to `loader` with at most IN_FLIGHT unacknowledged; returns bytes sent."""
    import ray

    pending, sent = [], 0
    for chunk in chunks:
        ref = ray.put(chunk) if isinstance(chunk, bytes) else chunk
        pending.append(loader.feed.remote(ref))
        if len(pending) >= IN_FLIGHT:
            sent += ray.get(pending.pop(0))
    return sent + sum(ray.get(pending))


def ship_images(
    images: list[str], resource: str | None = "sandbox", echo: Any = print
) -> tuple[list[NodeImages], list[NodeImages]]:
    """Load every image a sandbox node lacks onto it; returns (report before, report after)."""
    import ray

    before = image_report(images, resource)
    chunks: Iterator[Any]
    lacking = [n for n in before if n.missing and n.error is None]
    if not lacking:
        return before, before
    actor: Any = ray.remote(num_cpus=0, max_restarts=0)(ImageIO)
    _, driver_missing = _probe(images)[:2]
    for node in lacking:
        need = list(node.missing)
        if driver_missing is not None and not set(need) & set(driver_missing):
            source, chunks = "the driver's engine", save_chunks(need)
        else:
            holder = next((n for n in before if n.error is None and not set(need) & set(n.missing)), None)
            if holder is None:
                echo(f"{node.name()}: lacks {need}, and no engine here or on a node has them all")
                continue
            saver = actor.options(**_pinned(holder.node_id)).remote()
            source = holder.name()
            chunks = saver.save.options(num_returns="streaming").remote(need)
        try:
            loader = actor.options(**_pinned(node.node_id)).remote()
            ray.get(loader.begin.remote())
            sent = _send(chunks, loader)
            ray.get(loader.end.remote())
        except _node_gone() as e:  # the node (or the holder) was lost mid-copy: its episodes run elsewhere
            echo(f"{node.name()}: not loaded, a node was lost during the copy ({type(e).__name__})")
            continue
        echo(f"{node.name()}: loaded {len(need)} image(s) from {source} ({sent / 2**20:.0f} MiB)")
    return before, image_report(images, resource)


def node_image_checks(images: list[str], resource: str | None = "sandbox") -> list[tuple[str, bool, str]]:
    """(name, ok, detail) per sandbox node for a preflight: each node that lacks an image is named with what it lacks."""
    if not images:
        return []
    nodes = image_report(images, resource)
    if not nodes:
        return [(f"sandbox images on nodes with {resource!r}", False, "no alive node advertises it")]
    out = []
    for n in nodes:
        have = len(images) - len(n.missing)
        detail = f"{have}/{len(images)} present"
        if n.error:
            detail += f"; engine unreachable: {n.error}"
        elif n.missing:
            detail += f"; missing {list(n.missing[:3])}{' ...' if len(n.missing) > 3 else ''} (swe-rl eval ships them)"
        out.append((f"sandbox images on {n.name()}", not n.missing, detail))
    return out


def resource_of(sandbox: dict[str, Any], default: str | None = "sandbox") -> str | None:
    """The Ray resource of the nodes a sandbox config's containers run on: a `ray` backend's `resource`, else
    `default` (the rollout pool's sandbox nodes; None = every node, as OpenRLHF's engines run them anywhere)."""
    if sandbox.get("backend") == "ray":
        return sandbox.get("resource", "sandbox")
    return default


def ensure_on_nodes(images: list[str], sandbox: dict[str, Any], address: str, echo: Any = print) -> None:
    """`swe-rl eval` on a cluster (Ray joined, or joined here and left after): load each sandbox node's missing images.
    A node that still lacks one is named; its episodes then fail as image_missing (rerun with retry_errors)."""
    import ray

    from sandboxes.raystart import connect_ray

    # run_eval has joined already (False: nothing to leave); another caller joins here and leaves after
    joined = connect_ray(address, purpose="images", say=echo, log_to_driver=False, configure_logging=False)
    try:
        _, after = ship_images(sorted(set(images)), resource_of(sandbox), echo=echo)
        for n in after:
            if n.missing:
                echo(f"{n.name()}: still lacks {list(n.missing[:3])}{' ...' if len(n.missing) > 3 else ''}")
    finally:
        if joined:
            ray.shutdown()
