#!/usr/bin/env bash
# Build the sandbox base image without any registry: debootstrap a Debian bookworm minbase rootfs with the
# tools SWE tasks need, `docker import` it, then derive a tagged image that sets STOPSIGNAL SIGKILL.
# Idempotent: does nothing when the image exists. Usage: scripts/build_base_image.sh [TAG]
set -euo pipefail
TAG="${1:-swe-rl/base:bookworm}"
if docker image inspect "$TAG" >/dev/null 2>&1; then echo "base image $TAG present"; exit 0; fi
MIRROR="${DEBIAN_MIRROR:-http://deb.debian.org/debian}"
work="$(mktemp -d)"; trap 'rm -rf "$work"' EXIT
echo "debootstrap bookworm into $work/rootfs (about a minute)"
debootstrap --variant=minbase --include=python3,git,patch,procps,ca-certificates,python3-pytest \
  bookworm "$work/rootfs" "$MIRROR" >"$work/debootstrap.log" 2>&1 || { tail -20 "$work/debootstrap.log"; exit 1; }
rm -rf "$work/rootfs/var/cache/apt/archives/"*.deb "$work/rootfs/var/lib/apt/lists/"*
tar -C "$work/rootfs" -c . | docker import --change 'CMD ["/bin/bash"]' - "$TAG-raw" >/dev/null
printf 'FROM %s\nENV LANG=C.UTF-8 PYTHONDONTWRITEBYTECODE=1\nRUN git config --system user.email sandbox@swe-rl && git config --system user.name sandbox && git config --system init.defaultBranch main\nSTOPSIGNAL SIGKILL\n' "$TAG-raw" \
  | docker build --network none -q -t "$TAG" - >/dev/null
docker rmi "$TAG-raw" >/dev/null 2>&1 || true
echo "built $TAG"
