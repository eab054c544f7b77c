#!/usr/bin/env bash
# Make every sandbox image of the task set present on this node before training (rollouts must not pull).
# For each image in IMAGES_FILE: keep it if present, else `docker load` IMAGE_DIR/<name with / and : as _>.tar
# when that file exists (registry-less clusters), else `docker pull`. Parallel; exit 1 if any image is missing.
# Usage: IMAGES_FILE=images.txt [IMAGE_DIR=/shared/images] [JOBS=8] scripts/cluster/prepull_images.sh
set -euo pipefail
: "${IMAGES_FILE:?set IMAGES_FILE (one image per line)}"
: "${IMAGE_DIR:=}"
: "${JOBS:=8}"
one() {
  local image="$1" tar
  docker image inspect "$image" >/dev/null 2>&1 && { echo "present $image"; return 0; }
  tar="${IMAGE_DIR:+$IMAGE_DIR/$(echo "$image" | tr '/:' '__').tar}"
  if [ -n "$tar" ] && [ -f "$tar" ]; then docker load -q -i "$tar" >/dev/null && echo "loaded  $image" && return 0; fi
  docker pull -q "$image" >/dev/null 2>&1 && echo "pulled  $image" && return 0
  echo "MISSING $image" >&2; return 1
}
export -f one; export IMAGE_DIR
grep -v '^\s*\(#\|$\)' "$IMAGES_FILE" | xargs -r -P "$JOBS" -I{} bash -c 'one "$@"' _ {}
