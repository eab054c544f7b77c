"""Agent profiles: which tool interface the model sees (prompt specs, bundled prompts, observation format).

- `swe_rl`: the project's own interface (execute_bash(command), file_editor, search, submit).
- `deepswe`: R2E-Gym's interface, which DeepSWE-Preview and rLLM's SWE agent were trained with:
  `file_editor(command, path, file_text, old_str, new_str, insert_line, view_range, concise)`,
  `execute_bash(cmd)`, `search(search_term, path)`, `finish(command=submit, result)`; XML calls; observations
  `Execution output of [NAME]:` (execute_bash: `Exit code: ...` first, then [STDOUT] and [STDERR], more than 80
  lines cut to the first and last 40); Python files over 110 lines viewed without a range come back concise.
  The bundled prompts describe these tools in our own words. For an exact reproduction set
  `agent.prompt_config_file` to R2E-Gym's `src/r2egym/agenthub/config/edit_non_fn_calling.yaml` (github.com/
  R2E-Gym/R2E-Gym; its `system_prompt` and `instance_prompt` are rLLM's SWE_SYSTEM_PROMPT and SWE_USER_PROMPT).
The sandbox side is the same for both: every profile accepts both parameter spellings (toolset.PARAM_ALIASES).
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from swe_rl.agent.toolset import TOOL_SPECS, Param, ToolSpec

R2E_BASH_LINES = 40  # R2E-Gym keeps the first and last 40 lines of a longer execute_bash output


@dataclass(frozen=True)
class AgentProfile:
    name: str
    specs: tuple[ToolSpec, ...]  # what the prompt (and the Hermes schema) shows
    system_xml: str  # bundled template file names in swe_rl/agent/templates/
    system_hermes: str
    task: str
    bash_style: str  # execute_bash.py --style
    auto_concise: int | None  # file_editor view: concise past this many lines (Python files, no range)
    bash_line_cap: int | None  # observation: keep this many first and last lines of execute_bash output

    def observation(self, name: str, output: str) -> str:
        """The observation text for tool `name`'s (already bounded) output."""
        if self.bash_style == "r2e" and name == "execute_bash":
            first, _, rest = output.partition("\n")
            if first.startswith("Exit code:"):
                return f"{first}\nExecution output of [{name}]:\n{self._cap_lines(rest)}"
        return f"Execution output of [{name}]:\n{output}"

    def _cap_lines(self, text: str) -> str:
        lines = text.split("\n")
        n = self.bash_line_cap
        if n is None or len(lines) <= 2 * n:
            return text
        divider = "-" * 50
        return "\n".join([*lines[:n], divider, "<Observation truncated in middle for saving context>",
                          divider, *lines[-n:]])  # fmt: skip


def _deepswe_specs() -> tuple[ToolSpec, ...]:
    by_name = {s.name: s for s in TOOL_SPECS}
    bash = ToolSpec(
        "execute_bash",
        "Run a bash command in the repository (the working directory is the repository root) and return its "
        "exit code, standard output and standard error. Long-running commands are stopped after a timeout; "
        "interactive programs and pip are not available.",
        (Param("cmd", "string", True, "The bash command to run, e.g. `python reproduce_issue.py`."),),
    )
    finish = ToolSpec(
        "finish",
        "End the task once the issue is fixed, or when no further progress can be made.",
        (
            Param("command", "string", True, "Always `submit`.", ("submit",)),
            Param("result", "string", False, "An optional final message (may be empty)."),
        ),
    )
    search = replace(
        by_name["search"], description=by_name["search"].description + " Hidden files are skipped."
    )
    return (by_name["file_editor"], bash, search, finish)


PROFILES: dict[str, AgentProfile] = {
    "swe_rl": AgentProfile(
        name="swe_rl", specs=TOOL_SPECS, system_xml="system_xml.md", system_hermes="system_hermes.md",
        task="task.md", bash_style="swe_rl", auto_concise=None, bash_line_cap=None,
    ),
    "deepswe": AgentProfile(
        name="deepswe", specs=_deepswe_specs(), system_xml="system_deepswe.md", system_hermes="system_hermes.md",
        task="task_deepswe.md", bash_style="r2e", auto_concise=110, bash_line_cap=R2E_BASH_LINES,
    ),
}  # fmt: skip


def get_profile(name: str) -> AgentProfile:
    if name not in PROFILES:
        raise ValueError(f"agent.profile={name!r}: expected one of {sorted(PROFILES)}")
    return PROFILES[name]
