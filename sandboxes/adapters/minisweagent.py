"""mini-swe-agent (PyPI `mini-swe-agent` 2.x) environment backed by a `sandboxes` sandbox.

mini-swe-agent's `Environment` protocol is sync: `execute(action, cwd="", *, timeout=None) -> {"output",
"returncode", "exception_info"}`, plus `get_template_vars()` and `serialize()`; it raises `Submitted` when the
output's first line is COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT. This class implements it over a SyncSandbox, so
mini-swe-agent gets our limits, leak-proofing and persistent shell (its own Docker env runs each command in a
fresh `docker exec`). Use it directly, or in a mini-swe-agent YAML:
    environment: {environment_class: sandboxes.adapters.minisweagent.SandboxEnvironment, image: ...}
"""

from __future__ import annotations

import platform
from typing import Any

from pydantic import Field

from sandboxes.base import Sandbox, SandboxError
from sandboxes.config import DockerSandboxConfig, SandboxConfig, StrictConfig, make_sandbox
from sandboxes.sync import SyncSandbox

SUBMIT_LINE = "COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT"  # mini-swe-agent's submission sentinel


class SandboxEnvironmentConfig(StrictConfig):
    """mini-swe-agent environment settings plus the sandbox backend config."""

    image: str | None = None  # image for the sandbox (null = the backend config's default)
    cwd: str = ""  # per-command working directory; "" = the persistent shell's current directory
    timeout: int = 30  # default per-command timeout, seconds
    env: dict[str, str] = Field(default_factory=dict)  # extra environment for every command
    sandbox: SandboxConfig = Field(
        default_factory=lambda: DockerSandboxConfig()
    )  # backend config (docker or local)
    environment_class: str | None = (
        None  # accepted because mini-swe-agent's get_environment passes it through
    )


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
                existing = make_sandbox(self.config.sandbox, image=self.config.image, run_id="mini-swe-agent")
            self.sandbox = SyncSandbox(existing)
            self.sandbox.start()

    def execute(self, action: dict, cwd: str = "", *, timeout: int | None = None) -> dict[str, Any]:
        from minisweagent.exceptions import Submitted

        command = action.get("command", "")
        limit = timeout or self.config.timeout
        try:
            result = self.sandbox.exec(
                command, timeout=limit, cwd=cwd or self.config.cwd or None, env=self.config.env or None
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
        return self.config.model_dump() | platform.uname()._asdict() | kwargs

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
