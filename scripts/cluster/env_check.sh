#!/usr/bin/env bash
# Two checks, both one line per problem and exit 1 on any:
#   env_check.sh                     this node, before Ray starts: GPUs, Docker (+ IMAGES_FILE), disk, /dev/shm, versions
#   env_check.sh RECIPE [-o k=v ...] the cluster preflight, once Ray is up (RAY_ADDRESS, or -o cluster.ray_address=auto;
#                                    a local Ray when neither): our actor classes as real Ray actors, the logger, GPUs
#                                    for the placement, and on every node versions, shared files, Docker + every
#                                    sandbox image of the dataset, disk, and one line per node naming its Docker
#                                    engine and the images it lacks (= swe-rl train-openrlhf --preflight -c RECIPE)
# Usage: GPUS_PER_NODE=8 DATA_PATHS=/data,/var/lib/docker IMAGES_FILE=images.txt scripts/cluster/env_check.sh
#        scripts/cluster/env_check.sh configs/train/qwen3_32b_deepswe_grpo_pp_aem.yaml -o cluster.ray_address=auto
set -euo pipefail
source "$(dirname "$0")/common.sh"
if [[ "${1:-}" == *.yaml || "${1:-}" == *.yml ]]; then
  recipe="$1"; shift
  exec "$SWE_RL_PY" -m swe_rl.cli train-openrlhf --preflight -c "$recipe" --disk-gb "$DISK_GB" "$@"
fi
env_check "$@"
