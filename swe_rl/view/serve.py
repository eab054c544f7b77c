"""`swe-rl view --serve`: the run folder over HTTP on 127.0.0.1 only (never another interface: the run's files
are not for the network), read-only (GET and HEAD), until Ctrl-C."""

from __future__ import annotations

import functools
import os
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import TextIO

HOST = "127.0.0.1"


class _Quiet(SimpleHTTPRequestHandler):
    def log_message(self, format: str, *args: object) -> None:
        pass


def make_server(root: str | Path, port: int = 0) -> ThreadingHTTPServer:
    handler = functools.partial(_Quiet, directory=str(Path(root).resolve()))
    return ThreadingHTTPServer((HOST, port), handler)


def serve_forever(root: str | Path, index: Path, port: int, out: TextIO) -> None:
    server = make_server(root, port)
    rel = os.path.relpath(index, Path(root).resolve()).replace(os.sep, "/")
    print(f"serving {Path(root).resolve()} on http://{HOST}:{server.server_port}/{rel} (Ctrl-C stops)", file=out,
          flush=True)  # fmt: skip
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        server.server_close()
