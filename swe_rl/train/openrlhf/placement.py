"""Where OpenRLHF's trainer controllers go on a multi-node cluster (issue 59).

Upstream makes PPOTrainer, PPOTrainerAsync and its TrainingActor / GenerateSamplesActor bare `@ray.remote` actors: one
CPU to be placed, none held, so Ray's default policy may put them on any node, a sandbox node included, and a
sandbox node lost mid-run then ends the whole run (ActorUnavailableError in `fit`). `install_swe_rl_classes(node)`
gives them an affinity to the node chosen here (soft; hard for VLLMLock, which asks for no CPU). No trainer stack
is imported: the driver and the preflight call it before OpenRLHF's modules load, and tests call
`choose_controller_node` on plain node tables.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any


def choose_controller_node(nodes: Iterable[dict[str, Any]], driver_node: str) -> str | None:
    """From `ray.nodes()`-shaped rows: the driver's node, which the run cannot outlive anyway, when it has a CPU
    to place the controllers with; else the first alive node with CPUs and no `sandbox` resource (a GPU node,
    when the head was started with `--num-cpus=0`); else None (Ray's own placement)."""
    usable = [n for n in nodes if n.get("Alive") and n.get("Resources", {}).get("CPU", 0) >= 1]
    if any(n["NodeID"] == driver_node for n in usable):
        return driver_node
    return next((str(n["NodeID"]) for n in usable if "sandbox" not in n.get("Resources", {})), None)


def controller_node() -> str | None:
    """choose_controller_node on the Ray this process has joined."""
    import ray

    return choose_controller_node(ray.nodes(), ray.get_runtime_context().get_node_id())
