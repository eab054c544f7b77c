"""Typed sandbox configs: one pydantic model per backend, chosen by the `backend` key (a discriminated union).

Adding a backend (Kubernetes, Ray, a remote service) is one more model: subclass `SandboxBackendConfig`, give it
`backend: Literal["name"]` and a `build(...)` method returning a `Sandbox`, and put it in a union with these
members (see sandboxes/README.md). `make_sandbox` only calls `config.build(...)`: there is no if/elif on names.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, TypeAdapter, ValidationError

if TYPE_CHECKING:
    from sandboxes.base import Sandbox

DEFAULT_IMAGE = "swe-rl/base:bookworm"
# Capabilities kept by default: what root-run build/test workloads need (chown, file modes, setuid tools such as
# apt's _apt user switch, signalling own processes). Dropped: NET_RAW, MKNOD, SYS_CHROOT, SETFCAP, SETPCAP,
# NET_BIND_SERVICE, AUDIT_WRITE and everything Docker never grants.
DEFAULT_CAPS = ["CHOWN", "DAC_OVERRIDE", "FOWNER", "FSETID", "KILL", "SETGID", "SETUID"]


class StrictConfig(BaseModel):
    """Same settings as swe_rl.config.StrictModel (unknown keys rejected), without importing swe_rl."""

    model_config = ConfigDict(extra="forbid", validate_default=True)


class Limits(StrictConfig):
    """Resource and privilege limits of a Docker sandbox. All on by default; set a field to null to lift it."""

    network: str = "none"  # Docker network mode: "none" (only loopback), "bridge", "host", or a network name
    memory: str | None = "2g"  # memory limit (Docker units: 512m, 2g); swap is disabled (memswap = memory)
    pids: int | None = 512  # max processes+threads in the container (stops fork bombs)
    cpus: float | None = 1.0  # CPU quota in cores (CFS); null = unlimited
    no_new_privileges: bool = True  # setuid binaries cannot raise privileges
    cap_drop: list[str] = Field(default_factory=lambda: ["ALL"])  # capabilities removed
    cap_add: list[str] = Field(default_factory=lambda: list(DEFAULT_CAPS))  # capabilities added back
    read_only_root: bool = False  # mount the image's root filesystem read-only
    tmpfs: dict[str, str] = Field(
        default_factory=dict
    )  # size-limited writable areas, e.g. {"/scratch": "size=64m"}
    core_dumps: bool = False  # allow core files (off: a crashing giant process must not fill the disk)
    storage_size: str | None = (
        None  # writable-layer size (overlay2 on xfs with pquota only); null = unlimited
    )


class WarmPoolConfig(StrictConfig):
    """A bounded pool of pre-started, never-used sandboxes per image (sandboxes/pool.py). size 0 = no pool."""

    size: int = Field(default=0, ge=0)  # idle sandboxes kept ready per image (refilled in the background)
    max_filling: int = Field(default=2, ge=1)  # pool starts in flight per image (the host cap applies)
    reuse: bool = False  # give a used sandbox back to the pool after restoring and verifying its whole state
    max_idle: float = Field(default=900.0, gt=0)  # seconds a sandbox may wait idle; its TTL is ttl + max_idle
    refill: Literal["always", "expected"] = (
        "always"  # keep `size` idle per image seen, or only announced ones
    )


class SandboxBackendConfig(StrictConfig):
    """Fields every backend shares. Subclasses set `backend` to a Literal and implement `build`."""

    backend: str  # discriminator: which backend this config selects
    exec_timeout: float = Field(default=300.0, gt=0)  # default per-command timeout, seconds
    kill_grace: float = Field(
        default=2.0, ge=0
    )  # seconds between SIGTERM and SIGKILL for a timed-out command
    client_grace: float = Field(
        default=5.0, gt=0
    )  # extra seconds the client waits before killing from outside
    output_limit: int = Field(default=100_000, ge=64)  # bytes of output kept per command (head + tail)
    startup_timeout: float = Field(
        default=60.0, gt=0
    )  # seconds for the sandbox to be created and its shell ready
    env: dict[str, str] = Field(default_factory=dict)  # environment variables of the sandbox shell
    kill_background: bool = True  # kill a command's leftover background processes at its end (setsid escapes)

    def build(
        self,
        *,
        image: str | None = None,
        copy_from: str | Path | None = None,
        run_id: str | None = None,
        labels: Mapping[str, str] | None = None,
    ) -> Sandbox:
        raise NotImplementedError(f"{type(self).__name__} does not implement build()")


class DockerSandboxConfig(SandboxBackendConfig):
    """A container per sandbox, a persistent bash over an attached exec socket, limits on by default."""

    backend: Literal["docker"] = "docker"  # selects DockerSandbox
    image: str = DEFAULT_IMAGE  # default image when make_sandbox gets none
    workdir: str | None = None  # first cwd of the shell, base of relative file paths; null = image WORKDIR
    user: str | None = None  # user inside the container; null = image default (usually root)
    ttl: float = Field(
        default=6 * 3600.0, gt=0
    )  # seconds; the main process ends after ttl at the latest, then the container is gone
    owner_lease: bool = True  # the container ends when its creating process is gone (sandboxes/lease.py)
    limits: Limits = Field(default_factory=Limits)  # resource and privilege limits
    pull: Literal["never", "missing"] = "missing"  # pull a missing image when its registry is reachable
    disk_floor_gb: float = Field(default=10.0, ge=0)  # warn before a pull/build when free disk is below this
    docker_host: str | None = None  # engine URL (unix:///var/run/docker.sock, tcp://...); null = DOCKER_HOST
    io_timeout: float = Field(default=120.0, gt=0)  # seconds for one file transfer or helper exec
    io_max_bytes: int = Field(default=1 << 30, gt=0)  # largest read_file/download accepted, bytes
    labels: dict[str, str] = Field(default_factory=dict)  # extra container labels
    max_starting: int = Field(default=0, ge=0)  # host-wide cap on sandboxes starting at once; 0 = 2 per core
    start_gate_dir: str | None = None  # lock dir of that cap (all processes); null = one per engine in /tmp
    start_budget: float = Field(default=600.0, gt=0)  # s from start() to ready (queue, tries), else error
    start_attempts: int = Field(default=3, ge=1)  # tries of a transient start failure (engine error, timeout)
    start_backoff: float = Field(default=1.0, ge=0)  # s before the 2nd try, doubled after each (jittered)
    warm_pool: WarmPoolConfig = Field(default_factory=lambda: WarmPoolConfig())  # pre-started sandboxes

    def build(self, *, image=None, copy_from=None, run_id=None, labels=None) -> Sandbox:
        from sandboxes.docker_sandbox import DockerSandbox

        return DockerSandbox(self, image=image, copy_from=copy_from, run_id=run_id, labels=labels)


class LocalSandboxConfig(SandboxBackendConfig):
    """A bash process in a temporary copy of a directory. Isolates NOTHING: for debugging and Docker-less hosts."""

    backend: Literal["local"] = "local"  # selects LocalSandbox
    source_dir: str | None = None  # directory copied into the sandbox when make_sandbox gets no copy_from
    keep_dir: bool = False  # keep the temporary directory after close (for debugging)

    def build(self, *, image=None, copy_from=None, run_id=None, labels=None) -> Sandbox:
        from sandboxes.local import LocalSandbox

        return LocalSandbox(self, copy_from=copy_from if copy_from is not None else self.source_dir)


class RaySandboxConfig(SandboxBackendConfig):
    """A sandbox owned by a Ray actor on a node advertising `resource` (see sandboxes/ray_backend.py)."""

    backend: Literal["ray"] = "ray"  # selects RaySandbox
    inner: DockerSandboxConfig = Field(default_factory=lambda: DockerSandboxConfig())  # the actor's sandbox
    resource: str | None = (
        "sandbox"  # custom Ray resource a node must advertise to host sandboxes; null = any node
    )
    resource_amount: float = Field(
        default=1.0, gt=0
    )  # amount of `resource` one sandbox takes (node slots / amount = cap)
    num_cpus: float = Field(
        default=0.0, ge=0
    )  # CPUs reserved for the actor itself (the container has its own limits)
    ray_address: str | None = None  # Ray to connect to when none is initialized; null = start a local one
    local_slots: float = Field(default=64.0, gt=0)  # amount of `resource` a local Ray started here advertises
    # spread: sandboxes dealt over the nodes with `resource` in turn (Ray's SPREAD), so a lost node takes fewer
    # episodes with it and no node's Docker runs them all; default: Ray's hybrid policy, which fills a node to
    # half its resources before the next (the rehearsal lost a whole step's 8 sandboxes with one node).
    scheduling: Literal["spread", "default"] = "spread"

    def build(self, *, image=None, copy_from=None, run_id=None, labels=None) -> Sandbox:
        from sandboxes.ray_backend import RaySandbox

        return RaySandbox(self, image=image, copy_from=copy_from, run_id=run_id, labels=labels)


SandboxConfig = Annotated[
    DockerSandboxConfig | LocalSandboxConfig | RaySandboxConfig, Field(discriminator="backend")
]


def parse_sandbox_config(data: Mapping[str, Any] | SandboxBackendConfig) -> SandboxBackendConfig:
    """Validate a mapping into the right backend model; one clear ValueError naming the bad field otherwise."""
    if isinstance(data, SandboxBackendConfig):
        return data
    try:
        return TypeAdapter(SandboxConfig).validate_python(dict(data))
    except ValidationError as e:
        problems = "; ".join(
            f"{'.'.join(str(p) for p in err['loc']) or 'sandbox'}: {err['msg']}" for err in e.errors()
        )
        raise ValueError(
            f"invalid sandbox config: {problems} (backend must be one of: docker, local, ray)"
        ) from None


def make_sandbox(
    config: Mapping[str, Any] | SandboxBackendConfig | None = None,
    *,
    image: str | None = None,
    copy_from: str | Path | None = None,
    run_id: str | None = None,
    labels: Mapping[str, str] | None = None,
) -> Sandbox:
    """An unstarted sandbox for `config` (default: Docker). Use `async with make_sandbox(...) as sb:`.

    image: container image (Docker; default config.image). copy_from: host directory copied into the sandbox's
    workdir at start. run_id: groups sandboxes of one run (label, used by `sandboxes ls/reap`).
    """
    cfg = parse_sandbox_config(config) if config is not None else DockerSandboxConfig()
    return cfg.build(image=image, copy_from=copy_from, run_id=run_id, labels=labels)
