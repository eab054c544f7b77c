"""Subprocess half of test_controller_placement.py: OpenRLHF's trainer controllers created on the test cluster the
way upstream creates them (`Class.remote(...)`), after `install_swe_rl_classes` as launch.py calls it.

    PYTHONPATH=tests/openrlhf/cuda_fakes:. python tests/cluster/controller_main.py ADDRESS MODE OUT.json

MODE `ours`: install_swe_rl_classes(placement.controller_node()), as launch.py; `plain`: install_swe_rl_classes()
with no node (the placement before issue 59's fix). Each controller class is created N times with None for each
required argument: Ray places the actor, then a trainer's __init__ fails on the first None it uses and the actor
ends (no trainer is built; VLLMLock and the queues PPOTrainerAsync makes just start). The test reads the node each
was placed on from the actor table. Its own process: OpenRLHF's modules import only with the flash-attn fake on the
path, which must not leak into the other tests; the workers get the same path.
"""

from __future__ import annotations

import importlib
import inspect
import json
import os
import sys

import ray

N = 2  # per class: each actor's worker imports OpenRLHF's trainer stack (~10 CPU-s here)


def main(address: str, mode: str, out: str) -> None:
    path = os.environ["PYTHONPATH"]
    ray.init(address=address, runtime_env={"env_vars": {"PYTHONPATH": path}}, log_to_driver=False)
    from swe_rl.train.openrlhf.actors import CONTROLLERS, QUEUE_MODULE, install_swe_rl_classes, user_class
    from swe_rl.train.openrlhf.placement import controller_node

    if mode not in ("ours", "plain"):
        raise SystemExit(f"MODE: expected 'ours' or 'plain', got {mode!r}")
    node = controller_node() if mode == "ours" else None
    install_swe_rl_classes(node)
    made = []
    for module, name, _ in CONTROLLERS:
        cls = getattr(importlib.import_module(module), name)
        params = list(inspect.signature(user_class(cls).__init__).parameters.values())[1:]
        args = [None for p in params if p.default is p.empty and p.kind is p.POSITIONAL_OR_KEYWORD]
        made += [(name, cls.remote(*args)) for _ in range(N)]
    # PPOTrainerAsync's queues, made as its __init__ makes them (the module's `Queue`)
    made += [("Queue", importlib.import_module(QUEUE_MODULE).Queue(maxsize=1).actor) for _ in range(N)]
    ended = []
    for name, h in made:  # placed, then ready (VLLMLock, the queues) or failed in __init__ (the trainers)
        try:
            ray.get(h.__ray_ready__.remote(), timeout=300)
        except ray.exceptions.RayActorError:
            ended.append(name)
    result = {
        "chosen": node,
        "driver": ray.get_runtime_context().get_node_id(),
        "actors": [[name, h._actor_id.hex()] for name, h in made],
        "ended": ended,
    }
    with open(out, "w") as f:
        json.dump(result, f)
    ray.shutdown()


if __name__ == "__main__":
    main(*sys.argv[1:4])
