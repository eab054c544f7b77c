"""OpenAIPolicy against a real HTTP server on 127.0.0.1 serving the tiny model (swe_rl.policy.openai_server)."""

from __future__ import annotations

import asyncio

import pytest

from swe_rl.policy.base import SamplingParams
from swe_rl.policy.hf import HFLocalPolicy
from swe_rl.policy.openai import OpenAIPolicy, PolicyServerError, parse_completion
from swe_rl.policy.openai_server import PolicyServer


@pytest.fixture
def policy_server(tiny_model, tiny_tokenizer):
    local = HFLocalPolicy(tiny_model, tiny_tokenizer, max_batch=16)
    with PolicyServer(local) as server:
        yield server, local


async def test_roundtrip_matches_local_policy(policy_server, tiny_tokenizer):
    server, local = policy_server
    client = OpenAIPolicy(server.base_url, "tiny", max_concurrency=4)
    prompt = tiny_tokenizer("def add(a, b):")["input_ids"]
    eos = tiny_tokenizer.convert_tokens_to_ids("<|im_end|>")
    sp = SamplingParams(temperature=0.8, max_new_tokens=8, stop_token_ids=(eos,), seed=11)
    remote = await client.generate(prompt, sp)
    # the same seeded request straight to the server's policy (on its own loop) gives the same tokens
    direct = asyncio.run_coroutine_threadsafe(local.generate(prompt, sp), server.loop).result()
    assert remote.token_ids == direct.token_ids and remote.logprobs == pytest.approx(
        direct.logprobs, abs=1e-6
    )
    assert remote.finish_reason == direct.finish_reason and remote.token_entropy is None
    await client.close()


async def test_concurrency_limit_and_batching(policy_server, tiny_tokenizer):
    server, local = policy_server
    client = OpenAIPolicy(server.base_url, "tiny", max_concurrency=3)
    prompt = tiny_tokenizer("x")["input_ids"]
    outs = await asyncio.gather(
        *(client.generate(prompt, SamplingParams(max_new_tokens=4, seed=i)) for i in range(9))
    )
    assert all(len(o.token_ids) == 4 for o in outs)
    assert local.stats["requests"] == 9 and local.stats["batches"] >= 3  # at most 3 in flight at a time
    await client.close()


async def test_retries_dropped_connections(tiny_model, tiny_tokenizer):
    with PolicyServer(HFLocalPolicy(tiny_model, tiny_tokenizer), drop_first=2) as server:
        client = OpenAIPolicy(server.base_url, "tiny", backoff_s=0.05)
        out = await client.generate(tiny_tokenizer("x")["input_ids"], SamplingParams(max_new_tokens=3))
        assert len(out.token_ids) == 3 and client.stats["retries"] == 2
        await client.close()


async def test_gives_up_and_reports_clear_errors(policy_server):
    server, _ = policy_server
    client = OpenAIPolicy(
        "http://127.0.0.1:9/v1", "tiny", max_retries=1, backoff_s=0.01
    )  # nothing listens on 9
    with pytest.raises(PolicyServerError, match="gave up after 2 attempts"):
        await client.generate([1, 2], SamplingParams(max_new_tokens=2))
    await client.close()
    bad = OpenAIPolicy(server.base_url.replace("/v1", "/v2"), "tiny")
    with pytest.raises(PolicyServerError, match="HTTP 404"):
        await bad.generate([1, 2], SamplingParams(max_new_tokens=2))
    await bad.close()


def test_request_body_and_reply_parsing():
    client = OpenAIPolicy("http://h:1/v1/", "m", api_key="k", extra_body={"top_k": 5})
    body = client.request_body(
        [1, 2], SamplingParams(temperature=0.5, max_new_tokens=7, stop_token_ids=(9,), seed=1)
    )
    assert client.url == "http://h:1/v1/completions" and client.headers["Authorization"] == "Bearer k"
    assert body["prompt"] == [1, 2] and body["max_tokens"] == 7 and body["stop_token_ids"] == [9]
    assert (
        body["logprobs"] == 1
        and body["return_tokens_as_token_ids"]
        and body["seed"] == 1
        and body["top_k"] == 5
    )
    reply = {
        "choices": [
            {
                "text": "ab",
                "finish_reason": "stop",
                "logprobs": {"tokens": ["token_id:4", "token_id:9"], "token_logprobs": [-0.5, -0.1]},
            }
        ]
    }
    c = parse_completion(reply)
    assert c.token_ids == [4, 9] and c.logprobs == [-0.5, -0.1] and c.finish_reason == "stop"
    with pytest.raises(PolicyServerError, match="token_id:N"):
        parse_completion({"choices": [{"logprobs": {"tokens": ["ab"], "token_logprobs": [-1.0]}}]})
    with pytest.raises(PolicyServerError, match="no choices"):
        parse_completion({"error": "x"})
