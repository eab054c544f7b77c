#!/bin/bash
# Turn a copy of a micro-suite repo (its fixed, fully tested state) into a task's testbed: remove the task's
# test patch and gold patch (reverse-apply), then commit the result as a short, deterministic git history
# (fixed author, committer and dates, so base_commit is the same hash on every machine).
# Usage: make_testbed.sh REPO_DIR TASK_FILES_DIR   (TASK_FILES_DIR holds gold.patch and test.patch)
set -euo pipefail
repo="$1"; task="$2"
cd "$repo"
git apply -R "$task/test.patch"
git apply -R "$task/gold.patch"
export GIT_AUTHOR_NAME="micro-suite" GIT_AUTHOR_EMAIL="micro-suite@swe-rl" \
       GIT_COMMITTER_NAME="micro-suite" GIT_COMMITTER_EMAIL="micro-suite@swe-rl" \
       GIT_AUTHOR_DATE="2024-01-01T00:00:00+0000" GIT_COMMITTER_DATE="2024-01-01T00:00:00+0000"
git init -q -b main .
git -c core.fileMode=true add $(find . -maxdepth 1 -type f ! -name '.*' -printf '%P\n' | sort)
git commit -q --no-gpg-sign -m "Project metadata"
git add -A -- . ':!tests'
git commit -q --no-gpg-sign -m "Library modules"
git add -A
git commit -q --no-gpg-sign -m "Test suite"
git rev-parse HEAD
