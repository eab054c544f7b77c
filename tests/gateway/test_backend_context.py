"""The gateway over a served backend (`--backend openai`) whose context is smaller than the gateway's budget: the
backend's HTTP 400 "maximum context length" reaches the agent as a 400 context_length_exceeded, not as a 500
server error that agents retry and episodes count as infrastructure (issue 23, found against vLLM's real server;
tests/vllm/test_qwen_server.py does it there). The backend here is our completions server answering like vLLM's."""

from __future__ import annotations

from swe_rl.gateway.server import Gateway
from swe_rl.policy.openai import OpenAIPolicy
from swe_rl.policy.openai_server import PolicyServer
from swe_rl.policy.scripted import ReplayPolicy
from tests.servers import http_json


def _post(url: str, body: dict) -> tuple[int, dict]:
    return http_json(url, body, timeout=60)


def test_backend_context_limit_is_a_400_for_the_agent(qwen25_tokenizer):
    tok = qwen25_tokenizer
    backend = PolicyServer(ReplayPolicy(tok, ["Done."]), max_model_len=256).start()
    try:
        with Gateway(
            OpenAIPolicy(backend.base_url, "swe-rl", max_retries=0), tok, max_context_tokens=4096
        ) as gw:
            sys_msg = {"role": "system", "content": "You are an agent."}
            ok = [sys_msg, {"role": "user", "content": "Fix calc.py."}]
            status, reply = _post(
                gw.session_url("a") + "/chat/completions", {"messages": ok, "max_tokens": 16}
            )
            assert status == 200 and reply["choices"][0]["message"]["content"] == "Done."
            big = [sys_msg, {"role": "user", "content": "calc " * 400}]
            status, err = _post(
                gw.session_url("b") + "/chat/completions", {"messages": big, "max_tokens": 16}
            )
            assert status == 400, err
            assert err["error"]["code"] == "context_length_exceeded" and "maximum context length" in str(err)
    finally:
        backend.stop()
