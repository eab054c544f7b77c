#!/usr/bin/env bash
# Join this node to the Ray cluster whose head is HEAD_IP (after the node check).
# Usage: scripts/cluster/ray_worker.sh HEAD_IP [--block]
set -euo pipefail
source "$(dirname "$0")/common.sh"
head="${1:?usage: ray_worker.sh HEAD_IP [--block]}"; shift
env_check
ray start --address="$head:$RAY_PORT" --node-ip-address="$(node_ip)" --num-gpus="$GPUS_PER_NODE" "$@"
