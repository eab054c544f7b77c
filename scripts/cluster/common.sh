# Shared settings for the cluster scripts (sourced). Override any of these in the environment.
: "${RAY_PORT:=6379}"                 # GCS port of the head
: "${RAY_DASHBOARD_PORT:=8265}"       # dashboard / job-submission port of the head
: "${GPUS_PER_NODE:=8}"               # GPUs Ray advertises per node
: "${SWE_RL_PY:=python3}"             # interpreter with swe-rl[gpu] installed (same on every node)
: "${DISK_GB:=300}"                   # free disk needed for images, checkpoints and sandboxes
: "${DATA_PATHS:=.}"                  # comma-separated paths that need DISK_GB free (e.g. /data,/var/lib/docker)
: "${IMAGES_FILE:=}"                  # one sandbox image per line (from the task dataset) to pre-pull / check

node_ip() { hostname -I 2>/dev/null | awk '{print $1}' || hostname -i; }

env_check() {  # env_check [extra envcheck args]
  local args=(--gpus "$GPUS_PER_NODE" --disk-gb "$DISK_GB")
  IFS=',' read -ra paths <<<"$DATA_PATHS"
  for p in "${paths[@]}"; do args+=(--path "$p"); done
  [ -n "$IMAGES_FILE" ] && args+=(--images "$IMAGES_FILE")
  "$SWE_RL_PY" -m swe_rl.train.openrlhf.envcheck "${args[@]}" "$@"
}
