"""sandboxes: hardened, standalone sandboxes for coding agents (no swe_rl, torch or ray imports).

    from sandboxes import make_sandbox
    async with make_sandbox({"backend": "docker"}, image="swe-rl/base:bookworm") as sb:
        result = await sb.exec("python3 -V")

Importing this package is cheap: backends (and the docker SDK) load on first use.
"""

from sandboxes.base import (
    EngineUnreachableError,
    ExecResult,
    Sandbox,
    SandboxDiedError,
    SandboxError,
    SandboxStartError,
    SandboxTimeoutError,
)
from sandboxes.config import (
    DockerSandboxConfig,
    Limits,
    LocalSandboxConfig,
    SandboxBackendConfig,
    SandboxConfig,
    make_sandbox,
    parse_sandbox_config,
)
from sandboxes.sync import SyncSandbox

__all__ = [
    "DockerSandboxConfig",
    "EngineUnreachableError",
    "ExecResult",
    "Limits",
    "LocalSandboxConfig",
    "Sandbox",
    "SandboxBackendConfig",
    "SandboxConfig",
    "SandboxDiedError",
    "SandboxError",
    "SandboxStartError",
    "SandboxTimeoutError",
    "SyncSandbox",
    "make_sandbox",
    "parse_sandbox_config",
]
