"""Adapters: rows of other training sets -> SWE-bench 5.x rows that `Task` and grading understand.

R2E-Gym (R2E-Gym/R2E-Gym-Subset, used by DeepSWE): columns repo_name, docker_image, commit_hash,
parsed_commit_content (JSON ParsedCommit: file_diffs, old/new_commit_hash, ...), expected_output_json (test name ->
status), execution_result_content, problem_statement, prompt, relevant_files, modified_files, ... (schema read from
R2E-Gym's src/r2egym/agenthub/runtime/docker.py and its users). The image carries the hidden tests (/r2e_tests) and
run_tests.sh; R2E-Gym moves both out of /testbed before the agent starts, runs `bash /root/run_tests.sh`, parses
the log with its own pytest parser and rewards 1.0 only when the parsed map equals the expected map exactly.
We mirror that: metadata.setup_script (run before the agent and before grading), metadata.grader = "r2e_gym".

SWE-Gym (SWE-Gym/SWE-Gym, used by SkyRL and others): SWE-bench 4.x-style rows without eval_script/image/log_parser.
Images are `xingyaoww/sweb.eval.x86_64.<id, "__" -> "_s_">` (SWE-Gym/OpenHands eval_infer.py); the test command
per repo comes from SWE-Gym's harness constants; the eval script is swebench 4.x's python eval script shape.
"""

from __future__ import annotations

import json
import re
from typing import Any

R2E_GRADER = "r2e_gym"
R2E_LOG_PARSER = "parse_log_r2e_gym"  # R2E-Gym's own pytest parser (ported in swe_rl/grading/r2e.py)
R2E_SETUP = "\n".join(
    [  # R2E-Gym DockerRuntime.setup_env: hide run_tests.sh and the tests from the agent, expose the venv
        "cd /testbed",
        "ln -sfn /testbed/.venv /root/.venv 2>/dev/null || true",
        "for f in run_tests.sh r2e_tests; do [ -e /testbed/$f ] && mv /testbed/$f /root/$f; done",
        "[ -d /r2e_tests ] && mv /r2e_tests /root/r2e_tests",
        "find /testbed /root/r2e_tests -name '*.pyc' -delete 2>/dev/null; true",
    ]
)
R2E_EVAL = "\n".join(
    [
        "#!/bin/bash",
        "set -uxo pipefail",
        "export PATH=/root/.venv/bin:/root/.local/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
        "cd /testbed",
        "rm -rf /testbed/r2e_tests && ln -s /root/r2e_tests /testbed/r2e_tests",  # linked only for the run
        ": '>>>>> Start Test Output'",
        "bash /root/run_tests.sh",
        ": '>>>>> End Test Output'",
        "rm -f /testbed/r2e_tests",
        "",
    ]
)

SWE_GYM_IMAGE_PREFIX = "xingyaoww/"
# repo -> (test command, extra eval commands), from SWE-Gym's harness constants (MAP_REPO_VERSION_TO_SPECS).
# python/mypy is left out: its directives are test-case names (-k), not the files of the test patch.
SWE_GYM_SPECS: dict[str, tuple[str, list[str]]] = {
    "getmoto/moto": ("pytest -n0 -rA", []),
    "conan-io/conan": ("pytest -n0 -rA", ["export PYTHONPATH=${PYTHONPATH:-}:$(pwd)"]),
    "dask/dask": ("pytest -n0 -rA  --color=no", []),
    "project-monai/monai": ("pytest -rA ", []),
    "iterative/dvc": ("pytest -rA", []),
    "bokeh/bokeh": ("pytest -rA -n0", []),
    "modin-project/modin": ("pytest -n0 -rA", []),
    "pydantic/pydantic": ("pytest -rA --tb=short -vv -o console_output_style=classic --no-header", []),
    "pandas-dev/pandas": ("pytest -rA --tb=long", []),
    "facebookresearch/hydra": ("pytest -rA --tb=long", []),
}
HEREDOC = "EOF_114329324912"


def is_r2e_gym_row(row: dict[str, Any]) -> bool:
    return "docker_image" in row and "expected_output_json" in row and "eval_script" not in row


def is_swe_gym_row(row: dict[str, Any]) -> bool:
    return (
        "eval_script" not in row and "test_patch" in row and str(row.get("repo", "")).lower() in SWE_GYM_SPECS
    )


def adapt_row(row: dict[str, Any]) -> dict[str, Any]:
    """Rows of known non-SWE-bench formats become SWE-bench 5.x rows; SWE-bench rows pass through."""
    if not isinstance(row, dict):
        return row
    if is_r2e_gym_row(row):
        return r2e_gym_row(row)
    if is_swe_gym_row(row):
        return swe_gym_row(row)
    return row


# --- R2E-Gym -------------------------------------------------------------------------------------------------
def _decolor(d: dict[str, str]) -> dict[str, str]:
    # R2E-Gym's decolor_dict_keys plus its " - " split of keys (the comparison uses both)
    return {re.sub(r"\u001b\[\d+m", "", k).split(" - ")[0]: v for k, v in d.items()}


def _file_patch(fd: dict[str, Any]) -> str:
    """One FileDiff of a ParsedCommit as diff text (R2E-Gym's FileDiff.get_patch on the JSON form)."""
    path = fd["header"]["file"]["path"]
    out = f"diff --git a/{path} b/{path}\n"
    if fd["header"].get("misc_line"):
        out += fd["header"]["misc_line"] + "\n"
    if fd.get("index_line"):
        il = fd["index_line"]
        out += (
            f"index {il['old_commit_hash']}..{il['new_commit_hash']}{' ' if il['mode'] else ''}{il['mode']}\n"
        )
    if fd.get("minus_file") and fd.get("plus_file"):
        out += f"--- {fd['minus_file']['path']}\n+++ {fd['plus_file']['path']}\n"
    marks = {"context": " ", "added": "+", "deleted": "-", "note": "\\ "}
    for h in fd.get("hunks", []):
        d = h["descriptor"]
        rng = [
            f"{r['start']}" + (f",{r['length']}" if r.get("length") is not None else "")
            for r in (d["old_range"], d["new_range"])
        ]
        out += f"@@ -{rng[0]} +{rng[1]} @@" + (f" {d['section']}" if d.get("section") else "") + "\n"
        out += "".join(f"{marks[ln['type']]}{ln['content']}\n" for ln in h["line_group"]["all_lines"])
    return out


def _is_test_path(path: str) -> bool:
    parts = path.split("/")  # R2E-Gym's FileDiff.is_test_file
    return (
        path.endswith("_test.py")
        or path.startswith("test_")
        or parts[-1].startswith("test_")
        or any(p in parts for p in ("tests", "Tests", "test", "Test"))
    )


def r2e_gym_row(row: dict[str, Any]) -> dict[str, Any]:
    expected = _decolor(json.loads(row["expected_output_json"]))
    commit = json.loads(row["parsed_commit_content"]) if row.get("parsed_commit_content") else {}
    gold = "".join(
        _file_patch(fd)
        for fd in commit.get("file_diffs", [])
        if fd["header"]["file"]["path"].endswith(".py") and not _is_test_path(fd["header"]["file"]["path"])
    )
    statement = row.get("problem_statement") or ""
    issue = re.search(r"\[ISSUE\](.*)\[/ISSUE\]", statement, re.DOTALL)  # R2E-Gym's get_task_instruction
    repo_name = row.get("repo_name") or "unknown"
    return {
        "instance_id": row.get("instance_id") or f"r2e-gym__{repo_name}-{row.get('commit_hash', '')[:12]}",
        "repo": repo_name,
        "base_commit": commit.get("old_commit_hash", ""),
        "problem_statement": issue.group(1).strip() if issue else statement,
        "patch": gold,
        "test_patch": "",
        # R2E-Gym grades by exact equality with the expected map; these lists are informational
        "FAIL_TO_PASS": sorted(k for k, v in expected.items() if v == "PASSED"),
        "PASS_TO_PASS": [],
        "version": "",
        "image": row["docker_image"],
        "eval_script": R2E_EVAL,
        "log_parser": R2E_LOG_PARSER,
        "eval_type": "pass_and_fail",
        "metadata": {
            "source": "r2e-gym",
            "grader": R2E_GRADER,
            "expected_output": expected,
            "setup_script": R2E_SETUP,
            "commit_hash": row.get("commit_hash", ""),
            "relevant_files": list(row.get("relevant_files") or []),
        },
    }


# --- SWE-Gym -------------------------------------------------------------------------------------------------
def swe_gym_image(instance_id: str, prefix: str = SWE_GYM_IMAGE_PREFIX) -> str:
    return (prefix.rstrip("/") + "/" + f"sweb.eval.x86_64.{instance_id}".replace("__", "_s_")).lower()


def swe_gym_eval_script(row: dict[str, Any], test_cmd: str, extra: list[str]) -> str:
    """swebench 4.x's python eval script (make_eval_script_list) for a SWE-Gym row."""
    from swebench.harness.constants import NON_TEST_EXTS

    base, test_patch = row["base_commit"], row["test_patch"]
    test_files = re.findall(r"diff --git a/.* b/(.*)", test_patch)
    directives = [f for f in test_files if not any(f.endswith(ext) for ext in NON_TEST_EXTS)]
    reset = f"git checkout {base} {' '.join(test_files)}"
    activate = ["source /opt/miniconda3/bin/activate", "conda activate testbed"]
    lines = ["#!/bin/bash", "set -uxo pipefail", *activate, "cd /testbed", *extra]
    lines += ["git config --global --add safe.directory /testbed", "cd /testbed", "git status"]
    lines += [f"git -c core.fileMode=false diff {base}", *activate, reset]
    lines += [f"git apply -v - <<'{HEREDOC}'\n{test_patch.rstrip(chr(10))}\n{HEREDOC}"]
    lines += [": '>>>>> Start Test Output'", " ".join([test_cmd.strip(), *directives])]
    lines += [": '>>>>> End Test Output'", reset, ""]
    return "\n".join(lines)


def swe_gym_row(row: dict[str, Any], image_prefix: str = SWE_GYM_IMAGE_PREFIX) -> dict[str, Any]:
    test_cmd, extra = SWE_GYM_SPECS[str(row["repo"]).lower()]
    out = dict(row)
    out["image"] = swe_gym_image(row["instance_id"], image_prefix)
    out["eval_script"] = swe_gym_eval_script(row, test_cmd, extra)
    out["log_parser"] = "parse_log_pytest"
    out["eval_type"] = "pass_and_fail"
    out["metadata"] = {**(row.get("metadata") or {}), "source": "swe-gym"}
    return out
