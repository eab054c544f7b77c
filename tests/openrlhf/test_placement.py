"""Where the trainer controllers go (swe_rl/train/openrlhf/placement.py) on `ray.nodes()`-shaped tables; the
cluster test (tests/cluster/test_controller_placement.py) places real ones."""

from __future__ import annotations

from swe_rl.train.openrlhf.placement import choose_controller_node


def _node(nid: str, cpu: float, **res: float) -> dict:
    return {"NodeID": nid, "Alive": True, "Resources": {"CPU": cpu, **res} if cpu else dict(res)}


def test_the_controller_node_is_the_drivers_else_one_without_sandboxes():
    head, sb, gpu = _node("head", 1), _node("sb", 2, sandbox=4), _node("gpu", 8, GPU=8)
    assert choose_controller_node([sb, head, gpu], "head") == "head"
    # a head started with --num-cpus=0 cannot place them: a node without sandboxes, never a sandbox node
    assert choose_controller_node([sb, _node("head", 0), gpu], "head") == "gpu"
    assert choose_controller_node([sb, {**gpu, "Alive": False}, _node("head", 0)], "head") is None
