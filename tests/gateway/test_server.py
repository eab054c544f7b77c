"""The gateway over HTTP with the shipped tiny model (HF local policy) and the real `openai` client."""

from __future__ import annotations

import json
import urllib.request

import openai
import pytest

from swe_rl.agent.trajectory import mask_runs


@pytest.fixture(scope="module")
def gateway():
    from transformers import AutoModelForCausalLM

    from swe_rl.experiments.demo import SHIPPED_SFT
    from swe_rl.gateway.server import Gateway
    from swe_rl.policy.hf import HFLocalPolicy
    from swe_rl.policy.tiny import load_tokenizer

    tok = load_tokenizer(SHIPPED_SFT)
    model = AutoModelForCausalLM.from_pretrained(SHIPPED_SFT).eval()
    with Gateway(HFLocalPolicy(model, tok), tok, max_context_tokens=400, default_max_tokens=24) as gw:
        yield gw


def _get(url: str) -> dict:
    with urllib.request.urlopen(url, timeout=30) as r:
        return json.loads(r.read())


def test_chat_session_records_tokens_that_decode_to_what_the_agent_saw(gateway):
    tok = gateway.tokenizer
    client = openai.OpenAI(base_url=gateway.session_url("agent-1"), api_key="x", max_retries=0)
    assert gateway.session_url("x").startswith("http://127.0.0.1:")
    assert [m.id for m in client.models.list().data] == ["swe-rl"]
    msgs = [{"role": "system", "content": "You are an agent."}, {"role": "user", "content": "Fix calc.py."}]
    replies = []
    for k in range(2):
        r = client.chat.completions.create(
            model="swe-rl", messages=msgs, max_tokens=24, logprobs=True, seed=k
        )
        content = r.choices[0].message.content
        assert len(r.choices[0].logprobs.content) == r.usage.completion_tokens
        replies.append(content)
        msgs += [{"role": "assistant", "content": content}, {"role": "user", "content": f"output {k}"}]
    desc = _get(f"{gateway.root_url}/sessions/agent-1")
    assert desc["assembled"] and desc["reason"] is None and desc["drift"]["text_match"]
    t = desc["trajectory"]
    runs = mask_runs(t["loss_mask"])
    assert len(runs) == 2
    for (s, e), reply in zip(runs, replies, strict=True):
        assert tok.decode(t["token_ids"][s:e]).removesuffix("<|im_end|>") == reply
        assert all(lp < 0 for lp in t["logprobs"][s:e]) and all(lp == 0 for lp in t["logprobs"][:s][:3])
    # what the agent saw as its second prompt is what the stream holds before the second turn
    rendered = gateway.sessions["agent-1"].calls[1].prompt_ids
    assert tok.decode(rendered).endswith("output 0<|im_end|>\n<|im_start|>assistant\n")


def test_header_sessions_completions_and_errors(gateway):
    client = openai.OpenAI(base_url=gateway.base_url, api_key="x", max_retries=0,
                           default_headers={"X-Session-Id": "hdr"})  # fmt: skip
    client.chat.completions.create(model="swe-rl", messages=[{"role": "user", "content": "hi"}], max_tokens=4)
    assert len(gateway.sessions["hdr"].calls) == 1
    # /v1/completions: a text prompt extending the previous prompt + completion keeps the recorded tokens
    c1 = client.completions.create(model="swe-rl", prompt="def add(a, b):", max_tokens=6)
    c2 = client.completions.create(
        model="swe-rl", prompt="def add(a, b):" + c1.choices[0].text + "\n", max_tokens=6
    )
    (p1, ids1, comp1), (_, ids2, _) = gateway.sessions["hdr"].text_calls
    assert ids2[: len(ids1) + len(comp1.token_ids)] == ids1 + comp1.token_ids
    assert c2.usage.prompt_tokens == len(ids2) and p1 == "def add(a, b):"
    with pytest.raises(openai.BadRequestError, match="n > 1"):
        client.chat.completions.create(model="swe-rl", messages=[{"role": "user", "content": "x"}], n=2)
    with pytest.raises(openai.BadRequestError, match="context"):
        client.chat.completions.create(model="swe-rl", messages=[{"role": "user", "content": "word " * 500}])
    with pytest.raises(openai.NotFoundError):
        client.post("/nope", cast_to=dict, body={})
    # vLLM's sampling fields reach the local sampler: top_k=1 at T=1 is greedy; a bad one is refused by name
    msgs = [{"role": "user", "content": "Fix calc.py."}]
    greedy = client.chat.completions.create(model="swe-rl", messages=msgs, max_tokens=12, temperature=0)
    top1 = client.chat.completions.create(model="swe-rl", messages=msgs, max_tokens=12, temperature=1.0, seed=4,
                                          extra_body={"top_k": 1})  # fmt: skip
    assert top1.choices[0].message.content == greedy.choices[0].message.content
    with pytest.raises(openai.BadRequestError, match="min_p"):
        client.chat.completions.create(model="swe-rl", messages=msgs, extra_body={"min_p": -0.1})


def test_gateway_over_a_served_backend(gateway):
    """Gateway -> OpenAIPolicy -> a served /v1/completions endpoint (PolicyServer, vLLM's stand-in here): the
    recorded tokens and log-probs are the served ones."""
    from swe_rl.gateway.server import Gateway
    from swe_rl.policy.hf import HFLocalPolicy
    from swe_rl.policy.openai import OpenAIPolicy
    from swe_rl.policy.openai_server import PolicyServer

    tok = gateway.tokenizer
    served = PolicyServer(HFLocalPolicy(gateway.policy.model, tok)).start()  # its own policy on its own loop
    try:
        with Gateway(OpenAIPolicy(served.base_url, "tiny"), tok, default_max_tokens=12) as gw:
            client = openai.OpenAI(base_url=gw.session_url("srv"), api_key="x", max_retries=0)
            msgs = [{"role": "user", "content": "Fix calc.py."}]
            r = client.chat.completions.create(model="swe-rl", messages=msgs, temperature=0)
            msgs += [
                {"role": "assistant", "content": r.choices[0].message.content},
                {"role": "user", "content": "ok"},
            ]
            client.chat.completions.create(model="swe-rl", messages=msgs, temperature=0)
            a = gw.sessions["srv"].assemble()
    finally:
        served.stop()
    assert a.reason is None and len(mask_runs(a.trajectory.loss_mask)) == 2 and a.drift["text_match"]
    s, e = mask_runs(a.trajectory.loss_mask)[0]
    assert tok.decode(a.trajectory.token_ids[s:e]).removesuffix("<|im_end|>") == r.choices[0].message.content


@pytest.mark.slow  # a fresh interpreter loads torch + transformers: ~20 s on a loaded 2-core machine
def test_cli_serves_until_sigterm_and_writes_the_sessions(tmp_path):
    import signal
    import subprocess
    import sys

    from swe_rl.experiments.demo import SHIPPED_SFT

    out = tmp_path / "sessions.jsonl"
    cmd = [sys.executable, "-m", "swe_rl.cli", "gateway", "--model", str(SHIPPED_SFT), "--port", "0",
           "--max-tokens", "6", "--out", str(out)]  # fmt: skip
    p = subprocess.Popen(cmd, stdout=subprocess.PIPE, text=True)
    try:
        line = p.stdout.readline()
        assert line.startswith("gateway: serving swe-rl at http://127.0.0.1:"), line
        base = line.split(" at ")[1].split()[0]
        client = openai.OpenAI(base_url=base.removesuffix("/v1") + "/s/cli/v1", api_key="x", max_retries=0)
        client.chat.completions.create(model="swe-rl", messages=[{"role": "user", "content": "hi"}])
    finally:
        p.send_signal(signal.SIGTERM)
        rest, _ = p.communicate(timeout=60)
    assert p.returncode == 0 and "1 sessions written" in rest
    (rec,) = [json.loads(x) for x in out.read_text().splitlines()]
    assert rec["session"] == "cli" and rec["assembled"] and rec["trajectory"]["loss_mask"].count(1) >= 1


def test_cli_over_an_upstream_that_does_not_serve_the_name_is_one_error(tmp_path, tiny_model, tiny_tokenizer):
    # `--backend openai` used to start serving and fail each agent request against a wrong --upstream / --name
    import subprocess
    import sys

    from swe_rl.experiments.demo import SHIPPED_SFT
    from swe_rl.policy.hf import HFLocalPolicy
    from swe_rl.policy.openai_server import PolicyServer

    with PolicyServer(HFLocalPolicy(tiny_model, tiny_tokenizer), model_name="served-elsewhere") as server:
        cmd = [
            sys.executable,
            "-m",
            "swe_rl.cli",
            "gateway",
            "--model",
            str(SHIPPED_SFT),
            "--backend",
            "openai",
            "--upstream",
            server.base_url,
            "--name",
            "swe-rl",
            "--port",
            "0",
            "--out",
            str(tmp_path / "s.jsonl"),
        ]
        res = subprocess.run(cmd, capture_output=True, text=True, timeout=120)  # fmt: skip
    assert res.returncode == 2, res.stdout[-1000:] + res.stderr[-2000:]
    assert "--name 'swe-rl': not served at" in res.stderr and "served-elsewhere" in res.stderr, res.stderr
    assert "gateway: serving" not in res.stdout
