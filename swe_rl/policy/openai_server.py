"""A minimal OpenAI-compatible /v1/completions server over any `Policy` (token ids in, token ids + logprobs out).

Serves the tiny local model in tests of `OpenAIPolicy`, and is a stand-in endpoint for demos. Requests are handled
by a threading HTTP server; generation runs on one background asyncio loop, so concurrent requests still batch in
`HFLocalPolicy`. `drop_first=N` closes the first N connections without answering (to exercise client retries).
`max_model_len=N` makes it answer like vLLM's server with that context: GET /v1/models reports it (unless
`report_max_len=False`), and a prompt + max_tokens over it gets vLLM's HTTP 400 "maximum context length" error.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from swe_rl.policy.base import Policy, SamplingParams, truncation_fields


class PolicyServer:
    def __init__(self, policy: Policy, *, host: str = "127.0.0.1", port: int = 0, drop_first: int = 0,
                 max_model_len: int | None = None, report_max_len: bool = True, model_name: str = "swe-rl"):  # fmt: skip
        self.policy = policy
        self.max_model_len = max_model_len
        self.report_max_len = report_max_len
        self.served_name = model_name
        self.drop_remaining = drop_first
        self._lock = threading.Lock()
        self.loop = asyncio.new_event_loop()
        self._loop_thread = threading.Thread(target=self.loop.run_forever, daemon=True)
        self.httpd = ThreadingHTTPServer((host, port), self._handler_class())
        self.httpd.daemon_threads = True
        self._http_thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)

    @property
    def base_url(self) -> str:
        host, port = self.httpd.server_address[:2]
        host = host.decode() if isinstance(host, bytes) else host
        return f"http://{host}:{port}/v1"

    def start(self) -> PolicyServer:
        self._loop_thread.start()
        self._http_thread.start()
        return self

    def stop(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()
        with contextlib.suppress(Exception):  # close the policy (its worker task) on its own loop first
            asyncio.run_coroutine_threadsafe(self._shutdown(), self.loop).result(timeout=30)
        self.loop.call_soon_threadsafe(self.loop.stop)
        self._loop_thread.join(timeout=10)

    async def _shutdown(self) -> None:
        close = getattr(self.policy, "close", None)
        if close is not None:
            await close()
        others = [t for t in asyncio.all_tasks() if t is not asyncio.current_task()]
        for t in others:
            t.cancel()
        await asyncio.gather(*others, return_exceptions=True)

    def __enter__(self) -> PolicyServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def _should_drop(self) -> bool:
        with self._lock:
            if self.drop_remaining > 0:
                self.drop_remaining -= 1
                return True
            return False

    def complete(self, body: dict[str, Any]) -> dict[str, Any]:
        prompt = body.get("prompt")
        if not isinstance(prompt, list) or not all(isinstance(t, int) for t in prompt):
            raise ValueError("prompt: expected a list of token ids")
        want = int(body.get("max_tokens", 16))
        if self.max_model_len is not None and len(prompt) + want > self.max_model_len:
            raise ValueError(
                f"This model's maximum context length is {self.max_model_len} tokens. However, you requested "
                f"{len(prompt) + want} tokens ({len(prompt)} in the messages, {want} in the completion). "
                "Please reduce the length of the messages or completion."
            )  # vLLM's wording (its server answers HTTP 400 with it)
        sampling = SamplingParams(
            temperature=float(body.get("temperature", 1.0)),
            **truncation_fields(body),  # top_p, top_k, min_p; a bad one is a ValueError naming it
            max_new_tokens=int(body.get("max_tokens", 16)),
            stop_token_ids=tuple(int(t) for t in body.get("stop_token_ids") or ()),
            seed=body.get("seed"),
        )
        fut = asyncio.run_coroutine_threadsafe(self.policy.generate(prompt, sampling), self.loop)
        c = fut.result()
        choice = {
            "index": 0,
            "text": c.text,
            "finish_reason": c.finish_reason,
            "token_ids": c.token_ids if body.get("return_token_ids") else None,
            "logprobs": {"tokens": [f"token_id:{t}" for t in c.token_ids], "token_logprobs": c.logprobs},
        }
        usage = {"prompt_tokens": len(prompt), "completion_tokens": len(c.token_ids)}
        return {
            "object": "text_completion",
            "model": body.get("model", ""),
            "choices": [choice],
            "usage": usage,
        }

    def _handler_class(self) -> type[BaseHTTPRequestHandler]:
        server = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: Any) -> None:  # quiet
                return

            def do_GET(self) -> None:
                if self.path.rstrip("/") != "/v1/models":
                    return self._reply(404, {"error": f"unknown path {self.path}"})
                entry: dict[str, Any] = {"id": server.served_name, "object": "model", "owned_by": "swe-rl"}
                if server.max_model_len is not None and server.report_max_len:
                    entry["max_model_len"] = server.max_model_len
                return self._reply(200, {"object": "list", "data": [entry]})

            def do_POST(self) -> None:
                if server._should_drop():
                    self.close_connection = True
                    self.connection.close()
                    return
                if self.path.rstrip("/") != "/v1/completions":
                    return self._reply(404, {"error": f"unknown path {self.path}"})
                try:
                    body = json.loads(self.rfile.read(int(self.headers.get("Content-Length", 0))))
                    return self._reply(200, server.complete(body))
                except (ValueError, TypeError) as e:
                    return self._reply(400, {"error": str(e)})

            def _reply(self, status: int, obj: dict[str, Any]) -> None:
                data = json.dumps(obj).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

        return Handler
