"""A sandbox node lost mid-step of training (issue 59 item 3): the OpenRLHF executor's step completes with the lost
episodes masked, and the built-in trainer's slots replace a sandbox whose node died.

The executor runs here as it runs in a vLLM rollout actor: `AgentExecutor.execute` per sample, all at once on one
event loop, its sandboxes RaySandboxes on the cluster's sandbox nodes (`agent.sandbox.backend: ray`). The engine is
the named fake of tests/openrlhf/test_executor.py (vLLM needs a GPU) answering with the scripted gold policy.
"""

from __future__ import annotations

import asyncio
import time

import pytest

pytestmark = pytest.mark.docker


@pytest.fixture(scope="module")
def micro_tasks():
    from swe_rl.images.task_images import build_task_images, image_exists
    from swe_rl.tasks.loaders import MICRO_SUITE, load_tasks

    tasks = load_tasks("micro")[:4]
    missing = [t.instance_id for t in tasks if not image_exists(t.image)]
    if missing:
        assert all(r.status in ("built", "present") for r in build_task_images(MICRO_SUITE, missing))
    return tasks


async def _kill_busiest_sandbox_node(cl) -> tuple[float, float]:
    """Once sandboxes run on the cluster, kill the sandbox node with the most; (kill time, seconds to dead)."""
    from tests.cluster.cluster_eval import actors_by_class

    for _ in range(600):
        alive = [a for a in actors_by_class(cl, cl.cluster.global_state.actor_table(None)).get("SandboxActor", [])
                 if a["state"] == "ALIVE"]  # fmt: skip
        if len(alive) >= 2:
            break
        await asyncio.sleep(0.2)
    by_node = {cl.node_id(n): n for n in cl.sandbox_nodes}
    busiest = max(by_node, key=lambda nid: sum(a["node"] == nid for a in alive))
    victim = by_node[busiest]
    t = cl.kill_node(victim)
    return t, await asyncio.to_thread(cl.wait_dead, victim)


def test_openrlhf_executor_step_completes_with_lost_episodes_masked(
    cluster_driver, micro_tasks, tiny_tokenizer
):
    from swe_rl.policy.scripted import ScriptedGoldPolicy
    from swe_rl.train.openrlhf.aem_seam import VALID_KEY
    from swe_rl.train.openrlhf.config import AgentConfig
    from swe_rl.train.openrlhf.data import task_to_row
    from swe_rl.train.openrlhf.executor import AgentExecutor
    from tests.openrlhf.test_executor import FakeVLLMEngine, FakeVLLMSamplingParams

    cl = cluster_driver
    # 2 of a node's 4 `sandbox` slots per sandbox: the 4 samples' sandboxes spread over both sandbox nodes
    sandbox = {"backend": "ray", "ray_address": cl.address, "startup_timeout": 30, "resource_amount": 2}
    ex = AgentExecutor(AgentConfig(max_steps=20, sandbox=sandbox))

    async def step():
        rows = [task_to_row(t) for t in micro_tasks]
        samples = [
            ex.execute(r["prompt"], r["label"], FakeVLLMSamplingParams(logprobs=None), 20000, tiny_tokenizer,
                       FakeVLLMEngine(ScriptedGoldPolicy(t, tiny_tokenizer)))
            for r, t in zip(rows, micro_tasks, strict=True)
        ]  # fmt: skip
        t0 = time.monotonic()
        killer = asyncio.create_task(_kill_busiest_sandbox_node(cl))
        out = await asyncio.gather(*samples)
        t_kill, dead_after = await killer
        return out, t_kill - t0, dead_after, time.monotonic() - t_kill

    try:
        responses, kill_at, dead_after, rest = asyncio.run(step())
    finally:
        cl.restore()
    valid = [r["extra_logs"][VALID_KEY] for r in responses]
    print(f"\nOpenRLHF executor step: node killed {kill_at:.1f} s in, dead after {dead_after:.1f} s, step done "
          f"{rest:.1f} s after the kill; valid per sample {valid}, rewards {[r['reward'] for r in responses]}")  # fmt: skip
    assert len(responses) == 4  # every sample answered: the step completes
    lost = [r for r in responses if r["extra_logs"][VALID_KEY] == 0.0]
    assert lost, "the killed node held none of the step's sandboxes"
    assert all(r["reward"] == 0.0 for r in lost)  # masked: zero advantage, never a score
    kept = [r for r in responses if r["extra_logs"][VALID_KEY] == 1.0]
    assert kept and all(r["reward"] == 1.0 for r in kept)  # the other node's samples were graded as usual


def test_builtin_trainer_slots_renew_a_sandbox_whose_node_was_lost(cluster_driver):
    """The built-in trainer's k reused sandboxes (SandboxSlots, sandbox.backend ray): a slot whose node died was
    dropped by its next lease (SandboxDiedError), and with every slot gone each lease waited for ever. Now the
    lease starts a fresh sandbox in its place (on a live sandbox node) and the episode runs."""
    from swe_rl.tasks.task import Task
    from swe_rl.train.env import SandboxSlots

    cl = cluster_driver
    slots = SandboxSlots(2, {"backend": "ray", "ray_address": cl.address, "startup_timeout": 30})
    task = Task(instance_id="slot-1", repo="x/y", base_commit="", problem_statement="p",
                metadata={"files": {"a.py": "x = 1\n"}})  # fmt: skip

    async def run() -> tuple[list[str], float, float]:
        await slots.start()
        t_kill, dead_after = await _kill_busiest_sandbox_node(cl)
        outs = []
        for _ in range(4):  # every slot leased twice: the dead ones renewed on the way
            async with slots.lease(task) as box:
                outs.append((await box.exec("cat a.py", timeout=30)).output.strip())
        return outs, dead_after, time.monotonic() - t_kill

    try:
        outs, dead_after, took = slots.run(run())
    finally:
        slots.close()
        cl.restore()
    print(f"\nbuilt-in trainer slots: node dead after {dead_after:.1f} s; 4 leases done {took:.1f} s after the "
          f"kill; {slots.stats.get('renewed', 0)} slot(s) renewed")  # fmt: skip
    assert outs == ["x = 1"] * 4
    assert slots.stats.get("renewed", 0) >= 1


def test_a_ray_sandbox_started_inside_a_placement_group_lands_on_a_sandbox_node(cluster_driver):
    """OpenRLHF's vLLM engines run in placement groups that capture their children (placement_group_capture_child_
    tasks): our executor's RaySandboxes, started there, were put in the engine's bundle, which has no `sandbox`,
    and Ray refused each at once (every sample of the cluster rehearsal an infrastructure failure)."""
    import ray
    from ray.util.placement_group import placement_group, remove_placement_group
    from ray.util.scheduling_strategies import PlacementGroupSchedulingStrategy

    cl = cluster_driver
    pg = placement_group([{"CPU": 1}])
    ray.get(pg.ready(), timeout=60)

    @ray.remote(num_cpus=1)
    def engine_like(address: str) -> str:
        import asyncio as aio

        from sandboxes.config import make_sandbox

        async def go() -> str:
            async with make_sandbox({"backend": "ray", "ray_address": address, "startup_timeout": 60}) as sb:
                return (await sb.exec("echo ok", timeout=30)).output.strip()

        return aio.run(go())

    captured = PlacementGroupSchedulingStrategy(pg, placement_group_capture_child_tasks=True)
    try:
        assert (
            ray.get(engine_like.options(scheduling_strategy=captured).remote(cl.address), timeout=180) == "ok"
        )
    finally:
        remove_placement_group(pg)
