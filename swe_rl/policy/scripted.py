"""Scripted policies: fixed replies, tokenized for real. Test helpers and baselines for the rollout/eval layers.

- `ReplayPolicy(tokenizer, replies)`: answers turn k with replies[k] (then the last one again), token-in/token-out.
- `ScriptedGoldPolicy(task, tokenizer)`: replays a task's gold patch through the real tools: view each file,
  str_replace each hunk (create new files, rm deleted ones), run the tests, submit.
One instance per episode: the reply index is the number of calls so far.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from swe_rl.agent.parsing import ActionFormat, format_action
from swe_rl.policy.base import Completion, SamplingParams


class ReplayPolicy:
    def __init__(self, tokenizer: Any, replies: list[str], *, turn_end_token: str = "<|im_end|>"):
        if not replies:
            raise ValueError("replies: expected at least one reply")
        self.tokenizer = tokenizer
        self.replies = list(replies)
        self.turn_end_id = tokenizer.convert_tokens_to_ids(turn_end_token)
        self.calls = 0

    async def generate(self, prompt_ids: list[int], sampling: SamplingParams) -> Completion:
        text = self.replies[min(self.calls, len(self.replies) - 1)]
        self.calls += 1
        ids = [*self.tokenizer(text, add_special_tokens=False)["input_ids"], self.turn_end_id]
        finish = "stop"
        if len(ids) > sampling.max_new_tokens:
            ids, finish = ids[: max(0, sampling.max_new_tokens)], "length"
        text = self.tokenizer.decode(ids, skip_special_tokens=False)
        return Completion(ids, [0.0] * len(ids), text, finish, [0.0] * len(ids))


@dataclass
class FilePatch:
    path: str
    old_path: str
    hunks: list[tuple[str, str]] = field(default_factory=list)  # (old text, new text) per hunk
    new_file: bool = False
    deleted: bool = False


def parse_unified_diff(patch: str) -> list[FilePatch]:
    """A minimal unified-diff reader (git format): enough to replay a gold patch as str_replace edits."""
    files: list[FilePatch] = []
    cur: FilePatch | None = None
    old: list[str] = []
    new: list[str] = []

    def flush() -> None:
        if cur is not None and (old or new):
            cur.hunks.append(("\n".join(old), "\n".join(new)))
        old.clear()
        new.clear()

    for line in patch.splitlines():
        if line.startswith("diff --git "):
            flush()
            a, b = line[len("diff --git ") :].split(" b/", 1)
            cur = FilePatch(path=b, old_path=a.removeprefix("a/"))
            files.append(cur)
        elif cur is None or line.startswith(("index ", "+++ ", "--- ", "\\ No newline")):
            if cur is not None and line == "--- /dev/null":
                cur.new_file = True
            if cur is not None and line == "+++ /dev/null":
                cur.deleted = True
        elif line.startswith(("new file mode", "deleted file mode", "similarity", "rename ")):
            continue
        elif line.startswith("@@"):
            flush()
        elif line.startswith("-"):
            old.append(line[1:])
        elif line.startswith("+"):
            new.append(line[1:])
        else:  # context (" " prefix, or an empty line that lost its space)
            old.append(line[1:])
            new.append(line[1:])
    flush()
    return files


def gold_replies(
    patch: str,
    *,
    repo_dir: str = "/testbed",
    fmt: ActionFormat = "xml",
    test_command: str = "python -m pytest -q",
) -> list[str]:
    replies = []
    for fp in parse_unified_diff(patch):
        path = f"{repo_dir}/{fp.path}"
        if fp.deleted:
            replies.append(format_action("execute_bash", {"command": f"rm {path}"}, fmt, "Remove the file."))
            continue
        if fp.new_file:
            text = "\n".join(new for _, new in fp.hunks) + "\n"
            replies.append(format_action("file_editor", {"command": "create", "path": path, "file_text": text}, fmt,
                                         "Create the new file."))  # fmt: skip
            continue
        replies.append(
            format_action("file_editor", {"command": "view", "path": path}, fmt, "Look at the file.")
        )
        for old, new in fp.hunks:
            params = {"command": "str_replace", "path": path, "old_str": old, "new_str": new}
            replies.append(format_action("file_editor", params, fmt, "Fix the code."))
    replies.append(format_action("execute_bash", {"command": test_command}, fmt, "Run the tests."))
    replies.append(format_action("submit", {}, fmt, "The fix is done."))
    return replies


class ScriptedGoldPolicy(ReplayPolicy):
    def __init__(self, task: Any, tokenizer: Any, *, action_format: ActionFormat = "xml", repo_dir: str = "/testbed",
                 test_command: str = "python -m pytest -q", turn_end_token: str = "<|im_end|>"):  # fmt: skip
        if not task.patch.strip():
            raise ValueError(f"task {task.instance_id}: has no gold patch to replay")
        replies = gold_replies(task.patch, repo_dir=repo_dir, fmt=action_format, test_command=test_command)
        super().__init__(tokenizer, replies, turn_end_token=turn_end_token)
