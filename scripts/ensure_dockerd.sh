#!/usr/bin/env bash
# Start dockerd in the background when `docker info` does not answer, and wait until it does (max 60 s).
set -euo pipefail
if docker info >/dev/null 2>&1; then exit 0; fi
if ! command -v dockerd >/dev/null; then echo "dockerd not installed (apt-get install -y docker.io)" >&2; exit 1; fi
echo "starting dockerd"
nohup dockerd >/var/log/dockerd.log 2>&1 &
for _ in $(seq 1 60); do
  if docker info >/dev/null 2>&1; then echo "dockerd is up"; exit 0; fi
  sleep 1
done
echo "dockerd did not answer within 60 s; see /var/log/dockerd.log:" >&2
tail -20 /var/log/dockerd.log >&2
exit 1
