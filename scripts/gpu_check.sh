#!/usr/bin/env bash
# One command for a lent GPU machine (PyTorch, transformers, pytest and CUDA; no network, Docker, Ray, vLLM or
# DeepSpeed), well under 6 minutes: the wheels packed by scripts/gpu_pack.sh, then
#   1. the device line (nvidia-smi) and the versions;
#   2. `make test-gpu`'s tests (pytest -m gpu, with this machine's python3);
#   3. scripts/gpu_smoke.sh (entropy at 151,936 vocab, bf16 steps of a Qwen2.5-1.5B shape);
#   4. two RL steps of the built-in trainer on the GPU (configs/train/gpu_check.yaml: generated micro tasks, the
#      local sandbox backend, rollouts in-process on one event loop, no Ray).
# Logs go to $OUT (the device tool brings that folder back), else to runs/gpu_check/. Exit 0 = every part passed.
# --bench instead runs the GPU benchmarks (~6-7 min on an H200; the 7B shape needs its memory): bench/step_cost.py
# (AEM's and exact entropy's share of a step at the 1.5B and 7B shapes, GPU_BENCH_SHAPES to choose), bench/sampler.py
# (one sampling step), bench/generate.py (ours vs generate with the same warpers, best of 2) and bench/entropy.py
# (the entropy kernel's chunks, eager vs compiled), each table in $OUT/bench/ as its part ends (the default
# docs/results/ would stay on that machine). bench/gpu_train.py (tokens/s, the trainer's split) is run by hand.
# Usage: bash scripts/gpu_check.sh                 on the GPU machine (fails without CUDA)
#        bash scripts/gpu_check.sh --allow-cpu     dry run here: the same parts on the CPU at small sizes
#        bash scripts/gpu_check.sh --bench [--allow-cpu]
# Env: PYTHON (default python3), GPU_CHECK_WHEELS (default .whl), GPU_CHECK_SITE (default /tmp/site).
set -uo pipefail
cd "$(dirname "$0")/.."
ALLOW_CPU=0
BENCH=0
for arg in "$@"; do
  case "$arg" in
    --allow-cpu) ALLOW_CPU=1 ;;
    --bench) BENCH=1 ;;
    -h|--help) sed -n '2,16p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "gpu_check: unknown argument $arg (--allow-cpu, --bench, --help)" >&2; exit 2 ;;
  esac
done
PY="${PYTHON:-python3}"
LOGS="${OUT:-runs/gpu_check}"
mkdir -p "$LOGS"
START=$SECONDS
status=0
say() { echo "gpu_check: $*" | tee -a "$LOGS/summary.txt"; }
part() {  # NAME LIMIT_S CMD...: run one part with a time limit, its output in $LOGS/NAME.log
  local name=$1 limit=$2 t0=$SECONDS rc
  shift 2
  timeout "$limit" "$@" > "$LOGS/$name.log" 2>&1
  rc=$?
  tail -n 5 "$LOGS/$name.log"
  if [ "$rc" -eq 0 ]; then say "$name passed in $((SECONDS - t0)) s"; else say "$name FAILED (exit $rc) after $((SECONDS - t0)) s"; status=1; fi
}

# wheels for what this machine lacks (pydantic, swebench and what it imports, openrlhf), into their own folder
WHEELS="${GPU_CHECK_WHEELS:-.whl}"
if ls "$WHEELS"/*.whl > /dev/null 2>&1; then
  SITE="${GPU_CHECK_SITE:-/tmp/site}"
  if "$PY" -m pip --version > /dev/null 2>&1; then
    "$PY" -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target "$SITE" "$WHEELS"/*.whl
  else  # a uv-made environment has no pip (the dry run here)
    uv pip install -q --python "$PY" --no-index --no-deps --target "$SITE" "$WHEELS"/*.whl
  fi || { say "installing the wheels of $WHEELS FAILED"; exit 1; }
  rm -rf "$SITE/tests"  # openrlhf's wheel ships its own top-level `tests` package: ours must be the one imported
  export PYTHONPATH="$SITE${PYTHONPATH:+:$PYTHONPATH}"
fi
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}" PYTHONUNBUFFERED=1

: > "$LOGS/summary.txt"
{ date -u +"%Y-%m-%d %H:%M:%S UTC"; git log -1 --format="commit %H" 2>/dev/null || true
  nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader 2>/dev/null || echo "nvidia-smi: none"
  git --version 2>/dev/null || echo "git: none (the train part's local sandboxes run git init / diff / apply)"
  "$PY" -c "import sys, torch, transformers; print('python', sys.version.split()[0], 'torch', torch.__version__,
'cuda', torch.version.cuda, 'transformers', transformers.__version__, 'cuda_available', torch.cuda.is_available())"
} > "$LOGS/device.txt" 2>&1
cat "$LOGS/device.txt"
CUDA=$("$PY" -c "import torch; print(int(torch.cuda.is_available()))" 2>/dev/null || echo 0)
SMOKE_ARGS=()
OVERRIDES=()
if [ "$CUDA" != 1 ]; then
  if [ "$ALLOW_CPU" != 1 ]; then say "no CUDA device (torch.cuda.is_available() is False); --allow-cpu for a dry run"; exit 1; fi
  say "DRY RUN on the CPU (--allow-cpu): not a GPU result"
  export SWE_RL_GPU_TESTS_ON_CPU=1
  SMOKE_ARGS=(--device cpu)
  OVERRIDES=(-o device=cpu -o model.threads=2)
fi

if [ "$BENCH" = 1 ]; then
  DRY=()
  [ "$CUDA" = 1 ] || DRY=(--cpu-dry-run)
  # issue 61's benchmarks, the step's shares first (the 7B shape wants an H200: name kind nvidia-h200)
  part bench-step 300 "$PY" bench/step_cost.py --shapes "${GPU_BENCH_SHAPES:-1.5b,7b}" --steps 2 --out "$LOGS/bench" "${DRY[@]}"
  part bench-sampler 60 "$PY" bench/sampler.py --out "$LOGS/bench" "${DRY[@]}"
  part bench-generate 240 "$PY" bench/generate.py --repeat 2 --skip-logits --out "$LOGS/bench" "${DRY[@]}"
  part bench-entropy 120 "$PY" bench/entropy.py --out "$LOGS/bench" "${DRY[@]}"
  say "done in $((SECONDS - START)) s, exit $status"
  exit $status
fi

part test-gpu 300 "$PY" -m pytest -m gpu tests/gpu tests/openrlhf/test_seam_device.py -q -rs -p no:cacheprovider
part smoke 150 env PYTHON="$PY" bash scripts/gpu_smoke.sh "${SMOKE_ARGS[@]}"
# the local backend isolates nothing: the episodes' repo is the host's /testbed and the agent's tools go to
# /usr/local/lib/swe_rl_tools; both are removed afterwards unless they were there before
leftovers=()
for d in /testbed /usr/local/lib/swe_rl_tools; do [ -e "$d" ] || leftovers+=("$d"); done
WORK=$(mktemp -d /tmp/swe_rl_gpu_check.XXXXXX)  # the run folder, made here: an earlier exit leaves nothing behind
part train 240 "$PY" -m swe_rl.cli train -c configs/train/gpu_check.yaml -o "out_dir=$WORK" "${OVERRIDES[@]}"
grep "^train: " "$LOGS/train.log" | tee -a "$LOGS/summary.txt"  # its device line
if [ -f "$WORK/gpu_check/metrics.jsonl" ]; then
  cp "$WORK/gpu_check/metrics.jsonl" "$LOGS/train_metrics.jsonl"
  "$PY" - "$LOGS/train_metrics.jsonl" <<'PYEOF' | tee -a "$LOGS/summary.txt"
import json, sys
rows = [json.loads(x) for x in open(sys.argv[1])]
steps = [r for r in rows if "loss" in r or "reward_mean" in r]
for r in steps:
    get = lambda k: float("nan") if r.get(k) is None else float(r[k])  # noqa: E731
    print(f"train step {r['step']}: reward_mean {get('reward_mean'):.3f}, loss {get('loss'):.4f}, "
          f"scored {get('valid_frac'):.0%} of the episodes, rollout {get('time_rollout_s'):.1f} s, "
          f"update {get('time_train_s'):.2f} s, policy tokens {get('policy_tokens'):.0f}")
if sum(1 for r in steps if "time_train_s" in r) < 2:
    sys.exit("train: fewer than two RL steps in metrics.jsonl")
if any(not r.get("valid_frac") or not r.get("policy_tokens") for r in steps):  # a step that learned nothing
    sys.exit("train: a step with no scored episode or no policy token (see train.log and the trajectories)")
PYEOF
  [ "${PIPESTATUS[0]}" -eq 0 ] || status=1
else
  say "train: no metrics.jsonl"; status=1
fi
rm -rf "$WORK" "${leftovers[@]}"
say "done in $((SECONDS - START)) s, exit $status"
exit $status
