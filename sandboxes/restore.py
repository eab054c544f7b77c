"""Restore a used DockerSandbox to the state it had when fresh, and verify it; used by the warm pool's reuse.

What "state" covers, and how each part is put back and then checked (any mismatch: the sandbox is not reused):
- processes: everything but the init and its TTL sleep is SIGKILLed (bash builtins, no fork); then the pid list
  must be exactly those two;
- files of the container layer (sandboxes/overlay.py): every path in the container's overlay upper directory is
  removed or put back from a pristine reference container of the same image, then must equal the image's
  version (type, mode, owner, size, link target, SHA-256), read on the host, not by a process in the sandbox;
- writable mounts outside that layer (/dev, /dev/shm, /dev/mqueue, tmpfs areas, /etc/hosts ...): entries that
  were not there when fresh are removed; their listing and hashes must then equal the fresh ones (a changed file
  there is not rewritten: that sandbox is not reused);
- SysV IPC objects are removed; the shell is replaced (cwd and environment back to the fresh shell's).
Not restored: the kernel's page cache and cgroup counters, the container's uptime, its TTL clock. Needs a local
overlay2 engine whose data root this process can read; elsewhere nothing is reused.
"""

from __future__ import annotations

import asyncio
import os
import time
from dataclasses import dataclass
from typing import Any

from sandboxes import overlay, transfer

# Fresh-state probe, run once when a pool sandbox is new: the TTL sleep's pid and every writable mount other than
# the container layer (bind-mounted files such as /etc/hosts included).
_PROBE = r"""
read -r sleep_pid _ < /proc/1/task/1/children; echo "sleep $sleep_pid"
while read -r _ _ _ _ mnt opts _; do
  case "$mnt" in /|/proc|/proc/*|/sys|/sys/*) continue;; esac
  case ",$opts," in *,rw,*) echo "mount $mnt";; esac
done < /proc/self/mountinfo
"""
# Listing of those mounts (type, mode, owner, size, path) and a hash of each regular file; the shell's state
# directory is left out (the new shell recreates it).
_LIST = r"""
for m in "$@"; do find "$m" -xdev ! -path '/dev/shm/.sandboxes*' -printf 'L %y %m %U %G %s %p\n'; done | sort
for m in "$@"; do find "$m" -xdev -type f ! -path '/dev/shm/.sandboxes*' -exec sha256sum {} +; done | sort
"""
# Kill all but pid 1, the TTL sleep ($KEEP) and this shell, several rounds (forks), with bash builtins only (no
# fork while a fork bomb may hold the pids limit); then wait up to ~1 s for the init to reap the dead, and print
# the pids still there.
_KILL = r"""
for _ in 1 2 3 4 5; do for d in /proc/[0-9]*; do p=${d#/proc/}
  [ "$p" = 1 ] || [ "$p" = "$KEEP" ] || [ "$p" = $$ ] || kill -9 "$p" 2>/dev/null; done; done
for _ in $(seq 20); do
  n=0; for d in /proc/[0-9]*; do p=${d#/proc/}; [ "$p" = $$ ] || n=$((n + 1)); done
  [ "$n" -le 2 ] && break; sleep 0.05
done
left=; for d in /proc/[0-9]*; do p=${d#/proc/}; [ "$p" = $$ ] || left="$left $p"; done; echo "left$left"
"""
_CLEAN = "ipcrm -a 2>/dev/null; rm -rf /dev/shm/.sandboxes /dev/mqueue/* 2>/dev/null; true"
_IPC_COUNT = "cat /proc/sysvipc/shm /proc/sysvipc/sem /proc/sysvipc/msg | wc -l"  # 3 header lines when empty


def _run(
    client: Any, cid: str, script: str, *args: str, env: dict[str, str] | None = None
) -> tuple[int, str]:
    rc, out, err = transfer.exec_io(
        client, cid, ["bash", "-c", script, "restore", *args], env=env, timeout=120
    )
    return rc, (out + err).decode(errors="replace")


@dataclass(frozen=True)
class Fresh:
    """What a fresh sandbox looked like."""

    sleep_pid: str  # pid of the TTL sleep (kept alive)
    mounts: tuple[str, ...]  # writable mounts outside the container layer
    listing: str  # _LIST output over those mounts
    upper: str | None  # the container's overlay2 upper directory on this host (None: cannot be restored)
    baseline: frozenset[str]  # what the upper directory held when fresh (the engine's own init binary)


def probe(client: Any, cid: str) -> Fresh:
    """Record a fresh sandbox's state (blocking; before anything but the shell ran in it)."""
    _, out = _run(client, cid, _PROBE)
    sleep_pid = next(line.split()[1] for line in out.splitlines() if line.startswith("sleep "))
    mounts = tuple(line[6:] for line in out.splitlines() if line.startswith("mount "))
    _, listing = _run(client, cid, _LIST, *mounts)
    upper = overlay.upper_dir(client, cid)
    baseline = frozenset(overlay.upper_entries(upper)) if upper else frozenset()
    return Fresh(sleep_pid, mounts, listing, upper, baseline)


def _paths(listing: str) -> set[str]:
    return {ln.split(" ", 6)[6] for ln in listing.splitlines() if ln.startswith("L ") and ln.count(" ") >= 6}


def _kill_and_clean(client: Any, cid: str, fresh: Fresh) -> str | None:
    """Kill every process but the init and the TTL sleep, drop IPC objects and the shell state, and return the
    listing of the writable mounts (one exec); None when processes survived."""
    script = f"{_KILL}\n{_CLEAN}\n{_LIST}"
    for _ in range(5):  # killed processes may linger a moment as zombies until the init reaps them
        rc, out = _run(client, cid, script, *fresh.mounts, env={"KEEP": fresh.sleep_pid})
        first, _, listing = out.partition("\n")
        if rc == 0 and sorted(first.split()[1:]) == sorted(["1", fresh.sleep_pid]):
            return listing
        time.sleep(0.05)
    return None


def restore_blocking(client: Any, cid: str, ref: overlay.Reference, fresh: Fresh) -> bool:
    """Kill, clean and put back; True when processes, files and IPC match the fresh state (mounts: see below)."""
    if fresh.upper is None or not os.path.isdir(fresh.upper):
        return False
    listing = _kill_and_clean(client, cid, fresh)
    if listing is None:
        return False
    extra = sorted(
        _paths(listing) - _paths(fresh.listing), reverse=True
    )  # new entries in the writable mounts
    doomed, tar = overlay.plan(fresh.upper, fresh.baseline, ref)
    rc, out = _run(client, cid, f'rm -rf -- "$@" && {_IPC_COUNT}', *extra, *doomed)
    if rc != 0 or out.strip() != "3":  # could not remove something, or IPC objects are left
        return False
    if tar:
        overlay.put_root(client, cid, tar)
    return overlay.matches(fresh.upper, fresh.baseline, ref)


def mounts_match(client: Any, cid: str, fresh: Fresh) -> bool:
    """The writable mounts list exactly as when fresh (checked once the new shell made its state dir)."""
    return _run(client, cid, _LIST, *fresh.mounts)[1] == fresh.listing


async def restore(sb: Any) -> bool:
    """Restore a pool sandbox (a DockerSandbox the pool gave `_restore_ref` and `_fresh`), with a new shell."""
    ref, fresh = getattr(sb, "_restore_ref", None), getattr(sb, "_fresh", None)
    if ref is None or fresh is None or sb._closed or not sb._started:
        return False
    if sb._transport is not None:
        sb._transport.close()
    sb._transport = sb._shell_pid = None
    if not await asyncio.to_thread(restore_blocking, sb._client, sb.id, ref, fresh):
        return False
    await sb._start_shell()
    return await asyncio.to_thread(mounts_match, sb._client, sb.id, fresh)
