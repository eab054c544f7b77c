"""Agent loop overhead per step, excluding the policy's time, against baselines measured in the same run.

- Baseline 1: one raw `sandbox.exec("true")` round trip (the floor for any tool call).
- Loop overhead per step: episode wall time minus policy, tool, setup and patch time (templating, tokenizing the
  observation delta, parsing, bookkeeping), from a zero-cost scripted policy. Reported early (steps 1-5) vs late
  (last 5 steps, long context) to show the history is never re-tokenized (no growth with context length).
- Tool call time per step vs the exec baseline (python start-up of the tool script + the work).
- HFLocalPolicy throughput: 64 concurrent generations (batched) vs the same requests one at a time (baseline).

Usage: python bench/agent.py [--docker] [--steps 40]
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import subprocess
import tempfile
import time
from pathlib import Path


def make_repo(root: Path) -> tuple[Path, str]:
    repo = root / "repo"
    repo.mkdir()
    for i in range(20):
        (repo / f"mod{i}.py").write_text("".join(f"def f{j}(x):\n    return x + {j}\n\n" for j in range(40)))
    env = {
        "GIT_AUTHOR_NAME": "b",
        "GIT_AUTHOR_EMAIL": "b@b",
        "GIT_COMMITTER_NAME": "b",
        "GIT_COMMITTER_EMAIL": "b@b",
    }
    subprocess.run(
        "git init -q && git add -A && git commit -qm base",
        shell=True,
        cwd=repo,
        env={**env, "PATH": "/usr/bin:/bin"},
        check=True,
    )
    return repo, subprocess.check_output(["git", "rev-parse", "HEAD"], cwd=repo, text=True).strip()


async def bench_loop(docker: bool, steps: int) -> dict:
    from sandboxes.config import LocalSandboxConfig, make_sandbox
    from swe_rl.agent.config import AgentConfig
    from swe_rl.agent.loop import run_episode
    from swe_rl.agent.parsing import format_action
    from swe_rl.policy.scripted import ReplayPolicy
    from swe_rl.policy.tiny import build_tokenizer
    from swe_rl.tasks.task import Task

    tok = build_tokenizer()
    tmp = Path(tempfile.mkdtemp(prefix="bench-agent-"))
    repo, base = make_repo(tmp)
    if docker:
        sb = make_sandbox({"backend": "docker"}, image="swe-rl/base:bookworm")
        repo_dir, tools_dir = "/testbed", "/usr/local/lib/swe_rl_tools"
    else:
        sb = make_sandbox(LocalSandboxConfig(), copy_from=repo)
        repo_dir, tools_dir = None, str(tmp / "tools")
    async with sb:
        if docker:
            await sb.upload(str(repo), "/testbed")
        repo_dir = repo_dir or sb.root
        lat = []
        for _ in range(20):
            t = time.perf_counter()
            await sb.exec("true")
            lat.append(time.perf_counter() - t)
        replies = []
        for i in range(steps - 1):
            path = f"{repo_dir}/mod{i % 20}.py"
            if i % 3 == 0:
                replies.append(
                    format_action(
                        "file_editor",
                        {"command": "view", "path": path, "view_range": "[1, 30]"},
                        "xml",
                        "look",
                    )
                )
            elif i % 3 == 1:
                replies.append(
                    format_action("search", {"search_term": f"f{i}(", "path": repo_dir}, "xml", "find")
                )
            else:
                replies.append(
                    format_action("execute_bash", {"command": f"sed -n 1,20p {path}"}, "xml", "run")
                )
        replies.append(format_action("submit", {}, "xml"))
        task = Task(instance_id="bench", base_commit=base, problem_statement="Benchmark the loop.")
        cfg = AgentConfig(repo_dir=repo_dir, tools_dir=tools_dir, max_steps=steps, max_context_tokens=10**6)
        t0 = time.perf_counter()
        traj = await run_episode(task, sb, ReplayPolicy(tok, replies), tok, cfg)
        wall = time.perf_counter() - t0
    m = traj.metrics
    return {
        "exec_rtt_ms": 1000 * statistics.median(lat),
        "steps": m["steps"],
        "tokens": len(traj.token_ids),
        "loop_overhead_ms_per_step": 1000 * m["loop_overhead_s"] / m["steps"],
        "tool_ms_per_call": 1000 * m["tools_s"] / max(1, m["tool_calls"]),
        "policy_ms_per_step": 1000 * m["policy_s"] / m["steps"],
        "setup_ms": 1000 * m["setup_s"],
        "patch_ms": 1000 * m["patch_s"],
        "wall_s": wall,
        "exit": traj.exit_status,
    }


def bench_overhead_vs_context(steps: int) -> tuple[float, float]:
    """Per-step host-side cost (template delta + tokenize + parse) at a short vs a long context, no sandbox."""
    from swe_rl.agent.chat import ChatFormat
    from swe_rl.agent.parsing import format_action, parse_action
    from swe_rl.policy.tiny import build_tokenizer

    tok = build_tokenizer()
    chat = ChatFormat(tok)
    _, ids = chat.prompt("system " * 200, "task " * 200)
    obs = "Execution output of [file_editor]:\n" + "\n".join(
        f"{i:6d}\tdef f{i}(x): return x" for i in range(60)
    )
    reply = format_action("file_editor", {"command": "view", "path": "/testbed/a.py"}, "xml", "look")
    per_step = []
    for _ in range(steps):
        t = time.perf_counter()
        ids += tok(reply, add_special_tokens=False)["input_ids"]
        parse_action(reply, "xml")
        ids += chat.observation(obs)[1]
        per_step.append(time.perf_counter() - t)
    return 1000 * statistics.median(per_step[:10]), 1000 * statistics.median(per_step[-10:]), len(ids)


async def bench_policy(n: int = 64, new_tokens: int = 32) -> dict:
    import torch

    from swe_rl.policy.base import SamplingParams
    from swe_rl.policy.hf import HFLocalPolicy
    from swe_rl.policy.tiny import build_tiny_model, build_tokenizer

    tok = build_tokenizer()
    model = build_tiny_model(tok, size="1m")
    policy = HFLocalPolicy(model, tok, max_batch=n)
    prompts = [tok("def add(a, b):\n    return a - b\n" * (3 + i % 5))["input_ids"] for i in range(n)]
    sp = SamplingParams(max_new_tokens=new_tokens, stop_token_ids=())
    await policy.generate(prompts[0], sp)  # warm-up
    t = time.perf_counter()
    outs = await asyncio.gather(*(policy.generate(p, sp) for p in prompts))
    batched = sum(len(o.token_ids) for o in outs) / (time.perf_counter() - t)
    t = time.perf_counter()
    k = 8  # a subset one at a time is enough for the rate
    single_tokens = sum([len((await policy.generate(p, sp)).token_ids) for p in prompts[:k]])
    single = single_tokens / (time.perf_counter() - t)
    await policy.close()
    multi = {}
    for reuse in (False, True):  # 3 turns of an episode: the prompt grows by reply + observation each turn
        pol = HFLocalPolicy(model, tok, max_batch=n, reuse_prefix=reuse)
        ctx = [tok("You are an agent. " * 40 + f"task {i}")["input_ids"] for i in range(n)]
        obs = tok("\nExecution output of [execute_bash]:\n" + "ok line\n" * 20)["input_ids"]
        t = time.perf_counter()
        for _ in range(3):
            outs = await asyncio.gather(*(pol.generate(c, sp) for c in ctx))
            ctx = [c + o.token_ids + obs for c, o in zip(ctx, outs, strict=True)]
        multi[reuse] = time.perf_counter() - t
        await pol.close()
    return {
        "threads": torch.get_num_threads(),
        "batched_tok_s": batched,
        "single_tok_s": single,
        "multi_turn_s": multi,
        "final_ctx": len(ctx[0]),
    }


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--docker", action="store_true", help="use a DockerSandbox on swe-rl/base:bookworm")
    ap.add_argument("--steps", type=int, default=40)
    ap.add_argument(
        "--threads", type=int, default=0, help="torch threads for the policy part (0 = torch default)"
    )
    args = ap.parse_args()
    if args.threads:
        import torch

        torch.set_num_threads(args.threads)
    r = asyncio.run(bench_loop(args.docker, args.steps))
    backend = "docker" if args.docker else "local"
    print(f"[{backend}] {r['steps']} steps, {r['tokens']} tokens, exit {r['exit']}, wall {r['wall_s']:.2f}s")
    print(f"  baseline: exec round trip              {r['exec_rtt_ms']:8.2f} ms")
    print(f"  loop overhead per step (no policy/tools) {r['loop_overhead_ms_per_step']:8.2f} ms"
          f"  = {r['loop_overhead_ms_per_step'] / r['exec_rtt_ms']:.2f}x exec round trip")  # fmt: skip
    print(f"  tool call per step                     {r['tool_ms_per_call']:8.2f} ms"
          f"  = {r['tool_ms_per_call'] / r['exec_rtt_ms']:.2f}x exec round trip")  # fmt: skip
    print(
        f"  setup (install tools) {r['setup_ms']:.1f} ms, patch {r['patch_ms']:.1f} ms, scripted policy {r['policy_ms_per_step']:.2f} ms/step"
    )
    early, late, n = bench_overhead_vs_context(args.steps * 3)
    print(f"  host-side step cost (median): first 10 steps {early:.2f} ms, last 10 steps {late:.2f} ms at {n} tokens"
          f"  ratio late/early {late / early:.2f} (≈1: no re-tokenization)")  # fmt: skip
    p = asyncio.run(bench_policy())
    print(f"[HFLocalPolicy 1m, {p['threads']} threads] batched x64 {p['batched_tok_s']:.0f} tok/s vs one at a time "
          f"{p['single_tok_s']:.0f} tok/s  ratio {p['batched_tok_s'] / p['single_tok_s']:.1f}x")  # fmt: skip
    m = p["multi_turn_s"]
    print(f"  3-turn episodes x{64} (context to {p['final_ctx']} tokens): prefix K/V reuse {m[True]:.2f}s vs "
          f"full re-prefill {m[False]:.2f}s  ratio {m[False] / m[True]:.2f}x")  # fmt: skip
    print(f"  per-step loop overhead / one batched policy token: "
          f"{r['loop_overhead_ms_per_step'] / (1000 / p['batched_tok_s']):.1f} tokens' worth")  # fmt: skip


if __name__ == "__main__":
    main()
