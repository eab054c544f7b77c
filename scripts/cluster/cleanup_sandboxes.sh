#!/usr/bin/env bash
# Remove sandbox containers created on THIS node by the sandboxes package (label sandboxes.managed=1 and
# sandboxes.owner_host=<this host>), e.g. left behind by a killed training run. Never touches other containers.
# Usage: scripts/cluster/cleanup_sandboxes.sh [--run-id ID] [--dry-run]
set -euo pipefail
filters=(--filter "label=sandboxes.managed=1" --filter "label=sandboxes.owner_host=$(hostname)")
dry=0
while [ $# -gt 0 ]; do
  case "$1" in
    --run-id) filters+=(--filter "label=sandboxes.run_id=$2"); shift 2 ;;
    --dry-run) dry=1; shift ;;
    *) echo "unknown option $1" >&2; exit 2 ;;
  esac
done
ids="$(docker ps -aq "${filters[@]}")"
n="$(printf '%s' "$ids" | grep -c . || true)"
if [ "$dry" = 1 ]; then echo "would remove $n sandbox containers"; printf '%s\n' "$ids" | grep . || true; exit 0; fi
[ "$n" -gt 0 ] && printf '%s\n' "$ids" | xargs docker rm -f >/dev/null
echo "removed $n sandbox containers on $(hostname)"
