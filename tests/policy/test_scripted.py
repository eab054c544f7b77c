"""Scripted policies: the gold-patch reader and the replies it produces (real tokenization, parseable actions)."""

from __future__ import annotations

import pytest

from swe_rl.agent.parsing import parse_action
from swe_rl.policy.base import SamplingParams
from swe_rl.policy.scripted import (
    ANCHOR,
    ReplayPolicy,
    ScriptedGoldPolicy,
    gold_replies,
    parse_unified_diff,
)
from swe_rl.tasks.task import Task

PATCH = """diff --git a/pkg/a.py b/pkg/a.py
index 1111111..2222222 100644
--- a/pkg/a.py
+++ b/pkg/a.py
@@ -1,3 +1,3 @@
 def f():
-    return 1
+    return 2

@@ -10,1 +10,2 @@ def g():
 x = 1
+y = 2
diff --git a/pkg/new.py b/pkg/new.py
new file mode 100644
--- /dev/null
+++ b/pkg/new.py
@@ -0,0 +1,2 @@
+A = 1
+B = 2
\\ No newline at end of file
diff --git a/old.txt b/old.txt
deleted file mode 100644
--- a/old.txt
+++ /dev/null
@@ -1 +0,0 @@
-bye
"""


def test_parse_unified_diff():
    files = parse_unified_diff(PATCH)
    assert [f.path for f in files] == ["pkg/a.py", "pkg/new.py", "old.txt"]
    a, new, old = files
    assert [(h.old_start, h.old, h.new) for h in a.hunks] == [
        (1, ["def f():", "    return 1", ""], ["def f():", "    return 2", ""]),
        (10, ["x = 1"], ["x = 1", "y = 2"]),
    ]
    assert new.new_file and new.hunks[0].new == ["A = 1", "B = 2"] and not new.hunks[0].new_nl
    assert old.deleted


@pytest.mark.parametrize("fmt", ["xml", "hermes"])
def test_gold_replies_parse_to_the_right_actions(fmt):
    actions = [parse_action(r, fmt) for r in gold_replies(PATCH, repo_dir="/r", fmt=fmt)]
    names = [(a.name, None if a.params.get("command", "").startswith("python3 -c") else a.params.get("command"))
             for a in actions]  # fmt: skip
    assert names == [
        *[("execute_bash", None), ("file_editor", "str_replace")] * 2,  # bottom hunk first
        ("file_editor", "create"),
        ("execute_bash", "rm /r/old.txt"),
        ("execute_bash", "python -m pytest -q"),
        ("submit", None),
    ]
    assert actions[0].params["command"].startswith("python3 -c") and actions[2].params["command"].startswith(
        "python3"
    )
    assert actions[3].params["old_str"] == f"{ANCHOR}\ndef f():\n    return 1\n\n"
    assert actions[4].params["file_text"] == "A = 1\nB = 2"


def test_binary_patch_is_refused_by_name():
    patch = "diff --git a/logo.png b/logo.png\nindex 1..2 100644\nGIT binary patch\nliteral 5\nabc\n"
    with pytest.raises(ValueError, match=r"logo\.png: a binary patch"):
        gold_replies(patch)


async def test_replay_policy_tokens_and_length_cut(tiny_tokenizer):
    policy = ReplayPolicy(tiny_tokenizer, ["hello", "bye"])
    eos = tiny_tokenizer.convert_tokens_to_ids("<|im_end|>")
    a = await policy.generate([1], SamplingParams())
    assert a.token_ids[-1] == eos and a.text == "hello<|im_end|>" and a.finish_reason == "stop"
    b = await policy.generate([1], SamplingParams(max_new_tokens=1))
    assert len(b.token_ids) == 1 and b.finish_reason == "length"
    c = await policy.generate([1], SamplingParams())
    assert c.text == "bye<|im_end|>"  # the last reply repeats


def test_gold_policy_needs_a_patch(tiny_tokenizer):
    with pytest.raises(ValueError, match="no gold patch"):
        ScriptedGoldPolicy(Task(instance_id="t"), tiny_tokenizer)
    with pytest.raises(ValueError, match="at least one reply"):
        ReplayPolicy(tiny_tokenizer, [])


def test_anchor_goes_above_the_old_lines_nearest_the_header_as_git_apply_finds_an_offset(tmp_path):
    """A gold hunk whose header's line numbers are off (scikit-learn-10908's by 3) still lands on its old lines:
    the anchor goes above the occurrence nearest to the stated line, not at the stated line."""
    import subprocess

    from swe_rl.policy.scripted import Hunk, place_anchor_command

    f = tmp_path / "m.py"
    f.write_text(
        "x = 1\n" * 3 + "a\nb\n" + "pad\n" * 10 + "a\nb\n" + "end"
    )  # two occurrences, no final newline
    hunk = Hunk(
        old_start=14, old=["a", "b"], new=["a", "c"]
    )  # stated line 14: the second "a" (line 16) is nearer
    subprocess.run(["bash", "-c", place_anchor_command(str(f), hunk)], check=True)
    lines = f.read_text().split("\n")
    assert lines.index(ANCHOR) == 15 and lines[16:18] == ["a", "b"] and lines[-1] == "end", lines
    assert f.read_text().count(ANCHOR) == 1
