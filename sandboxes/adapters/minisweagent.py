"""mini-swe-agent (PyPI `mini-swe-agent` 2.x) environment backed by a `sandboxes` sandbox.

mini-swe-agent's `Environment` protocol is sync: `execute(action, cwd="", *, timeout=None) -> {"output",
"returncode", "exception_info"}`, plus `get_template_vars()` and `serialize()`; it raises `Submitted` when the
output's first line is COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT. This class implements it over a SyncSandbox, so
mini-swe-agent gets our limits, leak-proofing and persistent shell (its own Docker env runs each command in a
fresh `docker exec`). Use it directly, or in a mini-swe-agent YAML:
    environment: {environment_class: sandboxes.adapters.minisweagent.SandboxEnvironment, image: ...}
"""

from __future__ import annotations

import os
import platform
import shlex
from typing import Any

from pydantic import Field

from sandboxes.base import Sandbox, SandboxError
from sandboxes.config import (
    DockerSandboxConfig,
    SandboxBackendConfig,
    SandboxConfig,
    StrictConfig,
    make_sandbox,
    parse_sandbox_config,
)
from sandboxes.sync import SyncSandbox

SUBMIT_LINE = "COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT"  # mini-swe-agent's submission sentinel


class SandboxEnvironmentConfig(StrictConfig):
    """mini-swe-agent environment settings plus the sandbox backend config.

    The fields mini-swe-agent's own DockerEnvironment takes and its shipped configs set (cwd, timeout, env,
    forward_env, interpreter, container_timeout) mean the same here; its Docker CLI knobs (executable, run_args,
    pull_timeout) are rejected: limits, network and image come from `sandbox`, not from `docker run` flags.
    """

    image: str | None = None  # image for the sandbox (null = the backend config's default)
    cwd: str = ""  # per-command working directory; "" = the persistent shell's current directory
    timeout: int = 30  # default per-command timeout, seconds
    env: dict[str, str] = Field(default_factory=dict)  # extra environment for every command
    forward_env: list[str] = Field(default_factory=list)  # host variables passed on when set (env wins)
    interpreter: list[str] = Field(
        default_factory=lambda: ["bash", "-c"]
    )  # a bash interpreter runs in the persistent shell; any other gets the command as its last argument
    container_timeout: str | None = None  # sandbox lifetime in `sleep` units (90s, 30m, 2h, 1d); null = ttl
    sandbox: SandboxConfig = Field(
        default_factory=lambda: DockerSandboxConfig()
    )  # backend config (docker or local)
    environment_class: str | None = (
        None  # accepted because mini-swe-agent's get_environment passes it through
    )


def _seconds(duration: str) -> float:
    """`sleep`-style duration ("90", "90s", "30m", "2h", "1d") in seconds."""
    units = {"s": 1, "m": 60, "h": 3600, "d": 86400}
    text = duration.strip().lower()
    scale = units.get(text[-1:], 0)
    try:
        return float(text[:-1] if scale else text) * (scale or 1)
    except ValueError:
        raise ValueError(f"container_timeout: expected e.g. 90s, 30m or 2h, got {duration!r}") from None


class SandboxEnvironment:
    """A mini-swe-agent Environment running every action in one persistent sandbox shell."""

    def __init__(self, *, existing: Sandbox | SyncSandbox | None = None, **kwargs: Any) -> None:
        """existing: a started SyncSandbox the caller keeps owning, or an unstarted async Sandbox (started and
        closed here); None builds one from the config (kwargs = SandboxEnvironmentConfig fields)."""
        self.config = SandboxEnvironmentConfig(**kwargs)
        self._owns = not isinstance(existing, SyncSandbox)
        if isinstance(existing, SyncSandbox):
            self.sandbox = existing
        else:
            if existing is None:
                existing = make_sandbox(self._backend(), image=self.config.image, run_id="mini-swe-agent")
            self.sandbox = SyncSandbox(existing)
            self.sandbox.start()

    def _backend(self) -> SandboxBackendConfig:
        """The sandbox config, with container_timeout as its lifetime when set (Docker)."""
        backend = parse_sandbox_config(self.config.sandbox)
        if self.config.container_timeout and isinstance(backend, DockerSandboxConfig):
            backend = backend.model_copy(update={"ttl": _seconds(self.config.container_timeout)})
        return backend

    def _command(self, command: str) -> str:
        interp = self.config.interpreter
        if interp and os.path.basename(interp[0]) == "bash" and interp[-1] in ("-c", "-lc"):
            return command  # bash: the persistent shell itself (cd and export persist)
        return shlex.join([*interp, command])

    def execute(self, action: dict, cwd: str = "", *, timeout: int | None = None) -> dict[str, Any]:
        from minisweagent.exceptions import Submitted

        command = self._command(action.get("command", ""))
        limit = timeout or self.config.timeout
        forwarded = {k: os.environ[k] for k in self.config.forward_env if k in os.environ}
        env = forwarded | self.config.env
        try:
            result = self.sandbox.exec(
                command, timeout=limit, cwd=cwd or self.config.cwd or None, env=env or None
            )
            output = {"output": result.output, "returncode": result.exit_code, "exception_info": ""}
            if result.timed_out:
                output["exception_info"] = f"The command timed out after {limit}s and was killed."
        except SandboxError as e:
            output = {
                "output": "",
                "returncode": -1,
                "exception_info": f"Sandbox failure: {e}",
                "extra": {"exception_type": type(e).__name__, "exception": str(e)},
            }
        lines = str(output["output"]).lstrip().splitlines(keepends=True)
        if lines and lines[0].strip() == SUBMIT_LINE and output["returncode"] == 0:
            submission = "".join(lines[1:])
            raise Submitted(
                {
                    "role": "exit",
                    "content": submission,
                    "extra": {"exit_status": "Submitted", "submission": submission},
                }
            )
        return output

    def get_template_vars(self, **kwargs: Any) -> dict[str, Any]:
        from minisweagent.utils.serialize import recursive_merge

        return recursive_merge(self.config.model_dump(), platform.uname()._asdict(), kwargs)

    def serialize(self) -> dict:
        cls = f"{type(self).__module__}.{type(self).__name__}"
        env = self.config.model_dump(mode="json")
        return {"info": {"config": {"environment": env, "environment_type": cls}}}

    def cleanup(self) -> None:
        """Remove the sandbox (only one this environment created)."""
        if self._owns:
            self.sandbox.close()

    def __enter__(self) -> SandboxEnvironment:
        return self

    def __exit__(self, *exc: object) -> None:
        self.cleanup()
