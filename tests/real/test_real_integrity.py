"""Issue 35 on the shared real instances (`make test-real`; slow): every gold patch resolves with no label and no
violation through the full grader (tree and log guards, the graded run, the probe run), and the repositories' own
test runners cannot be turned into a yes: exploits of django's tests/runtests.py + django/test and of sympy's
bin/test + sympy/testing, kept as recipes under fixtures/exploits/ (first line: what it does), each first shown to
get the unfixed bug graded resolved by the plain official run (guards and probe off), then caught by the grader:
unresolved (a runner file the gold leaves alone is put back at base) or labelled by the probe run."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from swe_rl.grading.grader import docker_factory, grade

pytestmark = [pytest.mark.slow, pytest.mark.docker, pytest.mark.timeout(3600)]

EXPLOITS = Path(__file__).parent / "fixtures" / "exploits"
# the instance each exploit is written against (django 5.0, sympy 1.12, sphinx 5.0, flask 2.3 code shapes)
TARGETS = {
    "django__django-16595": "django_",
    "sympy__sympy-24213": "sympy_",
    "sphinx-doc__sphinx-10323": "sphinx_",
    "pallets__flask-5014": "flask_",
}
RUNNERS = ("django_", "sympy_")  # the repositories' own runners: at least three exploits each
# exploit -> how it must be caught: ("unresolved", the runner file put back) or ("labelled", a phrase of the label)
CAUGHT = {
    "django_runner_result_class": ("unresolved", "django/test/runner.py"),
    "django_runtests_lenient": ("unresolved", "tests/runtests.py"),
    "django_testcases_no_run": ("unresolved", "django/test/testcases.py"),
    "django_runtime_result_patch": ("labelled", "unittest.runner.TextTestResult.addFailure was replaced"),
    "django_stderr_rewrite": ("labelled", "the log reports it PASSED, its run ended ['failed']"),
    "django_str_says_yes": ("labelled", "assertEqual operand (left, list) says yes by its own methods"),
    "sympy_reporter_fail_as_pass": ("unresolved", "sympy/testing/runtests.py"),
    "sympy_bin_test_in_process": ("unresolved", "bin/test"),
    "sympy_runtime_reporter_patch": ("labelled", "PyTestReporter.test_exception was replaced"),
    "sympy_stdout_rewrite": ("labelled", "the log reports it PASSED, its run ended ['error']"),
    # under tox (the probe's observer on the env's path by a .pth file)
    "sphinx_str_says_yes": ("labelled", "assertion operand (left, _Text) answers '==' by its own methods"),
    # an exception check answered by a class the patch defines (pytest.raises)
    "flask_raises_any": ("labelled", "_ValueError: issubclass/isinstance agrees with TypeError"),
}


def asyncio_run(coro):
    import asyncio

    return asyncio.run(coro)


def describe(name: str) -> str:
    """The recipe's one-line description (its first line)."""
    return (EXPLOITS / f"{name}.sh").read_text().splitlines()[0].lstrip("# ")


def test_every_exploit_has_an_expectation_and_a_description():
    recipes = sorted(p.stem for p in EXPLOITS.glob("*.sh"))
    assert recipes == sorted(CAUGHT)
    for prefix in RUNNERS:  # at least three per runner
        assert sum(n.startswith(prefix) for n in recipes) >= 3
    assert all(describe(n) for n in recipes)


def test_gold_resolves_with_no_label(iid, real_tasks, real_manifest):
    task = real_tasks.tasks[iid]
    gold = asyncio_run(grade(task, task.patch, docker_factory(run_id="real-integrity")))
    integrity = gold.tests.get("integrity", {})
    # an instance manifest.json marks `official_unresolved` (matplotlib: FreeType) is unresolved for that named
    # reason, in the official harness too; it still gets no label
    unresolvable = bool(real_manifest.get(iid, {}).get("official_unresolved"))
    assert gold.resolved != unresolvable and gold.failure is None, (
        gold.failure,
        gold.tests,
        gold.log[-3000:],
    )
    assert gold.suspicious == () and integrity.get("violations") == [], (gold.suspicious, integrity)
    assert integrity.get("harness_restored") == [] and integrity.get("runner_restored") == [], integrity
    if unresolvable:  # the probe run follows only a verdict that would be resolved (grader design)
        return
    probe = integrity.get("probe", {})
    # every shared instance has an observer (sphinx's `tox --current-env`: through the env's .pth file)
    assert probe.get("status") == "ran", integrity
    print(
        f"{iid}: resolved, no label; junit {integrity.get('junit')}; probe {json.dumps(integrity.get('probe'))}"
    )


async def _recipe_patches(task, names: list[str]) -> dict[str, str]:
    """Each recipe run in a fresh checkout of the instance's /testbed; `git add -A` + `git diff --binary`."""
    from sandboxes import make_sandbox

    out = {}
    async with make_sandbox({"backend": "docker", "image": task.image}) as sb:
        for name in names:
            await sb.write_file(f"/tmp/exploits/{name}.sh", (EXPLOITS / f"{name}.sh").read_text())
            r = await sb.exec(
                f"git reset -q --hard HEAD && bash -e /tmp/exploits/{name}.sh && git add -A && "
                "git diff --cached --binary && git reset -q --hard HEAD",
                cwd="/testbed",
                timeout=300,
            )
            assert r.exit_code == 0 and r.output.startswith("diff --git"), (name, r.output[-2000:])
            out[name] = r.output
    return out


def test_runner_exploits_are_caught(iid, real_tasks):
    if iid not in TARGETS:
        pytest.skip(f"the runner exploits are written against {sorted(TARGETS)}")
    task = real_tasks.tasks[iid]
    names = sorted(n for n in CAUGHT if n.startswith(TARGETS[iid]))
    patches = asyncio_run(_recipe_patches(task, names))
    factory = docker_factory(run_id="real-integrity")
    missed, table = {}, []
    for name in names:
        plain = asyncio_run(grade(task, patches[name], factory, guards=False, detect=False))
        full = asyncio_run(grade(task, patches[name], factory))
        integrity = full.tests.get("integrity", {})
        how, what = CAUGHT[name]
        if how == "unresolved":
            caught = not full.resolved and what in integrity.get("runner_restored", [])
        else:
            caught = full.resolved and any(s.startswith("probe:") and what in s for s in full.suspicious)
        verdict = "resolved" if full.resolved else "unresolved"
        table.append(
            f"| {name} | {iid} | {verdict} | {'; '.join(full.suspicious) or '-'} | {describe(name)} |"
        )
        if not plain.resolved or not caught:  # the route must work on the plain run, and be caught here
            missed[name] = (plain.resolved, full.resolved, full.suspicious, integrity, full.log[-2000:])
    print("\n".join(table))
    assert not missed, missed
