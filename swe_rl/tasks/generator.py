"""Seeded generator of tiny bug-fix tasks (SWE-bench `Task` format) with scripted expert solutions.

Designed so RL has signal on a tiny CPU model (see shared/reference/learning-calibration.md):
- every bug family needs the same kind of edit: one short `str_replace` whose `old` is a 3-5 token span copied
  from the file and whose `new` differs by one or two tokens named in the problem statement, so success is decided
  by sampling noise within a task rather than by the family;
- three required turns (view -> str_replace -> submit), tiny files, tiny tests run by plain `python3` with
  pytest-style `PASSED/FAILED file::test` lines, so the real swebench log parser grades them in ~20 ms;
- the held-out split holds out (family, function name, constant) combinations via a crc32 bucket; every token
  it needs also occurs in training, so a tiny model can generalize copying to it.

`generate_tasks(n, split, seed)` is deterministic; `expert_actions(task)` gives the scripted solution as tool
calls (name, arguments) that the agent's real tools execute; `expert_actions(task, flawed=True)` gives a flawed
expert's attempt (the right edit with an off-by-one constant, which fails the tests), so SFT data can mix expert
and flawed demonstrations as SFT on unfiltered agent trajectories does; `sample_batch` mixes families.
"""

from __future__ import annotations

import random
import zlib
from dataclasses import dataclass

from swe_rl.tasks.task import Task

MODULE = "calc.py"
TEST_FILE = "test_calc.py"
NAMES = ["scale", "shift", "limit", "total", "grow", "bump", "span", "trim", "area", "step", "pick", "mark"]
CONSTS = [str(k) for k in range(2, 10)]
FAMILIES = ("mul", "add", "sub", "cmp", "rng", "neg")
HELD_OUT_BUCKETS = 5  # one combination in five is held out


@dataclass(frozen=True)
class FuncSpec:
    """One generated function: correct body, buggy body, and how the statement names the fix."""

    name: str
    family: str
    k: str  # the constant the statement names
    good: str  # the correct `return` expression
    bad: str  # the buggy one (only used for the function that carries the bug)
    statement: str  # one sentence describing the fix
    tests: tuple[tuple[str, str], ...]  # (call, expected repr) pairs checking the correct behaviour


def _func(family: str, name: str, k: str) -> FuncSpec:
    """The family templates. Each bug differs from the fix by one or two tokens."""
    ki = int(k)
    if family == "mul":
        return FuncSpec(
            name,
            family,
            k,
            f"x * {k}",
            f"x * {_other(k)}",
            f"{name} should multiply by {k}.",
            ((f"{name}(3)", repr(3 * ki)), (f"{name}(1)", repr(ki))),
        )
    if family == "add":
        return FuncSpec(
            name,
            family,
            k,
            f"x + {k}",
            f"x + {_other(k)}",
            f"{name} should add {k}.",
            ((f"{name}(3)", repr(3 + ki)), (f"{name}(0)", repr(ki))),
        )
    if family == "sub":
        return FuncSpec(
            name,
            family,
            k,
            f"x - {k}",
            f"x + {k}",
            f"{name} should subtract {k}, not add it.",
            ((f"{name}(10)", repr(10 - ki)), (f"{name}(0)", repr(-ki))),
        )
    if family == "cmp":
        return FuncSpec(
            name,
            family,
            k,
            f"x >= {k}",
            f"x > {k}",
            f"{name}({k}) should be True: use >=.",
            ((f"{name}({k})", "True"), (f"{name}({ki - 1})", "False")),
        )
    if family == "rng":
        return FuncSpec(
            name,
            family,
            k,
            f"sum(range(x + {k}))",
            f"sum(range(x + {_other(k)}))",
            f"{name} should sum range(x + {k}).",
            ((f"{name}(1)", repr(sum(range(1 + ki)))), (f"{name}(0)", repr(sum(range(ki))))),
        )
    if family == "neg":
        return FuncSpec(
            name,
            family,
            k,
            f"{k} - x",
            f"x - {k}",
            f"{name} should return {k} - x.",
            ((f"{name}(1)", repr(ki - 1)), (f"{name}(9)", repr(ki - 9))),
        )
    raise ValueError(f"family={family!r}: expected one of {FAMILIES}")


def _other(k: str) -> str:
    # A deterministic wrong constant different from k (keeps the buggy file a function of the task key).
    return CONSTS[(CONSTS.index(k) + 3) % len(CONSTS)]


def flawed_fix(f: FuncSpec) -> str:
    """The flawed expert's fix: the correct expression with the constant off by one (k - 1), which always fails
    the tests (they check k exactly; for `cmp` they check k - 1 is False)."""
    assert f.good.count(f.k) == 1, f.good
    return f.good.replace(f.k, str(int(f.k) - 1))


def split_of(family: str, name: str, k: str) -> str:
    """'held_out' for one (family, name, constant) combination in HELD_OUT_BUCKETS, else 'train'."""
    bucket = zlib.crc32(f"{family}|{name}|{k}".encode()) % HELD_OUT_BUCKETS
    return "held_out" if bucket == 0 else "train"


def _source(funcs: list[FuncSpec], buggy: int) -> tuple[str, str]:
    """(buggy module, fixed module) text; blank line between functions as in normal code."""

    def render(bug: bool) -> str:
        parts = []
        for i, f in enumerate(funcs):
            body = f.bad if (bug and i == buggy) else f.good
            parts.append(f"def {f.name}(x):\n    return {body}\n")
        return "\n\n".join(parts)

    return render(True), render(False)


def _tests(funcs: list[FuncSpec]) -> str:
    """A test module that runs under pytest and as a plain script printing pytest -rA style lines."""
    names = ", ".join(f.name for f in funcs)
    lines = [f"from calc import {names}", ""]
    for f in funcs:
        lines.append(f"def test_{f.name}():")
        lines += [f"    assert {call} == {want}" for call, want in f.tests]
        lines.append("")
    lines += [
        'if __name__ == "__main__":',
        "    for _n, _f in list(globals().items()):",
        '        if _n.startswith("test_"):',
        "            try:",
        "                _f()",
        f'                print("PASSED {TEST_FILE}::" + _n)',
        "            except Exception:",
        f'                print("FAILED {TEST_FILE}::" + _n)',
        "",
    ]
    return "\n".join(lines)


def _diff_new_file(path: str, text: str) -> str:
    body = text.splitlines()
    hunk = "".join(f"+{line}\n" for line in body)
    return f"diff --git a/{path} b/{path}\nnew file mode 100644\n--- /dev/null\n+++ b/{path}\n@@ -0,0 +1,{len(body)} @@\n{hunk}"


def _diff_line(path: str, old_text: str, new_text: str) -> str:
    """A one-hunk unified diff over the whole (tiny) file."""
    a, b = old_text.splitlines(), new_text.splitlines()
    lines = [f" {x}" if x == y else f"-{x}\n+{y}" for x, y in zip(a, b, strict=True)]
    return (
        f"diff --git a/{path} b/{path}\n--- a/{path}\n+++ b/{path}\n@@ -1,{len(a)} +1,{len(b)} @@\n"
        + "\n".join(lines)
        + "\n"
    )


def make_task(rng: random.Random, split: str, index: int, n_funcs: int = 3) -> Task:
    """One task of `split`: n_funcs functions of distinct families, one carrying the bug."""
    while True:
        families = rng.sample(FAMILIES, n_funcs)
        names = rng.sample(NAMES, n_funcs)
        consts = [rng.choice(CONSTS) for _ in range(n_funcs)]
        buggy = rng.randrange(n_funcs)
        funcs = [_func(fam, nm, k) for fam, nm, k in zip(families, names, consts, strict=True)]
        if split_of(families[buggy], names[buggy], consts[buggy]) != split:
            continue
        bad_src, good_src = _source(funcs, buggy)
        old, new = funcs[buggy].bad, funcs[buggy].good
        if bad_src.count(old) == 1:  # the expert's replace must match exactly once
            break
    bug = funcs[buggy]
    test_src = _tests(funcs)
    fail = [f"{TEST_FILE}::test_{bug.name}"]
    passing = [f"{TEST_FILE}::test_{f.name}" for i, f in enumerate(funcs) if i != buggy]
    iid = f"gen__{split}-{index:05d}-{bug.family}"
    return Task(
        instance_id=iid,
        repo="swe-rl/generated",
        base_commit="",
        problem_statement=bug.statement,
        patch=_diff_line(MODULE, bad_src, good_src),
        test_patch=_diff_new_file(TEST_FILE, test_src),
        FAIL_TO_PASS=fail,
        PASS_TO_PASS=passing,
        version="0",
        image="swe-rl/base:bookworm",
        eval_script=f"cd /testbed && python3 {TEST_FILE}",
        log_parser="parse_log_pytest",
        metadata={
            "generator": "swe_rl.tasks.generator",
            "split": split,
            "family": bug.family,
            "files": {MODULE: bad_src},  # the repo at base_commit (materialize with git init + commit)
            "test_files": {TEST_FILE: test_src},
            "expert": {"old": old, "new": new, "path": MODULE, "flawed_new": flawed_fix(bug)},
        },
    )


def generate_tasks(n: int, split: str = "train", seed: int = 0, n_funcs: int = 3) -> list[Task]:
    """n deterministic tasks of `split` ('train' or 'held_out') from `seed`."""
    if split not in ("train", "held_out"):
        raise ValueError(f"split={split!r}: expected 'train' or 'held_out'")
    if not 1 <= n_funcs <= len(FAMILIES):
        raise ValueError(f"n_funcs={n_funcs}: expected 1..{len(FAMILIES)}")
    rng = random.Random(f"{seed}|{split}")
    return [make_task(rng, split, i, n_funcs) for i in range(n)]


def sample_batch(tasks: list[Task], k: int, rng: random.Random) -> list[Task]:
    """k tasks with families mixed: round-robin over families, random within each family."""
    by_family: dict[str, list[Task]] = {}
    for t in tasks:
        by_family.setdefault(t.metadata.get("family", ""), []).append(t)
    fams = sorted(by_family)
    rng.shuffle(fams)
    return [rng.choice(by_family[fams[i % len(fams)]]) for i in range(k)]


def expert_actions(
    task: Task, repo_dir: str = "/testbed", flawed: bool = False
) -> list[tuple[str, dict[str, str]]]:
    """The scripted solution as tool calls (swe_rl.agent names): view, str_replace, submit. `flawed=True`: the
    same actions with the flawed expert's new_str (off-by-one constant; the tests fail)."""
    ex = task.metadata["expert"]
    path = f"{repo_dir}/{ex['path']}"
    new = ex["flawed_new"] if flawed else ex["new"]
    return [
        ("file_editor", {"command": "view", "path": path}),
        ("file_editor", {"command": "str_replace", "path": path, "old_str": ex["old"], "new_str": new}),
        ("submit", {}),
    ]
