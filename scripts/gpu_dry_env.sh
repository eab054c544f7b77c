#!/usr/bin/env bash
# Makes, on this CPU machine, a Python environment holding what a lent GPU machine holds for scripts/gpu_check.sh
# and nothing of ours: CPython 3.12 with its PyTorch (2.11.0, PyPI's CUDA 13.0 build: it imports and runs on a CPU),
# transformers 5.17.0 and the packages gpu_pack.sh counts on being there (numpy, pandas, pyarrow, pyyaml, rich,
# typer, httpx, protobuf, pytest, pytest-timeout), at the versions sessions saw there
# (/work/.library/device/KINDS.md, 2026-11). No swebench or openrlhf: the packed wheels bring them (and pydantic,
# which typer pulls in here), first on PYTHONPATH, as on that machine. A dry run with it meets the lent machine's
# torch and transformers APIs before any device time is spent:
#   bash scripts/gpu_dry_env.sh /tmp/gpuenv && bash scripts/gpu_pack.sh
#   PYTHON=/tmp/gpuenv/bin/python bash scripts/gpu_check.sh --allow-cpu
# Usage: bash scripts/gpu_dry_env.sh DIR [--python PATH_TO_PYTHON3.12]   (DIR is made anew; needs uv and PyPI:
# ~3 GB with the CUDA libraries, seconds from a warm uv cache)
set -euo pipefail
DIR=""
PY312=""
while [ $# -gt 0 ]; do
  case "$1" in
    --python) PY312="$2"; shift 2 ;;
    -h|--help) sed -n '2,12p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    -*) echo "gpu_dry_env: unknown argument $1 (--python PATH, --help)" >&2; exit 2 ;;
    *) DIR="$1"; shift ;;
  esac
done
[ -n "$DIR" ] || { echo "gpu_dry_env: name the folder to make, e.g. bash scripts/gpu_dry_env.sh /tmp/gpuenv" >&2; exit 2; }
is312() { [ -n "$1" ] && "$1" -c 'import sys; sys.exit(sys.version_info[:2] != (3, 12))' 2>/dev/null; }
if [ -z "$PY312" ]; then  # the lent machine's python3 is 3.12: the first 3.12 that runs, from PATH or pyenv
  for c in "$(command -v python3.12 || true)" "$HOME"/.pyenv/versions/3.12*/bin/python3.12; do
    if is312 "$c"; then PY312=$c; break; fi
  done
fi
is312 "$PY312" || { echo "gpu_dry_env: no CPython 3.12 found (${PY312:-none}); pass one with --python PATH" >&2; exit 2; }
# the lent machine's versions (KINDS.md's pip list); setuptools < 82 is torch 2.11's own pin
PACKAGES=(torch==2.11.0 transformers==5.17.0 tokenizers==0.23.2 safetensors==0.8.0 huggingface-hub==1.33.0
  numpy==2.5.2 pandas pyarrow pyyaml rich typer httpx protobuf pytest pytest-timeout "setuptools<82")
uv venv -q --clear -p "$PY312" "$DIR"
uv pip install -q --python "$DIR/bin/python" "${PACKAGES[@]}"
"$DIR/bin/python" -c 'import sys, torch, transformers; print(f"gpu_dry_env: {sys.argv[1]}: python", sys.version.split()[0], "torch", torch.__version__, "transformers", transformers.__version__)' "$DIR"
