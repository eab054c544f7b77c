"""`OpenAIPolicy`: token-in/token-out over an OpenAI-compatible /v1/completions server (vLLM, SGLang, ours).

The prompt is sent as token ids; the reply's token ids are read from `choices[0].token_ids` (vLLM
`return_token_ids`) or from `logprobs.tokens` as "token_id:N" strings (vLLM `return_tokens_as_token_ids`).
Logprobs are whatever the server returns for the sampled token: run vLLM with `--logprobs-mode processed_logprobs`
to get them after temperature, as the Policy protocol defines. No entropy (servers return no full distribution).

A semaphore caps in-flight requests; connection errors, timeouts, 429 and 5xx are retried with exponential backoff.
Other HTTP errors and malformed replies raise `PolicyServerError` at once (an infrastructure failure), except a
prompt the server refuses as too long (HTTP 400 "maximum context length", vLLM's wording, or the OpenAI code
`context_length_exceeded`): `ContextLengthError`, which the agent loop ends as `context_limit`.
`cap_context(n)` reads the served context (`max_model_len` in vLLM's GET /v1/models) and returns min(n, served),
warning once when the agent's budget is larger than what the server serves.
"""

from __future__ import annotations

import asyncio
import logging
import random
from typing import Any

from swe_rl.policy.base import CONTEXT_MARKERS, Completion, ContextLengthExceeded, SamplingParams

log = logging.getLogger(__name__)

RETRY_STATUS = {408, 429, 500, 502, 503, 504}


class PolicyServerError(RuntimeError):
    """The completions server failed for good (after retries) or answered something unusable."""


class ContextLengthError(PolicyServerError, ContextLengthExceeded):
    """The server refused the prompt as longer than its context (not an infrastructure failure)."""


def check_server(
    base_url: str,
    model: str,
    api_key: str | None = None,
    *,
    timeout_s: float = 10.0,
    fields: tuple[str, str] = ("policy.base_url", "policy.model"),
) -> None:
    """Before any episode: a server answers GET <base_url>/models and, where it lists its models, serves `model`.
    Raises ValueError naming the setting (`fields`: the URL's and the model's); a server without /models passes."""
    import time

    import httpx

    url_field, model_field = fields
    url = base_url.rstrip("/") + "/models"
    headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
    deadline, problem = time.monotonic() + timeout_s, ""
    while True:
        try:
            resp = httpx.get(url, headers=headers, timeout=min(5.0, timeout_s))
            break
        except (httpx.TransportError, httpx.TimeoutException) as e:
            problem = f"{type(e).__name__}: {e}"
        if time.monotonic() > deadline:
            raise ValueError(
                f"{url_field} {base_url}: no server answers GET {url} ({problem}); start the server first "
                "(eval/README.md) or correct the URL"
            )
        time.sleep(1.0)
    if resp.status_code in (401, 403):
        raise ValueError(f"{url_field} {base_url}: the server refused the key (HTTP {resp.status_code})")
    if resp.status_code != 200:
        return  # no /models: the first completion says more
    try:
        served = [m.get("id") for m in resp.json().get("data", []) if isinstance(m, dict)]
    except (ValueError, AttributeError):
        return
    if served and model not in served:
        raise ValueError(
            f"{model_field} {model!r}: not served at {base_url} (it serves: {', '.join(map(str, served))})"
        )


class OpenAIPolicy:
    def __init__(
        self,
        base_url: str,
        model: str,
        *,
        api_key: str | None = None,
        max_concurrency: int = 64,
        max_retries: int = 5,
        backoff_s: float = 0.5,
        max_backoff_s: float = 16.0,
        request_timeout_s: float = 600.0,
        extra_body: dict[str, Any] | None = None,
    ):
        if max_concurrency < 1:
            raise ValueError(f"max_concurrency={max_concurrency}: expected >= 1")
        self.url = base_url.rstrip("/") + "/completions"
        self.model = model
        self.headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
        self.max_concurrency = max_concurrency
        self.max_retries = max_retries
        self.backoff_s = backoff_s
        self.max_backoff_s = max_backoff_s
        self.request_timeout_s = request_timeout_s
        self.extra_body = dict(extra_body or {})
        self.served_max_len: int | None = None  # from GET /v1/models (max_model_len), once read
        self._served_read = False
        self._loop: asyncio.AbstractEventLoop | None = None
        self._sem: asyncio.Semaphore | None = None
        self._client: Any = None
        self.stats = {"requests": 0, "retries": 0}

    def request_body(self, prompt_ids: list[int], sampling: SamplingParams) -> dict[str, Any]:
        body: dict[str, Any] = {
            "model": self.model,
            "prompt": list(prompt_ids),
            "max_tokens": sampling.max_new_tokens,
            "temperature": sampling.temperature,
            "top_p": sampling.top_p,
            "logprobs": 1,
            "stop_token_ids": list(sampling.stop_token_ids),
            "skip_special_tokens": False,
            "include_stop_str_in_output": True,
            "return_tokens_as_token_ids": True,
            "return_token_ids": True,
        }
        if sampling.seed is not None:
            body["seed"] = sampling.seed
        if sampling.top_k > 0:
            body["top_k"] = sampling.top_k
        if sampling.min_p > 0:
            body["min_p"] = sampling.min_p
        body.update(self.extra_body)
        body.update(dict(sampling.extra_body))
        return body

    async def cap_context(self, requested: int) -> int:
        """min(requested, the served context length); warns once when the budget exceeds what is served."""
        if not self._served_read:
            self._served_read = True
            self.served_max_len = await self._read_served_max_len()
        served = self.served_max_len
        if served is None or served >= requested:
            return requested
        if not getattr(self, "_warned", False):
            self._warned = True
            log.warning(
                "agent max_context_tokens=%d exceeds the served context of %s (max_model_len=%d): capped to %d",
                requested, self.model, served, served,
            )  # fmt: skip
        return served

    async def _read_served_max_len(self) -> int | None:
        import httpx

        self._ensure_client()
        url = self.url.removesuffix("/completions") + "/models"
        try:
            resp = await self._client.get(url)
            models = resp.json().get("data", []) if resp.status_code == 200 else []
        except (httpx.HTTPError, ValueError, AttributeError):
            return None  # a server without /v1/models: the 400 "maximum context length" path still holds
        entry = next((m for m in models if m.get("id") == self.model), models[0] if models else {})
        value = entry.get("max_model_len") if isinstance(entry, dict) else None
        return int(value) if isinstance(value, int) and value > 0 else None

    def _ensure_client(self) -> None:
        import httpx

        loop = asyncio.get_running_loop()
        if self._loop is not loop:  # semaphores and connection pools belong to one event loop
            self._loop = loop
            self._sem = asyncio.Semaphore(self.max_concurrency)
            limits = httpx.Limits(
                max_connections=self.max_concurrency, max_keepalive_connections=self.max_concurrency
            )
            self._client = httpx.AsyncClient(
                timeout=self.request_timeout_s, limits=limits, headers=self.headers
            )

    async def generate(self, prompt_ids: list[int], sampling: SamplingParams) -> Completion:
        import httpx

        self._ensure_client()
        assert self._sem is not None
        body = self.request_body(prompt_ids, sampling)
        async with self._sem:
            for attempt in range(self.max_retries + 1):
                self.stats["requests"] += 1
                try:
                    resp = await self._client.post(self.url, json=body)
                except (httpx.TransportError, httpx.TimeoutException) as e:
                    problem = f"{type(e).__name__}: {e}"
                else:
                    if resp.status_code == 200:
                        return parse_completion(resp.json())
                    if resp.status_code == 400 and any(m in resp.text for m in CONTEXT_MARKERS):
                        raise ContextLengthError(f"POST {self.url}: HTTP 400: {resp.text[:500]}")
                    if resp.status_code not in RETRY_STATUS:
                        raise PolicyServerError(
                            f"POST {self.url}: HTTP {resp.status_code}: {resp.text[:500]}"
                        )
                    problem = f"HTTP {resp.status_code}"
                if attempt == self.max_retries:
                    raise PolicyServerError(
                        f"POST {self.url}: gave up after {attempt + 1} attempts ({problem})"
                    )
                self.stats["retries"] += 1
                delay = min(self.max_backoff_s, self.backoff_s * 2**attempt) * (0.5 + random.random() / 2)
                await asyncio.sleep(delay)
        raise AssertionError("unreachable")

    async def close(self) -> None:
        if self._client is not None:
            await self._client.aclose()
            self._client, self._loop = None, None


def _token_id(tok: Any) -> int:
    if isinstance(tok, int):
        return tok
    if isinstance(tok, str) and tok.startswith("token_id:"):
        return int(tok[len("token_id:") :])
    raise PolicyServerError(
        f"reply token {tok!r}: expected 'token_id:N' (start vLLM with return_tokens_as_token_ids)"
    )


def parse_completion(data: dict[str, Any]) -> Completion:
    """An OpenAI completions JSON reply -> Completion (token ids, logprobs, text, finish reason)."""
    try:
        choice = data["choices"][0]
    except (KeyError, IndexError, TypeError):
        raise PolicyServerError(f"reply has no choices: {str(data)[:300]}") from None
    lp = choice.get("logprobs") or {}
    logprobs = [float(x) if x is not None else 0.0 for x in (lp.get("token_logprobs") or [])]
    if choice.get("token_ids") is not None:
        ids = [int(t) for t in choice["token_ids"]]
    else:
        ids = [_token_id(t) for t in (lp.get("tokens") or [])]
    if len(logprobs) != len(ids):
        raise PolicyServerError(f"reply has {len(ids)} tokens but {len(logprobs)} logprobs")
    finish = "stop" if choice.get("finish_reason") == "stop" else "length"
    return Completion(ids, logprobs, choice.get("text") or "", finish, None)
