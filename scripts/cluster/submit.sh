#!/usr/bin/env bash
# Submit a training job to a running cluster. The entrypoint runs on the head: swe-rl maps the recipe to OpenRLHF's
# flags, calls ray.init(address="auto") with our runtime env (AEM hook + configs) and runs OpenRLHF's CLI in-process.
# Usage: HEAD=10.0.0.1 scripts/cluster/submit.sh configs/train/qwen3_32b_deepswe_grpo_pp_aem.yaml [-o key=value ...]
set -euo pipefail
source "$(dirname "$0")/common.sh"
recipe="${1:?usage: submit.sh RECIPE.yaml [swe-rl train-openrlhf options]}"; shift
: "${HEAD:=127.0.0.1}"
ray job submit --address="http://$HEAD:$RAY_DASHBOARD_PORT" --entrypoint-num-cpus=1 -- \
  "$SWE_RL_PY" -m swe_rl.cli train-openrlhf -c "$recipe" -o cluster.ray_address=auto "$@"
