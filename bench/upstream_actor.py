"""OpenRLHF's policy-actor forward for bench/step_cost.py: upstream's `Actor` class, executed from the installed
openrlhf source (its module imports DeepSpeed, flash-attn and peft at top level, which a lent GPU machine lacks; the
same way bench/openrlhf_seam.py runs upstream code), timed plain and through our `exact_forward`."""

from __future__ import annotations

import ast
import importlib.util
import types
from collections.abc import Callable
from pathlib import Path

import torch


def upstream_actor_cls():
    """OpenRLHF's `Actor` class and the helpers its forward calls, executed from the installed source; None without
    openrlhf."""
    spec = importlib.util.find_spec("openrlhf")
    if spec is None or not spec.submodule_search_locations:
        return None
    root = Path(next(iter(spec.submodule_search_locations)))
    helpers = [n for n in ast.parse((root / "models/utils.py").read_text()).body
               if isinstance(n, ast.FunctionDef)
               and n.name in ("compute_entropy", "log_probs_from_logits", "_logsumexp_by_chunk")]  # fmt: skip
    actor = [n for n in ast.parse((root / "models/actor.py").read_text()).body
             if isinstance(n, ast.ClassDef) and n.name == "Actor"]  # fmt: skip
    ns = {"torch": torch, "nn": torch.nn, "F": torch.nn.functional, "dist": torch.distributed,
          "Optional": __import__("typing").Optional, "__name__": "openrlhf_actor"}  # fmt: skip
    exec(
        compile(ast.Module(body=[*helpers, *actor], type_ignores=[]), str(root / "models/actor.py"), "exec"),
        ns,
    )
    return ns["Actor"]


def openrlhf_forwards(
    model, batch, rows: int, now: Callable[[str], float], dev: str
) -> dict[str, float] | None:
    """Seconds of upstream's old-log-prob forward over the batch, `rows` sequences a call, plain and through our
    exact_forward (return_entropy, swe_rl.algo's entropy); None without openrlhf."""
    from swe_rl.train.openrlhf.entropy_forward import exact_forward

    cls = upstream_actor_cls()
    if cls is None:
        return None
    actor = cls(model, temperature=1.0)
    actor.packing_samples = False
    policy = types.SimpleNamespace(actor=actor, strategy=types.SimpleNamespace(ring_attn_group=None))
    amask = batch.loss_mask[:, 1:].bool()
    out = {}
    for name in ("plain", "entropy"):
        t0 = now(dev)
        for s in range(0, batch.size, rows):
            sl = slice(s, s + rows)
            if name == "plain":
                with torch.no_grad():
                    actor(batch.input_ids[sl], amask[sl], batch.attention_mask[sl])
            else:
                exact_forward(policy, batch.input_ids[sl], amask[sl], batch.attention_mask[sl], chunk=512)
        out[name] = now(dev) - t0
    model.train()
    return out


if __name__ == "__main__":  # `make bench` runs every file here
    print("upstream_actor: a helper of bench/step_cost.py, nothing to measure on its own")
