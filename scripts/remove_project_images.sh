#!/usr/bin/env bash
# Remove every image this project builds, so that the next run meets the engine as a newcomer's machine does
# (`.ci/run` starts with it: a test that only passes because earlier work left an image behind fails there).
#
# What goes, by tag and by label (nothing else on the engine is touched; no `docker system prune`):
#   swe-rl/*            sandbox base images (swe-rl/base:<suite>), the micro suite, test-only images
#   swe-rl-*, swe-rl__* task-repo images named after their task, test-only task images
#   sweb.*              SWE-bench env and instance images (ours, offline, and the official harness's)
#   sbx-pytest/*        the sandboxes package's test images
#   images labelled org.swe-rl.builder / org.swe-rl.history-cut-at / org.swe-rl.base-commit, whatever their tag
#   untagged images (what a rebuild replaced or a failed build left) and the build cache
# Containers that sandboxes created (label sandboxes.managed=1) and the official harness's (sweb.*) go first:
# a container keeps its image alive.
# Kept: the uv, pip and wheel caches (downloads, not state the tests depend on).
# --dry-run: list what would be removed, remove nothing.
set -euo pipefail
dry=0
[ "${1:-}" = "--dry-run" ] && dry=1

if ! docker info >/dev/null 2>&1; then
  echo "remove_project_images: no Docker engine answers; nothing to remove" >&2
  exit 0
fi
t0=$(date +%s)
containers=$( { docker ps -aq --filter label=sandboxes.managed=1
                docker ps -a --format '{{.ID}} {{.Image}} {{.Names}}' | awk '$2 ~ /^sweb\./ || $3 ~ /^sweb\./ {print $1}'; } | sort -u)
if [ "$dry" = 1 ]; then
  echo "containers:"; for c in $containers; do docker ps -a --filter "id=$c" --format '  {{.Names}} ({{.Image}})'; done
fi
if [ -n "$containers" ] && [ "$dry" = 0 ]; then
  # shellcheck disable=SC2086
  docker rm -f $containers >/dev/null
fi
list_images() {
  { docker images --format '{{.Repository}}:{{.Tag}} {{.ID}}' | awk '$1 ~ /^(swe-rl[\/_-]|sweb\.|sbx-pytest\/)/ {print $2}'
    for label in org.swe-rl.builder org.swe-rl.history-cut-at org.swe-rl.base-commit; do
      docker images -q --filter "label=$label"
    done
    docker images -q --filter dangling=true; } | sort -u
}
images=$(list_images)
if [ "$dry" = 1 ]; then
  echo "images:"
  for i in $images; do
    echo "  $i $(docker image inspect -f '{{join .RepoTags ","}}' "$i" 2>/dev/null || true)"
  done
  exit 0
fi
n=$(echo "$images" | grep -c . || true)
# An image with child images cannot be removed before them (an env image under its instance images, a base under
# everything): each pass removes what has no child left, until nothing of ours is left.
for _ in 1 2 3 4 5 6; do
  [ -n "$images" ] || break
  # shellcheck disable=SC2086
  docker rmi -f $images >/dev/null 2>&1 || true
  images=$(list_images)
done
docker builder prune -af >/dev/null 2>&1 || true
left=$(docker images --format '{{.Repository}}:{{.Tag}}' | grep -cE '^(swe-rl[/_-]|sweb\.|sbx-pytest/)' || true)
echo "remove_project_images: removed $(echo "$containers" | grep -c . || true) container(s) and $n image(s)" \
  "in $(( $(date +%s) - t0 )) s; project images left: $left"
[ "$left" -eq 0 ]
