"""Scripted policies: fixed replies, tokenized for real. Test helpers and baselines for the rollout/eval layers.

- `ReplayPolicy(tokenizer, replies)`: answers turn k with replies[k] (then the last one again), token-in/token-out.
- `ScriptedGoldPolicy(task, tokenizer)`: replays a task's gold patch through the real tools, so that every hunk
  applies whatever its text (insert-only, delete-only, start/end of file, no final newline, CRLF, line numbers off):
  each hunk is an anchor line inserted above its old lines (nearest to the header's line, as `git apply` finds an
  offset) plus one str_replace of anchor + old lines; new files are created,
  deleted ones removed, renames/copies moved with execute_bash, mode changes chmod-ed; then the tests, submit.
One instance per episode: the reply index is the number of calls so far.
"""

from __future__ import annotations

import base64
import json
import posixpath
import re
import shlex
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


HUNK_HEADER = re.compile(r"^@@ -(\d+)(?:,(\d+))? \+(\d+)(?:,(\d+))? @@")
# A line the policy inserts right above a hunk's old lines, then replaces together with them: whatever the hunk's
# old text is (only context lines that occur everywhere, empty, at the start or end of the file), the str_replace
# it becomes matches exactly once. It never survives an edit, so it is not in the final patch.
ANCHOR = "@@swe-rl-gold-hunk-anchor@@"


@dataclass
class Hunk:
    old_start: int  # the header's first old line (1-based; for old_count 0: the line the new lines follow)
    old_count: int = 0  # lines the header says each side has
    new_count: int = 0
    old: list[str] = field(default_factory=list)  # old side (context + removed), without line ends
    new: list[str] = field(default_factory=list)  # new side (context + added)
    old_nl: bool = True  # the old side's last line ends with a newline (no "\\ No newline at end of file")
    new_nl: bool = True


@dataclass
class FilePatch:
    path: str
    old_path: str
    hunks: list[Hunk] = field(default_factory=list)
    new_file: bool = False
    deleted: bool = False
    renamed: bool = False
    copied: bool = False
    new_mode: str = ""  # "100755" / "100644" when the patch sets it
    binary: bool = False


def _file_header(cur: FilePatch, line: str) -> None:
    """Git's extended header lines (between `diff --git` and the first hunk)."""
    if line.startswith("new file mode "):
        cur.new_file = True  # created files get 644 from the editor: only an executable one needs a chmod
        cur.new_mode = line.split()[-1] if line.endswith("755") else ""
    elif line.startswith("deleted file mode"):
        cur.deleted = True
    elif line.startswith("new mode "):
        cur.new_mode = line.split()[-1]
    elif line.startswith(("rename from ", "copy from ")):
        cur.old_path = line.split(" ", 2)[2]
        cur.renamed, cur.copied = line.startswith("rename"), line.startswith("copy")
    elif line.startswith("rename to ") or line.startswith("copy to "):
        cur.path = line.split(" ", 2)[2]
    elif line.startswith(("GIT binary patch", "Binary files ")):
        cur.binary = True
    elif line == "--- /dev/null":
        cur.new_file = True
    elif line == "+++ /dev/null":
        cur.deleted = True


def _hunk_line(h: Hunk, line: str, last: str) -> str:
    """Add one body line to the hunk; returns its kind ("-", "+", " ") for a following "\\ No newline"."""
    if line.startswith("\\"):  # "\\ No newline at end of file": about the line before it
        h.old_nl = h.old_nl and last not in "- "
        h.new_nl = h.new_nl and last not in "+ "
        return last
    kind = line[:1] if line[:1] in "-+" else " "  # an empty line is a context line that lost its space
    if kind != "+":
        h.old.append(line[1:])
    if kind != "-":
        h.new.append(line[1:])
    return kind


def _in_hunk(h: Hunk | None, line: str) -> bool:
    """The line belongs to the hunk: the header's counts are not used up yet (or it is a "\\" note)."""
    if h is None or line.startswith("diff --git "):  # never a body line: a miscounted header ends here
        return False
    return line.startswith("\\") or len(h.old) < h.old_count or len(h.new) < h.new_count


def parse_unified_diff(patch: str) -> list[FilePatch]:
    """A git-format unified diff -> one FilePatch per file, with its hunks as line lists and line numbers.
    Lines are split on "\\n" only, so a CRLF file keeps its "\\r"s; a hunk takes exactly the lines its header
    counts, so removed lines that look like headers ("--- x") and trailers after the diff are read right."""
    files: list[FilePatch] = []
    cur: FilePatch | None = None
    hunk: Hunk | None = None
    last = " "
    for line in patch.split("\n"):
        if _in_hunk(hunk, line):
            assert hunk is not None
            last = _hunk_line(hunk, line, last)
        elif line.startswith("diff --git "):
            a, b = line[len("diff --git ") :].split(" b/", 1)
            cur, hunk = FilePatch(path=b, old_path=a.removeprefix("a/")), None
            files.append(cur)
        elif cur is not None and (m := HUNK_HEADER.match(line)) is not None:
            old_n, new_n = (int(g) if g is not None else 1 for g in (m.group(2), m.group(4)))
            hunk = Hunk(old_start=int(m.group(1)), old_count=old_n, new_count=new_n)
            cur.hunks.append(hunk)
        elif cur is not None and not cur.hunks:
            _file_header(cur, line)
    return files


def _side_text(lines: list[str], newline: bool) -> str:
    return "".join(f"{x}\n" for x in lines) if newline else "\n".join(lines)


# Puts the anchor above the occurrence of the hunk's old lines nearest to its header's line, as `git apply` looks for
# a hunk at an offset: a gold patch's line numbers may be off (scikit-learn-10908's by 3) and still apply.
PLACE_ANCHOR = (
    "import base64, json, sys\n"
    "d = json.loads(base64.b64decode(sys.argv[1]))\n"
    "t = open(d['path'], newline='').read().split('\\n')\n"
    "o, s = d['old'], d['start']\n"
    "c = [i for i in range(len(t) - len(o) + 1) if t[i : i + len(o)] == o]\n"
    "t.insert(min(c, key=lambda i: abs(i - s)) if c else s, d['anchor'])\n"
    "open(d['path'], 'w', newline='').write('\\n'.join(t))\n"
)


def place_anchor_command(path: str, hunk: Hunk) -> str:
    """The shell command that inserts ANCHOR above the hunk's old lines (nearest occurrence to its header)."""
    arg = base64.b64encode(
        json.dumps({"path": path, "old": hunk.old, "start": hunk.old_start - 1, "anchor": ANCHOR}).encode()
    ).decode()
    return f"python3 -c {shlex.quote(PLACE_ANCHOR)} {arg}"


def hunk_edits(path: str, hunk: Hunk) -> list[tuple[str, dict[str, str]]]:
    """Tool calls that apply one hunk: the anchor line above its old lines (found like `git apply` does), then
    file_editor replaces the anchor and the old lines by the new ones (pure insertions of a zero-context diff:
    one insert after old_start)."""
    new = _side_text(hunk.new, hunk.new_nl)
    if not hunk.old:
        return [("file_editor", {"command": "insert", "path": path, "insert_line": str(hunk.old_start),
                                 "new_str": new.removesuffix("\n")})]  # fmt: skip
    old = f"{ANCHOR}\n" + _side_text(hunk.old, hunk.old_nl)
    return [
        ("execute_bash", {"command": place_anchor_command(path, hunk)}),
        ("file_editor", {"command": "str_replace", "path": path, "old_str": old, "new_str": new}),
    ]


def _bash(command: str, fmt: ActionFormat, thought: str) -> str:
    return format_action("execute_bash", {"command": command}, fmt, thought)


def file_replies(fp: FilePatch, repo_dir: str, fmt: ActionFormat) -> list[str]:
    """The tool calls that turn one file of the patch into its new state."""
    if fp.binary:
        raise ValueError(f"{fp.path}: a binary patch cannot be replayed through the text tools")
    path, src = f"{repo_dir}/{fp.path}", f"{repo_dir}/{fp.old_path}"
    if fp.deleted:
        return [_bash(f"rm {shlex.quote(src)}", fmt, "Remove the file.")]
    replies = []
    if fp.renamed or fp.copied:
        verb = "mv" if fp.renamed else "cp"
        cmd = f"mkdir -p {shlex.quote(posixpath.dirname(path))} && {verb} {shlex.quote(src)} {shlex.quote(path)}"
        replies.append(_bash(cmd, fmt, "Move the file." if fp.renamed else "Copy the file."))
    if fp.new_file:
        text = _side_text(fp.hunks[0].new, fp.hunks[0].new_nl) if fp.hunks else ""
        params = {"command": "create", "path": path, "file_text": text}
        replies.append(format_action("file_editor", params, fmt, "Create the new file."))
    else:  # bottom hunk first, so each hunk's line numbers still hold when its turn comes
        for hunk in sorted(fp.hunks, key=lambda h: h.old_start, reverse=True):
            replies += [format_action(tool, p, fmt, "Fix the code.") for tool, p in hunk_edits(path, hunk)]
    if fp.new_mode:
        mode = "+x" if fp.new_mode.endswith("755") else "-x"
        replies.append(_bash(f"chmod {mode} {shlex.quote(path)}", fmt, "Set the file mode."))
    return replies


def gold_replies(
    patch: str,
    *,
    repo_dir: str = "/testbed",
    fmt: ActionFormat = "xml",
    test_command: str = "python -m pytest -q",
) -> list[str]:
    """Every file of the patch through file_editor/execute_bash, a test run, submit."""
    replies = [r for fp in parse_unified_diff(patch) for r in file_replies(fp, repo_dir, fmt)]
    replies.append(_bash(test_command, fmt, "Run the tests."))
    replies.append(format_action("submit", {}, fmt, "The fix is done."))
    return replies


class ScriptedGoldPolicy(ReplayPolicy):
    def __init__(self, task: Any, tokenizer: Any, *, action_format: ActionFormat = "xml", repo_dir: str = "/testbed",
                 test_command: str = "python -m pytest -q", turn_end_token: str = "<|im_end|>"):  # fmt: skip
        if not task.patch.strip():
            raise ValueError(f"task {task.instance_id}: has no gold patch to replay")
        replies = gold_replies(task.patch, repo_dir=repo_dir, fmt=action_format, test_command=test_command)
        super().__init__(tokenizer, replies, turn_end_token=turn_end_token)
