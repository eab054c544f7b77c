"""Authoring tool for the bundled micro suite: turns specs/<id>.yaml into a SWE-bench 5.x task directory.

A spec names a repo under repos/ (its fixed, fully tested state), the edits that put the bug back
(`bug`: fixed -> buggy text) and the edits that remove the fix's new tests (`tests`: fixed -> base text).
From these it derives gold.patch and test.patch with git, the base commit (by running make_testbed.sh the
way the Dockerfile does), FAIL_TO_PASS / PASS_TO_PASS (by running pytest on base+tests and on the fixed
tree, parsed with swebench's own pytest parser), eval.sh and the Dockerfile.

Run: `python -m swe_rl.tasks.micro_suite.author [INSTANCE_ID ...]` (all specs by default). Maintainers only.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import yaml

SUITE = Path(__file__).resolve().parent
DATASET = "swe-rl/micro"
IMAGE_REPO = "swe-rl/micro"
BASE_IMAGE = "swe-rl/base:bookworm"
HEREDOC = "EOF_114329324912"  # the delimiter SWE-bench's own eval scripts use


def _git(cwd: Path, *args: str) -> str:
    return subprocess.run(["git", *args], cwd=cwd, check=True, capture_output=True, text=True).stdout


def _edit(root: Path, edits: list[dict], old_key: str, new_key: str, spec_id: str) -> list[str]:
    files = []
    for e in edits:
        path = root / e["file"]
        text = path.read_text()
        if text.count(e[old_key]) != 1:
            raise SystemExit(f"{spec_id}: {e['file']}: {old_key} text must occur exactly once")
        path.write_text(text.replace(e[old_key], e[new_key]))
        files.append(e["file"])
    return sorted(set(files))


def _patches(repo: Path, spec: dict, work: Path) -> tuple[str, str, list[str]]:
    """(gold.patch, test.patch, test files) as `git diff base fixed` restricted to source / test files."""
    tree = work / "author"
    shutil.copytree(repo, tree, ignore=shutil.ignore_patterns("__pycache__", ".pytest_cache"))
    _git(tree, "init", "-q", "-b", "main")
    _git(tree, "add", "-A")
    _git(tree, "-c", "user.name=a", "-c", "user.email=a@a", "commit", "-q", "-m", "fixed")
    src = _edit(tree, spec["bug"], "fixed", "buggy", spec["instance_id"])
    tests = _edit(tree, spec["tests"], "fixed", "base", spec["instance_id"])
    gold = _git(tree, "diff", "-R", "--src-prefix=b/", "--dst-prefix=a/", "--", *src)
    test = _git(tree, "diff", "-R", "--src-prefix=b/", "--dst-prefix=a/", "--", *tests)
    return gold, test, tests


def _run_pytest(tree: Path, test_files: list[str]) -> dict[str, str]:
    from swebench.harness.log_parsers import PARSER_REGISTRY

    out = subprocess.run(
        [sys.executable, "-m", "pytest", "-rA", "-p", "no:cacheprovider", *test_files],
        cwd=tree,
        capture_output=True,
        text=True,
        env={"PYTHONDONTWRITEBYTECODE": "1", "PATH": "/usr/bin:/bin"},
    ).stdout
    return PARSER_REGISTRY["parse_log_pytest"](out, None)


def _eval_script(base_commit: str, test_files: list[str], test_patch: str) -> str:
    files = " ".join(test_files)
    return "\n".join(
        [
            "#!/bin/bash",
            "set -uxo pipefail",
            "cd /testbed",
            "git status",
            f"git -c core.fileMode=false diff {base_commit}",
            f"git checkout {base_commit} -- {files}",
            f"git apply -v - <<'{HEREDOC}'",
            test_patch.rstrip("\n"),
            HEREDOC,
            ": '>>>>> Start Test Output'",
            f"python3 -m pytest -rA -p no:cacheprovider {files}",
            ": '>>>>> End Test Output'",
            f"git checkout {base_commit} -- {files}",
            "",
        ]
    )


def _dockerfile(instance_id: str, repo_dir: str, base_commit: str) -> str:
    task = f"tasks/{instance_id}"
    return (
        "# Build context: the suite root (metadata.build_context in task.yaml), so the shared repo is reachable.\n"
        f"FROM {BASE_IMAGE}\n"
        # lets the builder tell a stale image (older task content) from a current one
        f'LABEL org.swe-rl.base-commit="{base_commit}"\n'
        f"COPY repos/{repo_dir} /testbed\n"
        f"COPY make_testbed.sh {task}/gold.patch {task}/test.patch /tmp/task/\n"
        "RUN bash /tmp/task/make_testbed.sh /testbed /tmp/task && rm -rf /tmp/task\n"
        "WORKDIR /testbed\n"
    )


def author(spec_path: Path) -> str:
    spec = yaml.safe_load(spec_path.read_text())
    iid, repo_dir = spec["instance_id"], spec["repo_dir"]
    repo = SUITE / "repos" / repo_dir
    out = SUITE / "tasks" / iid
    out.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        gold, test, test_files = _patches(repo, spec, work)
        (out / "gold.patch").write_text(gold)
        (out / "test.patch").write_text(test)
        bed = work / "testbed"
        shutil.copytree(repo, bed, ignore=shutil.ignore_patterns("__pycache__", ".pytest_cache"))
        base_commit = subprocess.run(
            ["bash", str(SUITE / "make_testbed.sh"), str(bed), str(out)],
            check=True,
            capture_output=True,
            text=True,
        ).stdout.strip()
        subprocess.run(["git", "apply", str(out / "test.patch")], cwd=bed, check=True)
        before = _run_pytest(bed, test_files)
        after = _run_pytest(repo, test_files)
    f2p = sorted(t for t, s in after.items() if s == "PASSED" and before.get(t) != "PASSED")
    p2p = sorted(t for t, s in after.items() if s == "PASSED" and before.get(t) == "PASSED")
    if not f2p:
        raise SystemExit(f"{iid}: no FAIL_TO_PASS test: the bug is not caught by the new tests")
    meta = {
        "instance_id": iid,
        "repo": f"swe-rl-micro/{repo_dir}",
        "version": spec.get("version", "0.1"),
        "base_commit": base_commit,
        "environment_setup_commit": base_commit,
        "created_at": spec["created_at"],
        "split": "test",
        "datasets": [DATASET],
        "image": f"{IMAGE_REPO}:{iid.split('__', 1)[-1].lower()}",
        "log_parser": "parse_log_pytest",
        "eval_type": "pass_and_fail",
        "metadata": {"build_context": "../..", "difficulty": spec.get("difficulty", "easy")},
    }
    from swebench.task.repo import dump_tests, dump_yaml

    (out / "task.yaml").write_text(dump_yaml(meta))
    (out / "tests.json").write_text(dump_tests({"FAIL_TO_PASS": f2p, "PASS_TO_PASS": p2p}))
    (out / "problem_statement.md").write_text(spec["problem_statement"].rstrip("\n") + "\n")
    (out / "eval.sh").write_text(_eval_script(base_commit, test_files, test))
    (out / "Dockerfile").write_text(_dockerfile(iid, repo_dir, base_commit))
    return f"{iid}: base {base_commit[:10]} F2P={len(f2p)} P2P={len(p2p)}"


def main(argv: list[str]) -> None:
    specs = sorted((SUITE / "specs").glob("*.yaml"))
    if argv:
        specs = [s for s in specs if s.stem in argv]
    for spec in specs:
        print(author(spec))


if __name__ == "__main__":
    main(sys.argv[1:])
