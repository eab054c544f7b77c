"""The agent's tools on the host side: specs (for prompts and Hermes schemas), installation, action -> command.

Tool scripts live in swe_rl/agent/tools/ and run inside the sandbox with its own python3; the loop only builds a
shell command line and reads the output. `submit` (alias `finish`) never reaches the sandbox: it ends the episode.
The specs here are the canonical ones (our parameter names); R2E-Gym's names (`cmd` for execute_bash) are accepted
for every profile through PARAM_ALIASES, and swe_rl.agent.profiles gives each profile the specs its prompt shows.
"""

from __future__ import annotations

import base64
import io
import shlex
import tarfile
from dataclasses import dataclass
from importlib import resources
from typing import Any

SCRIPTS = ("file_editor", "search", "execute_bash")
SUBMIT = "submit"
ALIASES = {
    "finish": SUBMIT,
    "str_replace_editor": "file_editor",
    "bash": "execute_bash",
    "search_dir": "search",
}
# R2E-Gym / DeepSWE parameter names -> ours, accepted whatever the profile (a model trained on either interface)
PARAM_ALIASES: dict[str, dict[str, str]] = {"execute_bash": {"cmd": "command"}}
MAX_ARG_BYTES = 100_000  # Linux caps one argv string at 128 KiB; refuse before the shell does


@dataclass(frozen=True)
class Param:
    name: str
    type: str  # JSON schema type
    required: bool
    description: str
    enum: tuple[str, ...] = ()


@dataclass(frozen=True)
class ToolSpec:
    name: str
    description: str
    params: tuple[Param, ...]

    def json_schema(self) -> dict[str, Any]:
        """OpenAI/Hermes function schema, as Qwen's template renders inside <tools>."""
        props: dict[str, Any] = {}
        for p in self.params:
            props[p.name] = {"type": p.type, "description": p.description}
            if p.enum:
                props[p.name]["enum"] = list(p.enum)
        required = [p.name for p in self.params if p.required]
        return {
            "type": "function",
            "function": {
                "name": self.name,
                "description": self.description,
                "parameters": {"type": "object", "properties": props, "required": required},
            },
        }


TOOL_SPECS = (
    ToolSpec(
        "file_editor",
        "View, create and edit files. `view` shows a file with line numbers (optionally a line range) or lists a "
        "directory two levels deep; `create` writes a new file; `str_replace` replaces old_str, which must occur "
        "exactly once, with new_str; `insert` inserts new_str after line insert_line; `undo_edit` reverts the last "
        "edit of path.",
        (
            Param(
                "command",
                "string",
                True,
                "One of view, create, str_replace, insert, undo_edit.",
                ("view", "create", "str_replace", "insert", "undo_edit"),
            ),
            Param("path", "string", True, "Absolute path to a file or directory, e.g. /testbed/pkg/mod.py."),
            Param("file_text", "string", False, "Content of the file for `create`."),
            Param("old_str", "string", False, "Exact text to replace for `str_replace` (must be unique)."),
            Param(
                "new_str", "string", False, "Replacement text for `str_replace`; text to add for `insert`."
            ),
            Param("insert_line", "integer", False, "For `insert`: new_str goes after this line (0 = top)."),
            Param(
                "view_range",
                "array",
                False,
                "For `view` of a file: [start, end], 1-based; end -1 = to the end.",
            ),
            Param(
                "concise",
                "boolean",
                False,
                "For `view` of a Python file: true shows its structure with long function bodies elided.",
            ),
        ),
    ),
    ToolSpec(
        "search",
        "Search for a literal term in a file (matching lines) or recursively in a directory (files and counts).",
        (
            Param("search_term", "string", True, "The literal text to search for."),
            Param("path", "string", False, "File or directory to search in (default: the repository root)."),
        ),
    ),
    ToolSpec(
        "execute_bash",
        "Run a bash command in the repository and return its output and exit code. Long-running commands time "
        "out; interactive programs, pip and git commands that rewrite the repository are blocked.",
        (Param("command", "string", True, "The bash command to run, e.g. `python -m pytest -q tests/`."),),
    ),
    ToolSpec(
        SUBMIT,
        "Finish the episode when the task is solved (or when you cannot make further progress).",
        (),
    ),
)


def tool_names() -> list[str]:
    return [s.name for s in TOOL_SPECS]


def canonical_name(name: str) -> str:
    return ALIASES.get(name, name)


def script_source(name: str) -> bytes:
    return (resources.files("swe_rl.agent.tools") / f"{name}.py").read_bytes()


def tools_archive() -> bytes:
    """The tool scripts as a gzipped tar (mode 755), for a one-round-trip install."""
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:gz") as tar:
        for name in SCRIPTS:
            data = script_source(name)
            info = tarfile.TarInfo(f"{name}.py")
            info.size, info.mode = len(data), 0o755
            tar.addfile(info, io.BytesIO(data))
    return buf.getvalue()


async def install_tools(sandbox: Any, tools_dir: str, timeout: float = 60) -> None:
    """Copy the tool scripts into the sandbox, executable: one exec (base64 tar in the command line, ~10 KB);
    per-file writes as the fallback for images without base64/tar."""
    d = shlex.quote(tools_dir)
    b64 = base64.b64encode(tools_archive()).decode()
    res = await sandbox.exec(
        f"mkdir -p {d} && printf '%s' '{b64}' | base64 -d | tar -xz -C {d}", timeout=timeout
    )
    if res.exit_code == 0:
        return
    await sandbox.exec(f"mkdir -p {d}", timeout=timeout)
    for name in SCRIPTS:
        await sandbox.write_file(f"{tools_dir}/{name}.py", script_source(name), mode=0o755)


def _as_arg(value: Any) -> str:
    if isinstance(value, (list, dict)):
        import json

        return json.dumps(value)
    return str(value)


def canonical_params(name: str, params: dict[str, Any]) -> dict[str, Any]:
    """R2E-Gym parameter names -> ours (`cmd` -> `command` for execute_bash); both at once is an error."""
    aliases = PARAM_ALIASES.get(canonical_name(name), {})
    out: dict[str, Any] = {}
    for key, value in params.items():
        key = aliases.get(key, key)
        if key in out:
            raise ValueError(f"Parameter {key!r} given twice (under two names) for function {name!r}.")
        out[key] = value
    return out


def build_command(
    name: str, params: dict[str, Any], *, python: str, tools_dir: str, repo_dir: str, timeout: float,
    bash_style: str = "swe_rl", auto_concise: int | None = None,
) -> str:  # fmt: skip
    """Shell command that runs tool `name` with `params`. Raises ValueError (-> an error observation).
    `bash_style` and `auto_concise` come from the agent profile (swe_rl.agent.profiles)."""
    name = canonical_name(name)
    spec = next((s for s in TOOL_SPECS if s.name == name), None)
    if spec is None or name == SUBMIT:
        raise ValueError(f"Unknown function {name!r}. Available functions: {', '.join(tool_names())}.")
    params = canonical_params(name, params)
    allowed = {p.name for p in spec.params}
    unknown = sorted(set(params) - allowed)
    if unknown:
        shown = sorted(allowed | set(PARAM_ALIASES.get(name, {})))
        raise ValueError(f"Unknown parameter(s) {unknown} for function {name!r}; allowed: {shown}.")
    missing = [p.name for p in spec.params if p.required and p.name not in params]
    if missing:
        raise ValueError(f"Missing required parameter(s) {missing} for function {name!r}.")
    script = shlex.quote(f"{tools_dir}/{name}.py")
    argv = [*(shlex.quote(w) for w in shlex.split(python)), script]  # python may carry flags
    values = dict(params)
    if name == "file_editor":
        argv.append(shlex.quote(str(values.pop("command"))))
        if auto_concise is not None:
            argv.append(f"--auto_concise={int(auto_concise)}")
    elif name == "search":
        values.setdefault("path", repo_dir)
    elif name == "execute_bash":
        argv += ["--timeout", str(timeout), "--cwd", shlex.quote(repo_dir), f"--style={bash_style}"]
    for key, value in values.items():
        text = _as_arg(value)
        if len(text.encode()) > MAX_ARG_BYTES:
            raise ValueError(f"Parameter {key!r} is too long ({len(text)} characters); split the edit.")
        argv.append(f"--{key}=" + shlex.quote(text))  # `=` form: values may start with "-"
    return " ".join(argv)
