#!/usr/bin/env bash
# GPU smoke test for a lent GPU machine (PyTorch present, no vLLM, no network), ≤ 8 minutes:
# chunked entropy at vocab 151,936 + a few bf16 train steps of a random Qwen-shaped model with our algo losses.
# Usage: bash scripts/gpu_smoke.sh [--device cpu] [--steps N]   (prints throughput and peak memory; exit 0 = ok)
set -euo pipefail
cd "$(dirname "$0")/.."
PY="${PYTHON:-$( [ -x .venv/bin/python ] && echo .venv/bin/python || echo python3 )}"
exec timeout 480 "$PY" scripts/gpu_smoke.py "$@"
