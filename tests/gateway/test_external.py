"""External agents end to end: mini-swe-agent (its own DefaultAgent and litellm model) driven by the shipped tiny
model through the gateway in Docker sandbox slots, graded by CachedGrader, one built-in trainer step with AEM."""

from __future__ import annotations

import sys
import textwrap

import pytest

from swe_rl.agent.trajectory import mask_runs


@pytest.fixture
def tiny_sft():
    from transformers import AutoModelForCausalLM

    from swe_rl.experiments.demo import SHIPPED_SFT
    from swe_rl.policy.tiny import load_tokenizer

    return AutoModelForCausalLM.from_pretrained(SHIPPED_SFT).eval(), load_tokenizer(SHIPPED_SFT)


class Capture:
    def __init__(self, inner):
        self.inner, self.trajs = inner, []

    def rollout(self, tasks, n, seed):
        self.trajs = self.inner.rollout(tasks, n, seed)
        return self.trajs


@pytest.mark.docker
def test_mini_swe_agent_through_the_gateway_trains_one_step(tmp_path, tiny_sft):
    import torch

    from swe_rl.gateway.external import ExternalRollouter, WithGoldFix, demo_mini_agent
    from swe_rl.gateway.server import Gateway
    from swe_rl.policy.hf import HFLocalPolicy
    from swe_rl.runs import RunDir
    from swe_rl.tasks.generator import generate_tasks, sample_batch
    from swe_rl.train.config import TrainConfig
    from swe_rl.train.env import CachedGrader, SandboxSlots
    from swe_rl.train.loop import train

    model, tok = tiny_sft
    before = [p.detach().clone() for p in model.parameters()]
    tasks = generate_tasks(1, "train", seed=1)
    slots = SandboxSlots(2)
    gw = Gateway(HFLocalPolicy(model, tok), tok, max_context_tokens=1024, default_max_tokens=48).start()
    cfg = TrainConfig(name="ext", out_dir=str(tmp_path), steps=1, save_every=0, log_trajectories=2)
    cfg.rollout.tasks_per_step, cfg.rollout.n_samples, cfg.optim.lr = 1, 2, 1e-4
    cfg.algo.modulator.kind = "aem"
    # the agent asks for T=1.5; the trainer's log-probs use the same temperature (checked by rollout_lp_gap)
    cfg.rollout.temperature = 1.5
    agent = WithGoldFix(demo_mini_agent(step_limit=3, max_tokens=48, temperature=1.5))
    roll = Capture(ExternalRollouter(agent, gw, slots, CachedGrader(slots)))
    run = RunDir.create(cfg.out_dir, cfg.name)
    try:
        state = train(cfg, run, model, tok, roll, tasks, sample_tasks=sample_batch, stop_after=1)
    finally:
        gw.stop()
        slots.close()
    trajs = roll.trajs
    assert state.step == 1 and len(trajs) == 2
    assert sorted(t.reward for t in trajs) == [0.0, 1.0], [(t.reward, t.error, t.metrics) for t in trajs]
    for t in trajs:
        g = t.metrics["gateway"]
        assert g["calls"] >= 1 and g["agent_exit"] in ("LimitsExceeded", "Submitted", "RepeatedFormatError",
                                                       "gold fix applied, submitted")  # fmt: skip
        assert t.exit_status in ("max_steps", "submitted", "format_errors") and t.error is None
        assert g["drift"]["text_match"], g["drift"]  # the stream decodes to the conversation re-rendered
        runs = mask_runs(t.loss_mask)
        assert len(runs) == g["chain_calls"] and len(t.logprobs) == len(t.token_ids)
        # the agent's own transcript: every message it sent is in our record, each reply decodes from its span
        seen = [m for m in t.metrics["agent_transcript"] if m["role"] in ("system", "user", "assistant")]
        sent = t.messages[:-1]
        assert [(m["role"], m["content"]) for m in sent] == [
            (m["role"], m["content"]) for m in seen[: len(sent)]
        ]
        for m in t.messages:
            if m["role"] == "assistant" and m.get("span"):
                s, e = m["span"]
                assert tok.decode(t.token_ids[s:e]).removesuffix("<|im_end|>") == m["content"]
    (row,) = run.read_metrics()
    assert row["policy_tokens"] == sum(sum(t.loss_mask) for t in trajs)
    # opposite advantages on two identical streams cancel exactly; different streams give a real gradient
    same = trajs[0].token_ids == trajs[1].token_ids
    assert row["updates"] >= 1 and (row["grad_norm"] < 1e-5 if same else row["grad_norm"] > 1e-3), (same, row)
    assert row["rollout_lp_gap"] < 2e-3  # the gateway's recorded log-probs are the trainer's: same tokens
    assert row["algo/adv/num_spans"] == sum(len(mask_runs(t.loss_mask)) for t in trajs)
    assert any(k.startswith("algo/aem/") for k in row)  # the AEM path ran on the external spans
    assert any(not torch.equal(a, b) for a, b in zip(before, model.parameters(), strict=True))
    print(
        "external step:",
        "identical streams" if same else "different streams",
        {k: row[k] for k in ("loss", "grad_norm", "rollout_lp_gap", "policy_tokens") if k in row},
        "rows",
        len(trajs),
        "drift",
        [t.metrics["gateway"]["drift"] for t in trajs],
    )


AGENT_SCRIPT = textwrap.dedent(
    """
    import os, subprocess, openai
    client = openai.OpenAI(max_retries=0)  # OPENAI_BASE_URL / OPENAI_API_KEY from the environment
    msgs = [{"role": "user", "content": os.environ["SWE_RL_PROBLEM_STATEMENT"]}]
    for k in range(2):
        r = client.chat.completions.create(model="swe-rl", messages=msgs, max_tokens=8)
        msgs += [{"role": "assistant", "content": r.choices[0].message.content},
                 {"role": "user", "content": f"step {k}"}]
    subprocess.run(["docker", "exec", "-w", os.environ["SWE_RL_REPO_DIR"], os.environ["SWE_RL_SANDBOX_ID"],
                    "sh", "-c", "echo '# touched' >> NOTES.md"], check=True)
    """
)


@pytest.mark.docker
@pytest.mark.slow
def test_any_command_as_an_external_agent(tmp_path, tiny_sft):
    from swe_rl.gateway.external import CommandAgent, external_episode
    from swe_rl.gateway.server import Gateway
    from swe_rl.policy.hf import HFLocalPolicy
    from swe_rl.rollout.episode import rollout_one
    from swe_rl.tasks.generator import generate_tasks
    from swe_rl.train.env import CachedGrader, SandboxSlots

    model, tok = tiny_sft
    script = tmp_path / "agent.py"
    script.write_text(AGENT_SCRIPT)
    (task,) = generate_tasks(1, "train", seed=2)
    slots = SandboxSlots(1)
    with Gateway(HFLocalPolicy(model, tok), tok, default_max_tokens=8) as gw:
        fn = external_episode(CommandAgent([sys.executable, str(script)], timeout_s=120), gw)
        traj = slots.run(
            rollout_one(task, 0, gw.policy, slots.lease, None, CachedGrader(slots), episode_fn=fn)
        )
        slots.close()
    assert traj.exit_status == "submitted" and traj.error is None, traj.error
    assert "NOTES.md" in traj.patch and traj.reward == 0.0  # graded: the note does not fix the bug
    assert traj.metrics["gateway"]["assembled"] and len(mask_runs(traj.loss_mask)) == 2


@pytest.mark.docker
def test_mini_swe_agent_tool_calling_model_through_the_gateway(tiny_sft):
    """mini-swe-agent's LitellmModel (OpenAI tools): replayed Hermes tool calls apply the gold fix and submit; the
    gateway returns them as tool_calls, the tool results chain onto the stream, the real grader resolves it."""
    import base64
    import json

    from swe_rl.gateway.external import MiniSweAgent, external_episode
    from swe_rl.gateway.server import Gateway
    from swe_rl.policy.scripted import ReplayPolicy
    from swe_rl.rollout.episode import rollout_one
    from swe_rl.tasks.generator import generate_tasks
    from swe_rl.train.env import CachedGrader, SandboxSlots

    _, tok = tiny_sft
    (task,) = generate_tasks(1, "train", seed=3)
    b64 = base64.b64encode(task.patch.encode()).decode()
    commands = [f"echo {b64} | base64 -d | git apply", "echo COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT"]
    replies = [
        f"<tool_call>\n{json.dumps({'name': 'bash', 'arguments': {'command': c}})}\n</tool_call>"
        for c in commands
    ]
    agent = MiniSweAgent("You fix bugs.", "{{task}}", tool_calling=True, step_limit=4, max_tokens=4000)
    slots = SandboxSlots(1)
    with Gateway(ReplayPolicy(tok, replies), tok, max_context_tokens=8192) as gw:
        fn = external_episode(agent, gw)
        traj = slots.run(
            rollout_one(task, 0, gw.policy, slots.lease, None, CachedGrader(slots), episode_fn=fn)
        )
        slots.close()
    g = traj.metrics["gateway"]
    assert traj.exit_status == "submitted" and traj.reward == 1.0 and traj.resolved, (traj.error, g)
    assert g["assembled"] and g["calls"] == 2, g
    # the tiny ChatML template renders no tool_calls: re-rendering the messages loses the calls the stream keeps
    assert not g["drift"]["text_match"] and g["drift"]["rerendered_tokens"] < g["drift"]["recorded_tokens"]
    runs = mask_runs(traj.loss_mask)
    assert [tok.decode(traj.token_ids[s:e]) for s, e in runs] == [r + "<|im_end|>" for r in replies]
    tool_msgs = [m for m in traj.messages if m["role"] == "tool"]
    assert len(tool_msgs) == 1 and tool_msgs[0]["tool_call_id"] == traj.messages[2]["tool_calls"][0]["id"]
