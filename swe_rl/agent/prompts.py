"""Prompt templates: bundled files in swe_rl/agent/templates/, each replaceable by a file named in AgentConfig.

The bundled files are chosen by the agent profile (swe_rl.agent.profiles) and the action format; the tool list
filled in is the profile's. `prompt_config_file` takes an R2E-Gym agent YAML (`system_prompt`, `instance_prompt`),
e.g. R2E-Gym's edit_non_fn_calling.yaml for DeepSWE's exact prompts.
Placeholders are `{name}` and only known names are substituted (issue texts and JSON examples keep their braces).
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Any

import yaml

from swe_rl.agent.chat import render
from swe_rl.agent.config import AgentConfig
from swe_rl.agent.profiles import get_profile
from swe_rl.agent.toolset import TOOL_SPECS, ToolSpec


def _read(override: str | None, bundled: str, field: str) -> str:
    if override is None:
        return (resources.files("swe_rl.agent.templates") / bundled).read_text()
    path = Path(override)
    if not path.is_file():
        raise FileNotFoundError(f"AgentConfig.{field}={override!r}: file not found")
    return path.read_text()


def _r2e_prompts(path: str) -> tuple[str, str]:
    """(system, task) from an R2E-Gym agent config YAML; one clear error for anything else."""
    field = f"AgentConfig.prompt_config_file={path!r}"
    if not Path(path).is_file():
        raise FileNotFoundError(f"{field}: file not found")
    data = yaml.safe_load(Path(path).read_text())
    if not isinstance(data, dict) or not all(
        isinstance(data.get(k), str) for k in ("system_prompt", "instance_prompt")
    ):
        raise ValueError(
            f"{field}: expected a YAML mapping with string keys system_prompt and instance_prompt"
        )
    return data["system_prompt"], data["instance_prompt"]


def renders_tools(tokenizer: Any, tools: list[dict], template_kwargs: dict[str, Any]) -> bool:
    """Whether the tokenizer's chat template renders a `tools` list (Qwen's do; the tiny ChatML one does not)."""
    msgs = [{"role": "system", "content": "s"}, {"role": "user", "content": "u"}]
    plain = render(tokenizer, msgs, add_generation_prompt=True, **template_kwargs)
    return render(tokenizer, msgs, add_generation_prompt=True, tools=tools, **template_kwargs) != plain


def fill(template: str, **values: str) -> str:
    """One pass, so a substituted value (an issue text) is never itself searched for placeholders."""
    return re.sub(r"\{(\w+)\}", lambda m: values.get(m.group(1), m.group(0)), template)


def describe_tools(specs: tuple[ToolSpec, ...] = TOOL_SPECS) -> str:
    """The R2E-Gym style plain-text function list for the XML system prompt."""
    blocks = []
    for i, spec in enumerate(specs, 1):
        lines = [f"---- BEGIN FUNCTION #{i}: {spec.name} ----", f"Description: {spec.description}"]
        if spec.params:
            lines.append("Parameters:")
            for j, p in enumerate(spec.params, 1):
                req = "required" if p.required else "optional"
                lines.append(f"  ({j}) {p.name} ({p.type}, {req}): {p.description}")
        else:
            lines.append("No parameters are required for this function.")
        lines.append(f"---- END FUNCTION #{i} ----")
        blocks.append("\n".join(lines))
    return "\n\n".join(blocks)


@dataclass(frozen=True)
class Prompts:
    system: str
    task_template: str
    steps_remaining: str
    last_step: str
    token_warning: str
    template_tools: list[dict] | None = None  # Hermes schemas for the chat template's own tools block

    @classmethod
    def load(cls, cfg: AgentConfig) -> Prompts:
        profile = get_profile(cfg.profile)
        bundled_system = profile.system_hermes if cfg.action_format == "hermes" else profile.system_xml
        system_text = _read(cfg.system_prompt_file, bundled_system, "system_prompt_file")
        task = _read(cfg.task_prompt_file, profile.task, "task_prompt_file")
        if cfg.prompt_config_file is not None:
            system_text, task = _r2e_prompts(cfg.prompt_config_file)
        tools_json = "\n".join(json.dumps(s.json_schema()) for s in profile.specs)
        template_tools: list[dict] | None = None
        if cfg.action_format == "hermes" and "{tools_json}" not in system_text:
            template_tools = [s.json_schema() for s in profile.specs]  # the template renders its own block
        system = fill(system_text, tool_descriptions=describe_tools(profile.specs), tools_json=tools_json)
        notes = yaml.safe_load(_read(cfg.notes_file, "notes.yaml", "notes_file")) or {}
        missing = {"steps_remaining", "last_step", "token_warning"} - set(notes)
        if missing:
            raise ValueError(f"notes file: missing keys {sorted(missing)}")
        return cls(
            system.strip(),
            task.strip(),
            notes["steps_remaining"],
            notes["last_step"],
            notes["token_warning"],
            template_tools,
        )

    def for_template(self, tokenizer: Any, template_kwargs: dict[str, Any]) -> tuple[str, dict[str, Any]]:
        """(system prompt, chat template kwargs) for this tokenizer: Hermes tools go to the template (`tools=`),
        which renders the model's own tools block; a template that ignores `tools` gets our block in the system
        prompt instead (tools_hermes.md), so the model always sees the tools once."""
        if not self.template_tools:
            return self.system, dict(template_kwargs)
        if renders_tools(tokenizer, self.template_tools, template_kwargs):
            return self.system, {**template_kwargs, "tools": self.template_tools}
        block = _read(None, "tools_hermes.md", "")
        tools_json = "\n".join(json.dumps(t) for t in self.template_tools)
        return self.system + "\n\n" + fill(block, tools_json=tools_json).strip(), dict(template_kwargs)

    def task(self, problem_statement: str, repo_dir: str) -> str:
        return fill(self.task_template, problem_statement=problem_statement.strip(), repo_dir=repo_dir)

    def step_note(self, remaining: int) -> str:
        return self.last_step if remaining <= 1 else fill(self.steps_remaining, remaining=str(remaining))
