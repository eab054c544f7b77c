"""`PoolConfig`: how episodes are spread over workers (Ray actors or one in-process asyncio loop)."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from swe_rl.config import StrictModel


class PoolConfig(StrictModel):
    backend: Literal["ray", "local"] = (
        "ray"  # ray: actors (one machine or a cluster); local: one asyncio loop here
    )
    num_actors: int = Field(2, ge=1)  # Ray rollout actors (ignored by the local backend)
    episodes_per_actor: int = Field(4, ge=1)  # concurrent episodes per actor (= sandboxes per actor)
    actor_num_cpus: float = Field(
        0.0, ge=0
    )  # CPUs reserved per actor; raise it when the policy runs in the actor
    ray_address: str | None = None  # join this cluster ("auto", "ray://host:10001"); None: start a local Ray
    ray_num_cpus: int | None = Field(
        None, ge=1
    )  # local Ray only: CPUs to advertise (None: all of this machine's)
    sandbox_slots: float = Field(
        64.0, ge=0
    )  # local Ray only: amount of the custom `sandbox` resource advertised
    max_actor_restarts: int = Field(
        4, ge=0
    )  # dead actors replaced before the pool gives up (in-flight re-run anyway)
    actor_resources: dict[str, float] | None = (
        None  # Ray resources per actor; None: {"sandbox": episodes_per_actor} on a Ray whose nodes advertise  # `sandbox` while the actor runs its own containers (docker/local backend), else none (docs/cluster.md)
    )
    # spread: actors dealt over the nodes that can take them in turn (Ray's SPREAD; a lost node takes fewer
    # episodes with it); default: Ray's hybrid policy, which fills a node to half its resources before the next
    scheduling: Literal["spread", "default"] = "spread"
    placement_timeout: float = Field(
        120.0, gt=0
    )  # seconds an actor may wait for a node; then its episodes run on another actor, or end as actor_unplaceable
    progress: bool = True  # rich progress bar on stderr while results stream back
    warm_sandboxes: int | None = Field(
        None, ge=0
    )  # warm pool per worker and image (pre-started sandboxes); None: the sandbox config's warm_pool.size
    reuse_sandboxes: bool | None = (
        None  # reuse restored-and-verified sandboxes; None: sandbox.warm_pool.reuse
    )
