#!/usr/bin/env bash
# Node check before training: GPUs, Docker (+ sandbox images), disk, /dev/shm, pinned versions. Exit 1 on problems.
# Usage: GPUS_PER_NODE=8 DATA_PATHS=/data,/var/lib/docker IMAGES_FILE=images.txt scripts/cluster/env_check.sh
set -euo pipefail
source "$(dirname "$0")/common.sh"
env_check "$@"
