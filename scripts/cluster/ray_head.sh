#!/usr/bin/env bash
# Start the Ray head on this node (after the node check). Add --block to keep it in the foreground (SLURM).
# Usage: scripts/cluster/ray_head.sh [--block]
set -euo pipefail
source "$(dirname "$0")/common.sh"
env_check
ip="$(node_ip)"
ray start --head --node-ip-address="$ip" --port="$RAY_PORT" --num-gpus="$GPUS_PER_NODE" \
  --dashboard-host=0.0.0.0 --dashboard-port="$RAY_DASHBOARD_PORT" "$@"
echo "head at $ip:$RAY_PORT; workers: scripts/cluster/ray_worker.sh $ip; submit: HEAD=$ip scripts/cluster/submit.sh <recipe>"
