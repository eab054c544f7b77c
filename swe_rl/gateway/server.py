"""`Gateway`: an OpenAI-compatible HTTP endpoint over any `Policy` that records every session's tokens.

Routes (also under /s/<session>/..., or with an `X-Session-Id` header; otherwise the session is "default"):
  POST /v1/chat/completions   messages -> incremental template (swe_rl.gateway.session) -> policy -> reply
  POST /v1/completions        prompt as text or token ids; a prompt extending the previous call is not re-encoded
  GET  /v1/models             the one served model
  GET  /sessions/<id>         the session assembled (trajectory or per-call rows, reason, drift) as JSON
The HTTP side is the threading server of swe_rl.policy.openai_server (generation on one asyncio loop, so
concurrent sessions batch in HFLocalPolicy). Binds 127.0.0.1 unless told otherwise.
"""

from __future__ import annotations

import json
import threading
import time
import uuid
from dataclasses import asdict
from http.server import BaseHTTPRequestHandler
from typing import Any

from swe_rl.agent.chat import encode
from swe_rl.gateway.session import Session
from swe_rl.policy.base import Completion, ContextLengthExceeded, Policy, SamplingParams, truncation_fields
from swe_rl.policy.openai_server import PolicyServer

DEFAULT_EXTRA_STOP = "<|endoftext|>"  # Qwen's end-of-text: ends a reply like the turn end does


class RequestError(ValueError):
    def __init__(self, message: str, code: str = "invalid_request_error", status: int = 400):
        super().__init__(message)
        self.code, self.status = code, status


class Gateway(PolicyServer):
    def __init__(self, policy: Policy, tokenizer: Any, *, model_name: str = "swe-rl", host: str = "127.0.0.1",
                 port: int = 0, max_context_tokens: int = 4096, default_max_tokens: int = 512,
                 turn_end_token: str = "<|im_end|>", template_kwargs: dict[str, Any] | None = None):  # fmt: skip
        self.tokenizer = tokenizer
        self.model_name = model_name
        self.max_context_tokens = max_context_tokens
        self.default_max_tokens = default_max_tokens
        self.turn_end_token = turn_end_token
        self.template_kwargs = template_kwargs
        self.sessions: dict[str, Session] = {}
        self._sessions_lock = threading.Lock()
        super().__init__(policy, host=host, port=port)

    @property
    def root_url(self) -> str:
        return self.base_url.removesuffix("/v1")

    def session_url(self, session_id: str) -> str:
        """The OpenAI base URL an agent of this session points at."""
        return f"{self.root_url}/s/{session_id}/v1"

    def session(self, session_id: str) -> Session:
        with self._sessions_lock:
            if session_id not in self.sessions:
                self.sessions[session_id] = Session(session_id, self.tokenizer, turn_end_token=self.turn_end_token,
                                                    template_kwargs=self.template_kwargs)  # fmt: skip
            return self.sessions[session_id]

    def pop(self, session_id: str) -> Session | None:
        with self._sessions_lock:
            return self.sessions.pop(session_id, None)

    # --- generation --------------------------------------------------------------------------------------------
    def _sampling(self, body: dict[str, Any], prompt_len: int) -> SamplingParams:
        if int(body.get("n", 1) or 1) != 1:
            raise RequestError("n > 1 is not supported (one recorded completion per call)")
        if body.get("stream"):
            raise RequestError("stream=true is not supported")
        room = self.max_context_tokens - prompt_len
        if room <= 0:
            raise RequestError(f"the prompt has {prompt_len} tokens, the context holds {self.max_context_tokens}",
                               code="context_length_exceeded")  # fmt: skip
        want = body.get("max_completion_tokens") or body.get("max_tokens") or self.default_max_tokens
        stop_ids = self._stop_ids(body.get("stop") or [])
        stop_ids |= {int(t) for t in body.get("stop_token_ids") or ()}
        temperature = body.get("temperature")
        try:
            truncation = truncation_fields(body)  # top_p, top_k, min_p (vLLM's request fields)
        except ValueError as e:
            raise RequestError(str(e)) from None
        return SamplingParams(
            temperature=1.0 if temperature is None else float(temperature),
            **truncation,
            max_new_tokens=min(int(want), room),
            stop_token_ids=tuple(sorted(stop_ids)),
            seed=body.get("seed"),
        )

    def _stop_ids(self, requested: str | list[str]) -> set[int]:
        """The turn end and `<|endoftext|>` (Qwen's other end of text) always stop; a requested stop string must be
        one token of this tokenizer (the policies stop on token ids): a longer one is refused, never dropped."""
        ids = {encode(self.tokenizer, self.turn_end_token)[0]}
        eot = encode(self.tokenizer, DEFAULT_EXTRA_STOP)
        if len(eot) == 1 and self.tokenizer.decode(eot) == DEFAULT_EXTRA_STOP:
            ids.add(eot[0])
        for stop in [requested] if isinstance(requested, str) else list(requested):
            toks = encode(self.tokenizer, str(stop))
            if len(toks) != 1:
                raise RequestError(
                    f"stop: {stop!r} is {len(toks)} tokens for this tokenizer; the gateway stops on single "
                    "tokens only (send a one-token stop string or stop_token_ids)", code="unsupported_stop"
                )  # fmt: skip
            ids.add(toks[0])
        return ids

    def _generate(self, prompt_ids: list[int], sampling: SamplingParams) -> Completion:
        import asyncio

        return asyncio.run_coroutine_threadsafe(
            self.policy.generate(prompt_ids, sampling), self.loop
        ).result()

    def chat(self, session_id: str, body: dict[str, Any]) -> dict[str, Any]:
        messages = body.get("messages")
        if not isinstance(messages, list) or not messages or not all(isinstance(m, dict) for m in messages):
            raise RequestError("messages: expected a non-empty list of message objects")
        kw = body.get("chat_template_kwargs") or {}
        if not isinstance(kw, dict):
            raise RequestError('chat_template_kwargs: expected an object, e.g. {"enable_thinking": false}')
        sess = self.session(session_id)
        with sess.lock:  # one call at a time per session: the next prompt depends on this one's reply
            ids, mask, lps, plan = sess.prompt_for(messages, body.get("tools"), kw)
            c = self._generate(ids, self._sampling(body, len(ids)))
            call = sess.record(plan, (ids, mask, lps), c)
        message: dict[str, Any] = {"role": "assistant", "content": call.reply}
        finish = c.finish_reason
        if call.tool_calls:
            message["tool_calls"], finish = call.tool_calls, "tool_calls"
        choice: dict[str, Any] = {
            "index": 0,
            "message": message,
            "finish_reason": finish,
            "token_ids": c.token_ids,
        }
        if body.get("logprobs"):
            choice["logprobs"] = {"content": [
                {"token": self.tokenizer.decode([t]), "logprob": lp, "bytes": None, "top_logprobs": []}
                for t, lp in zip(c.token_ids, c.logprobs, strict=True)
            ]}  # fmt: skip
        return self._envelope("chat.completion", choice, len(ids), len(c.token_ids))

    def text_complete(self, session_id: str, body: dict[str, Any]) -> dict[str, Any]:
        """/v1/completions: token-id prompts are used as is; a text prompt that extends the previous call's
        prompt + completion text gets only its new suffix encoded (the recorded tokens are kept)."""
        prompt = body.get("prompt")
        if isinstance(prompt, list) and len(prompt) == 1 and isinstance(prompt[0], (str, list)):
            prompt = prompt[0]
        sess = self.session(session_id)
        with sess.lock:
            if isinstance(prompt, list) and all(isinstance(t, int) for t in prompt):
                ids = list(prompt)
            elif isinstance(prompt, str):
                ids = self._extend_text(sess, prompt)
            else:
                raise RequestError("prompt: expected a string or a list of token ids")
            c = self._generate(ids, self._sampling(body, len(ids)))
            sess.text_calls.append((prompt if isinstance(prompt, str) else None, ids, c))
        choice = {"index": 0, "text": c.text, "finish_reason": c.finish_reason, "token_ids": c.token_ids,
                  "logprobs": {"tokens": [self.tokenizer.decode([t]) for t in c.token_ids],
                               "token_logprobs": c.logprobs}}  # fmt: skip
        return self._envelope("text_completion", choice, len(ids), len(c.token_ids))

    def _extend_text(self, sess: Session, prompt: str) -> list[int]:
        for text, ids, c in reversed(sess.text_calls):
            if text is not None and prompt.startswith(text + c.text):
                return ids + c.token_ids + encode(self.tokenizer, prompt[len(text + c.text) :])
        return encode(self.tokenizer, prompt)

    def _envelope(
        self, kind: str, choice: dict[str, Any], n_prompt: int, n_completion: int
    ) -> dict[str, Any]:
        return {
            "id": f"swe-rl-{uuid.uuid4().hex[:16]}", "object": kind, "created": int(time.time()),
            "model": self.model_name, "choices": [choice],
            "usage": {"prompt_tokens": n_prompt, "completion_tokens": n_completion,
                      "total_tokens": n_prompt + n_completion},
        }  # fmt: skip

    def describe(self, session_id: str) -> dict[str, Any]:
        sess = self.sessions.get(session_id)
        if sess is None:
            raise RequestError(f"no session {session_id!r}", code="not_found", status=404)
        with sess.lock:
            a = sess.assemble()
        return {
            "session": session_id, "assembled": a.trajectory is not None, "reason": a.reason, "drift": a.drift,
            "trajectory": asdict(a.trajectory) if a.trajectory else None, "rows": [asdict(r) for r in a.rows],
        }  # fmt: skip

    # --- HTTP ---------------------------------------------------------------------------------------------------
    def _handler_class(self) -> type[BaseHTTPRequestHandler]:
        gw = self
        base: Any = super()._handler_class()  # PolicyServer's handler: quiet logs and its JSON `_reply`

        class Handler(base):
            protocol_version = "HTTP/1.1"  # keep-alive: agents' HTTP clients reuse connections

            def _route(self) -> tuple[str, str]:
                path = self.path.split("?", 1)[0].rstrip("/")
                sid = self.headers.get("X-Session-Id") or "default"
                if path.startswith("/s/"):
                    sid, _, rest = path[3:].partition("/")
                    path = "/" + rest
                return sid, path

            def do_GET(self) -> None:
                _, path = self._route()
                if path == "/v1/models":
                    return self._reply(200, {"object": "list", "data": [
                        {"id": gw.model_name, "object": "model", "owned_by": "swe-rl"}]})  # fmt: skip
                if path.startswith("/sessions/"):
                    return self._call(lambda: gw.describe(path.removeprefix("/sessions/")))
                return self._reply(404, _error(f"unknown path {self.path}", "not_found"))

            def do_POST(self) -> None:
                sid, path = self._route()
                try:
                    body = json.loads(self.rfile.read(int(self.headers.get("Content-Length", 0))) or b"{}")
                except ValueError as e:
                    return self._reply(400, _error(f"body is not JSON: {e}"))
                if path == "/v1/chat/completions":
                    return self._call(lambda: gw.chat(sid, body))
                if path == "/v1/completions":
                    return self._call(lambda: gw.text_complete(sid, body))
                return self._reply(404, _error(f"unknown path {self.path}", "not_found"))

            def _call(self, fn: Any) -> None:
                try:
                    return self._reply(200, fn())
                except RequestError as e:
                    return self._reply(e.status, _error(str(e), e.code))
                # the backend refused the prompt as longer than its context: a 400 for the agent, not a 500
                except ContextLengthExceeded as e:
                    return self._reply(400, _error(str(e), "context_length_exceeded"))
                except (ValueError, TypeError) as e:
                    return self._reply(400, _error(str(e)))
                except Exception as e:  # the policy failed: the agent sees a server error and may retry
                    return self._reply(500, _error(f"{type(e).__name__}: {e}", "server_error"))

        return Handler


def _error(message: str, code: str = "invalid_request_error") -> dict[str, Any]:
    return {"error": {"message": message, "type": code, "code": code}}
