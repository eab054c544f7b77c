#!/usr/bin/env bash
# Packs, on this machine, what scripts/gpu_check.sh needs on a lent GPU machine and that machine lacks, into .whl/
# (ignored by git): wheels --no-deps at the versions the project pins, for CPython 3.12 on x86-64 (that machine's
# python3, which has torch, transformers, numpy, pandas, pyarrow, pyyaml, rich, typer, httpx, protobuf and pytest):
# pydantic and its core (every config) with a typing-extensions new enough for it; swebench (the generated tasks'
# log parser), whose harness imports docker, datasets and modal when it is imported, with what those import and
# that machine lacks (found by importing the trainer in an environment holding only that machine's packages;
# requests, for docker's client, since the grader's log rules import swebench.harness; xxhash for datasets and
# multidict for grpclib: 2026-12-05);
# openrlhf for the seam tests.
# Usage: bash scripts/gpu_pack.sh [--python-version 3.12] [--dest .whl]
set -euo pipefail
cd "$(dirname "$0")/.."
PYVER=3.12
DEST=.whl
while [ $# -gt 0 ]; do
  case "$1" in
    --python-version) PYVER="$2"; shift 2 ;;
    --dest) DEST="$2"; shift 2 ;;
    -h|--help) sed -n '2,11p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "gpu_pack: unknown argument $1" >&2; exit 2 ;;
  esac
done
pin() {  # NAME -> NAME==VERSION from constraints.txt
  local v; v=$(grep -i "^$1==" constraints.txt | head -1)
  [ -n "$v" ] || { echo "gpu_pack: $1 is not pinned in constraints.txt" >&2; exit 1; }
  echo "$v"
}
# openrlhf and pylatexenc are installed --no-deps by `make setup` (Makefile), at these versions
WHEELS=()
for name in pydantic pydantic-core annotated-types typing-inspection typing-extensions swebench unidiff docker datasets dill multiprocess \
  python-dotenv tenacity modal synchronicity grpclib h2 hpack hyperframe requests urllib3 charset-normalizer xxhash \
  multidict; do
  WHEELS+=("$(pin "$name")")
done
WHEELS+=("openrlhf==0.11.2" "pylatexenc==2.11")  # `make setup` installs these two --no-deps at these versions
rm -rf "$DEST" && mkdir -p "$DEST"
PLATFORMS=()
for p in manylinux_2_28_x86_64 manylinux_2_27_x86_64 manylinux_2_17_x86_64 manylinux2014_x86_64 manylinux1_x86_64; do
  PLATFORMS+=(--platform "$p")
done
PIP="${PIP:-python3 -m pip}"
$PIP download -q --no-deps --only-binary=:all: --python-version "$PYVER" --implementation cp "${PLATFORMS[@]}" \
  -d "$DEST" "${WHEELS[@]}"
n=$(ls "$DEST"/*.whl | wc -l)
[ "$n" -eq "${#WHEELS[@]}" ] || { echo "gpu_pack: expected ${#WHEELS[@]} wheels in $DEST, got $n" >&2; exit 1; }
echo "gpu_pack: $n wheels for CPython $PYVER in $DEST ($(du -sh "$DEST" | cut -f1)); carry it: run(carry=[\"$DEST\"])"
