#!/usr/bin/env bash
# GPU smoke test for a lent GPU machine (PyTorch present, no vLLM, no network), ≤ 8 minutes:
# chunked entropy at vocab 151,936 + a few bf16 train steps of a random Qwen-shaped model with our algo losses.
# Usage: bash scripts/gpu_smoke.sh [--device cpu] [--steps N]   (prints throughput and peak memory; exit 0 = ok)
set -euo pipefail
cd "$(dirname "$0")/.."
PY="${PYTHON:-$( [ -x .venv/bin/python ] && echo .venv/bin/python || echo python3 )}"
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}"  # a plain checkout works without installing swe-rl
exec timeout 480 "$PY" -m swe_rl.train.openrlhf.gpu_smoke "$@"
