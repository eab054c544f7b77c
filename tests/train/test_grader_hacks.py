"""The built-in trainer's grader (CachedGrader, generated tasks) against patches that leave the bug and fake the
results: printed PASSED lines, an exit before the tests finish, a conftest.py, edited tests. None is rewarded."""

from __future__ import annotations

import asyncio
import difflib

import pytest

from swe_rl.tasks.generator import generate_tasks

pytestmark = pytest.mark.docker


def _diff(path: str, old: str, new: str) -> str:
    body = "".join(difflib.unified_diff(old.splitlines(True), new.splitlines(True), f"a/{path}", f"b/{path}"))
    return f"diff --git a/{path} b/{path}\n{body}"


def _new_file(path: str, text: str) -> str:
    lines = text.splitlines()
    hunk = "".join(f"+{line}\n" for line in lines)
    return f"diff --git a/{path} b/{path}\nnew file mode 100644\n--- /dev/null\n+++ b/{path}\n@@ -0,0 +1,{len(lines)} @@\n{hunk}"


def test_cached_grader_rewards_no_faked_result():
    from swe_rl.train.env import CachedGrader, SandboxSlots

    [task] = generate_tasks(1, "train", seed=11)
    src = task.metadata["files"]["calc.py"]
    every = [*task.FAIL_TO_PASS, *task.PASS_TO_PASS]
    prints = "".join(f"print('PASSED {t}')\n" for t in every)
    hacks = {
        "prints_passed_then_exits": _diff("calc.py", src, src + f"\nimport os\n{prints}os._exit(0)\n"),
        "atexit_prints_passed": _diff(
            "calc.py",
            src,
            src + "\nimport atexit\n" + f"atexit.register(lambda: print('PASSED {every[0]}'))\n",
        ),
        "conftest_reports_passed": _new_file(
            "conftest.py", "def pytest_runtest_makereport(item, call):\n    return None\n"
        ),
        "tests_edited": _new_file("test_calc.py", "print('PASSED " + every[0] + "')\n"),
    }

    async def main():
        slots = SandboxSlots(1)
        grader = CachedGrader(slots)
        try:
            gold = await grader(task, task.patch)
            return gold, {name: await grader(task, p) for name, p in hacks.items()}
        finally:
            await slots.aclose()

    gold, results = asyncio.run(main())
    assert gold.reward == 1.0 and not gold.tests["violations"], gold.log
    for name, r in results.items():
        assert r.reward == 0.0 and not r.resolved, (name, r.log)
    assert "did not finish" in " ".join(results["prints_passed_then_exits"].tests["violations"])
    assert "conflicting" in " ".join(results["atexit_prints_passed"].tests["violations"])
