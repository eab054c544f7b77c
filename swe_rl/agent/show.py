"""`swe-rl show TRAJ`: render a trajectory (JSONL line or JSON file) readably in the terminal with rich.

Header (task, exit status, reward, steps, tokens, timings), then each turn: the assistant's reply (its parsed action
or parse error), the observation (clipped), and the patch as a highlighted diff. `--tokens` adds a token-level view
of the mask (policy tokens highlighted) for checking the loss mask by eye.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import typer

from swe_rl.agent.trajectory import Trajectory, mask_runs, read_jsonl

ROLE_STYLE = {"system": "magenta", "user": "cyan", "tool": "cyan", "assistant": "green"}


def load_trajectories(path: Path) -> list[Trajectory]:
    if not path.is_file():
        raise typer.BadParameter(f"{path}: no such file", param_hint="TRAJ")
    try:  # a whole-file JSON object (pretty-printed trajectory) ...
        data = json.loads(path.read_text())
        if isinstance(data, dict):
            return [Trajectory(**data)]
    except (json.JSONDecodeError, TypeError):
        pass
    try:  # ... or JSONL, one trajectory per line
        return read_jsonl(path)
    except ValueError as e:
        raise typer.BadParameter(str(e), param_hint="TRAJ") from None


def _clip(text: str, limit: int) -> str:
    if limit <= 0 or len(text) <= limit:
        return text
    return (
        text[: limit // 2]
        + f"\n… [{len(text) - limit} characters hidden; --max-chars 0 shows all] …\n"
        + text[-limit // 2 :]
    )


def header_rows(traj: Trajectory) -> list[tuple[str, str]]:
    m = traj.metrics
    reward = "None (unscored)" if traj.reward is None else f"{traj.reward:g}"
    rows = [
        ("task", f"{traj.task_id}  (sample {traj.sample_idx})"),
        ("exit", f"{traj.exit_status}  terminated={traj.terminated} truncated={traj.truncated}"),
        ("reward", f"{reward}  resolved={traj.resolved}"),
        ("steps", f"{m.get('steps', '?')}  format errors {m.get('format_errors', '?')}  tool calls {m.get('tool_calls', '?')}"),
        ("tokens", f"{len(traj.token_ids)} total, {sum(traj.loss_mask)} policy in {len(mask_runs(traj.loss_mask))} turns, prompt {traj.prompt_len}"),
    ]  # fmt: skip
    timing = [f"{k} {m[k]:.2f}s" for k in ("wall_s", "policy_s", "tools_s", "setup_s", "patch_s") if k in m]
    if timing:
        rows.append(("time", "  ".join(timing)))
    return rows


def render(
    traj: Trajectory, console: Any, *, max_chars: int = 3000, tokens: bool = False, tokenizer: Any = None
) -> None:
    from rich.panel import Panel
    from rich.syntax import Syntax
    from rich.table import Table
    from rich.text import Text

    table = Table.grid(padding=(0, 2))
    for k, v in header_rows(traj):
        table.add_row(Text(k, style="bold"), v)
    console.print(Panel(table, title="trajectory", border_style="blue"))
    step = 0
    for msg in traj.messages:
        role = msg.get("role", "?")
        title = role
        if role == "assistant":
            step += 1
            title = f"assistant · step {step}"
            if "action" in msg:
                title += f" · {msg['action']['name']}"
            if msg.get("finish_reason") == "length":
                title += " · cut at max tokens"
        body = Text(_clip(str(msg.get("content", "")), max_chars))
        if msg.get("parse_error"):
            body.append(f"\n\n✗ {msg['parse_error']}", style="bold red")
        console.print(
            Panel(body, title=title, title_align="left", border_style=ROLE_STYLE.get(role, "white"))
        )
    if traj.error:
        console.print(
            Panel(Text(_clip(traj.error, max_chars), style="red"), title="error", border_style="red")
        )
    if traj.patch:
        console.print(Panel(Syntax(_clip(traj.patch, max_chars * 4), "diff", word_wrap=True), title="patch"))
    else:
        console.print(Text("(empty patch)", style="dim"))
    if tokens and tokenizer is not None:
        view = Text()
        for tok, m in zip(traj.token_ids, traj.loss_mask, strict=True):
            view.append(
                tokenizer.decode([tok], skip_special_tokens=False), style="on dark_green" if m else ""
            )
        console.print(Panel(view, title="tokens (policy tokens highlighted)"))


def show_command(
    traj_path: Path = typer.Argument(
        ..., metavar="TRAJ", help="Trajectory JSONL (one per line) or a JSON file."
    ),
    index: int = typer.Option(
        0, help="Which trajectory of a JSONL file (0-based; negative counts from the end)."
    ),
    task: str | None = typer.Option(
        None, help="Show the first trajectory of this task id instead of --index."
    ),
    max_chars: int = typer.Option(3000, help="Clip each message to this many characters (0 = no clipping)."),
    tokens: bool = typer.Option(False, help="Also show the token stream with policy tokens highlighted."),
    tokenizer: str | None = typer.Option(
        None, help="Tokenizer path for --tokens (default: the tiny demo tokenizer)."
    ),
) -> None:
    """Render one agent trajectory readably in the terminal."""
    from rich.console import Console

    trajs = load_trajectories(traj_path)
    if task is not None:
        picked = [t for t in trajs if t.task_id == task]
        if not picked:
            raise typer.BadParameter(f"no trajectory for task {task!r} in {traj_path}", param_hint="--task")
        traj = picked[0]
    else:
        if not -len(trajs) <= index < len(trajs):
            raise typer.BadParameter(
                f"{traj_path} has {len(trajs)} trajectories; index {index} is out of range",
                param_hint="--index",
            )
        traj = trajs[index]
    tok = None
    if tokens:
        if tokenizer:
            from swe_rl.policy.tiny import load_tokenizer

            tok = load_tokenizer(tokenizer)
        else:
            from swe_rl.policy.tiny import build_tokenizer

            tok = build_tokenizer()
    render(traj, Console(), max_chars=max_chars, tokens=tokens, tokenizer=tok)
