"""Docker engine plumbing shared by DockerSandbox and the CLI: the client, and the shell's socket transport."""

from __future__ import annotations

import asyncio
import contextlib
import os
import socket
from typing import Any

from sandboxes.base import EngineUnreachableError
from sandboxes.shell import FrameDemux


def docker_client(docker_host: str | None = None) -> Any:
    """A docker SDK client, or EngineUnreachableError naming the engine and the cause."""
    import docker

    try:
        client = docker.DockerClient(base_url=docker_host) if docker_host else docker.from_env()
        client.ping()
        return client
    except Exception as e:
        where = docker_host or os.environ.get("DOCKER_HOST", "unix:///var/run/docker.sock")
        raise EngineUnreachableError(f"Docker engine at {where} is unreachable", cause=e) from e


class SocketTransport:
    """The attached exec stream of the shell: asyncio over the hijacked socket, demultiplexing Docker frames."""

    def __init__(self, sock_io: Any, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self._sock_io = sock_io  # keeps the SDK's response object (and so the socket) alive
        self._reader, self._writer = reader, writer
        self._demux = FrameDemux()

    async def read(self) -> bytes:
        while True:
            data = await self._reader.read(1 << 20)
            if not data:
                return b""
            out = b"".join(payload for _, payload in self._demux.feed(data))
            if out:
                return out

    async def write(self, data: bytes) -> None:
        self._writer.write(data)
        await self._writer.drain()

    def close(self) -> None:
        with contextlib.suppress(Exception):
            self._writer.close()
        with contextlib.suppress(Exception):
            self._sock_io.close()


async def open_exec_transport(sock_io: Any) -> SocketTransport:
    """Wrap the hijacked socket of an attached exec (unix or plain TCP engine) for the event loop."""
    raw: socket.socket = sock_io._sock
    raw.setblocking(False)
    if raw.family == socket.AF_UNIX:
        reader, writer = await asyncio.open_unix_connection(sock=raw, limit=1 << 22)
    else:
        reader, writer = await asyncio.open_connection(sock=raw, limit=1 << 22)
    return SocketTransport(sock_io, reader, writer)
