"""Restore a used DockerSandbox to the state it had when fresh, and verify it; used by the warm pool's reuse.

What "state" covers, and how each part is put back and then checked (any mismatch: the sandbox is not reused):
- processes: everything but the init and its TTL sleep is SIGKILLed (bash builtins, no fork); then the pid list
  must be exactly those two;
- files of the container layer: `docker diff` lists every path changed against the image; each is put back from a
  pristine reference container of the same image (created, never started) through the engine's archive API, or
  removed when the image lacks it; then every changed path must match the reference (type, mode, owner, size,
  link target, SHA-256 of the content), read through the engine, not through a process the agent could replace;
- writable mounts outside that layer (/dev, /dev/shm, /dev/mqueue, tmpfs areas, /etc/hosts ...): entries that
  were not there when fresh are removed, files are rewritten; their listing and hashes must equal the fresh ones;
- SysV IPC objects are removed; the shell is replaced (cwd and environment back to the fresh shell's).
Not restored: the kernel's page cache and cgroup counters, the container's uptime, its TTL clock.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import io
import tarfile
import time
from dataclasses import dataclass
from typing import Any

from sandboxes import transfer

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
# Kill all but pid 1, the TTL sleep ($KEEP) and this shell, several rounds (forks); print the pids still there.
_KILL = r"""
for _ in 1 2 3 4 5; do for d in /proc/[0-9]*; do p=${d#/proc/}
  [ "$p" = 1 ] || [ "$p" = "$KEEP" ] || [ "$p" = $$ ] || kill -9 "$p" 2>/dev/null; done; done
left=; for d in /proc/[0-9]*; do p=${d#/proc/}; [ "$p" = $$ ] || left="$left $p"; done; echo "left$left"
"""
_CLEAN = "ipcrm -a 2>/dev/null; rm -rf /dev/shm/.sandboxes /dev/mqueue/* 2>/dev/null; true"
_IPC_COUNT = "cat /proc/sysvipc/shm /proc/sysvipc/sem /proc/sysvipc/msg | wc -l"  # 3 header lines when empty


def archive(client: Any, cid: str, path: str, *, full: bool) -> tuple[tuple[Any, ...], bytes] | None:
    """(signature of `path`, tar bytes) read through the engine; None when absent. full=False: header only."""
    import docker

    try:
        stream, _ = client.api.get_archive(cid, path, chunk_size=1 << 16)
    except docker.errors.NotFound:
        return None
    buf = io.BytesIO()
    try:
        for chunk in stream:
            buf.write(chunk)
            if not full and buf.tell() >= 1024:
                break
    finally:
        getattr(stream, "close", lambda: None)()
    data = buf.getvalue()
    with tarfile.open(fileobj=io.BytesIO(data), mode="r|") as tar:
        ti = tar.next()
        if ti is None:
            return None
        digest = ""
        if ti.isfile() and full:
            f = tar.extractfile(ti)
            digest = hashlib.sha256(f.read() if f else b"").hexdigest()
        sig = (ti.type, ti.mode & 0o7777, ti.uid, ti.gid, ti.size if ti.isfile() else 0, ti.linkname, digest)
    return sig, data


class Reference:
    """A created, never-started container of one image: the pristine source of files (archive API only)."""

    def __init__(self, client: Any, image: str, labels: dict[str, str]) -> None:
        self.client, self.image = client, image
        self.id = client.api.create_container(image, command=["true"], labels=labels, network_disabled=True)[
            "Id"
        ]
        self._cache: dict[tuple[str, bool], Any] = {}  # (path, full) -> archive(...) of the pristine image

    def get(self, path: str, *, full: bool) -> tuple[tuple[Any, ...], bytes] | None:
        key = (path, full)
        if key not in self._cache:
            self._cache[key] = archive(self.client, self.id, path, full=full)
        return self._cache[key]

    def is_dir(self, path: str) -> bool:
        got = self.get(path, full=False)
        return got is not None and got[0][0] == tarfile.DIRTYPE

    def remove(self) -> None:
        with contextlib.suppress(Exception):
            self.client.api.remove_container(self.id, force=True)


def _retarget(data: bytes, path: str, *, header_only: bool) -> bytes:
    """A tar of `path` (members named from its basename) rewritten to member names relative to `/`."""
    base = path.strip("/")
    out = io.BytesIO()
    with tarfile.open(fileobj=io.BytesIO(data), mode="r|") as src, tarfile.open(fileobj=out, mode="w") as dst:
        for ti in src:
            rest = ti.name.split("/", 1)[1] if "/" in ti.name else ""
            ti.name = f"{base}/{rest}" if rest else base
            dst.addfile(ti, src.extractfile(ti) if ti.isfile() else None)
            if header_only:
                break
    return out.getvalue()


def _put_root(client: Any, cid: str, data: bytes) -> None:
    """Extract a tar at `/` keeping owners (the SDK's put_archive cannot ask for copyUIDGID)."""
    api = client.api
    res = api._put(
        api._url("/containers/{0}/archive", cid), params={"path": "/", "copyUIDGID": "1"}, data=data
    )
    api._raise_for_status(res)


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
    diff: frozenset[tuple[str, int]]  # `docker diff` entries of the fresh container (the engine's own init)


def probe(client: Any, cid: str) -> Fresh:
    """Record a fresh sandbox's state (blocking; before anything but the shell ran in it)."""
    _, out = _run(client, cid, _PROBE)
    sleep_pid = next(line.split()[1] for line in out.splitlines() if line.startswith("sleep "))
    mounts = tuple(line[6:] for line in out.splitlines() if line.startswith("mount "))
    _, listing = _run(client, cid, _LIST, *mounts)
    diff = frozenset((d["Path"], d["Kind"]) for d in client.api.diff(cid) or [])
    return Fresh(sleep_pid, mounts, listing, diff)


def _changed(client: Any, cid: str, fresh: Fresh) -> list[tuple[str, int]]:
    return sorted(
        (d["Path"], d["Kind"]) for d in client.api.diff(cid) or [] if (d["Path"], d["Kind"]) not in fresh.diff
    )


def _restore_files(client: Any, cid: str, ref: Reference, fresh: Fresh) -> None:
    """Put every path the container layer changed back to the image's version (or remove it)."""
    doomed: list[str] = []
    tars = []
    for path, kind in _changed(client, cid, fresh):
        if kind == 1:  # added: not in the image; removing the topmost added path removes what is below it
            if not any(path.startswith(d + "/") for d in doomed):
                doomed.append(path)
            continue
        if kind == 0 and ref.is_dir(path):  # a directory still there: only its own mode/owner/times
            tars.append(_retarget(ref.get(path, full=False)[1], path, header_only=True))  # type: ignore[index]
            continue
        doomed.append(path)  # a changed file or link, or a deleted path: remove, then copy back whole
        got = ref.get(path, full=True)
        if got is not None:
            tars.append(_retarget(got[1], path, header_only=False))
    if doomed:
        rc, out = _run(client, cid, 'rm -rf -- "$@"', *doomed)
        if rc != 0:
            raise OSError(f"could not remove changed paths: {out[-300:]}")
    for data in tars:
        _put_root(client, cid, data)


def _files_match(client: Any, cid: str, ref: Reference, fresh: Fresh) -> bool:
    for path, _ in _changed(client, cid, fresh):
        full = not ref.is_dir(
            path
        )  # a directory: its own header (its changed children are listed themselves)
        want, got = ref.get(path, full=full), archive(client, cid, path, full=full)
        if (want is None) != (got is None) or (want is not None and got is not None and want[0] != got[0]):
            return False
    return True


def _clean_mounts(client: Any, cid: str, fresh: Fresh) -> None:
    """Remove what the writable mounts hold that the fresh listing lacks (deepest paths first)."""

    def paths(listing: str) -> set[str]:
        return {
            ln.split(" ", 6)[6] for ln in listing.splitlines() if ln.startswith("L ") and ln.count(" ") >= 6
        }

    _, now = _run(client, cid, _LIST, *fresh.mounts)
    extra = sorted(paths(now) - paths(fresh.listing), reverse=True)
    if extra:
        _run(client, cid, 'rm -rf -- "$@" 2>/dev/null; true', *extra)


def _kill_all(client: Any, cid: str, fresh: Fresh) -> bool:
    for _ in range(5):  # killed processes may linger a moment as zombies until the init reaps them
        rc, out = _run(client, cid, _KILL, env={"KEEP": fresh.sleep_pid})
        if rc == 0 and sorted(out.split()[1:]) == sorted(["1", fresh.sleep_pid]):
            return True
        time.sleep(0.05)
    return False


def restore_blocking(client: Any, cid: str, ref: Reference, fresh: Fresh) -> bool:
    """Kill, clean and put back; True when processes, files and IPC match the fresh state (mounts: see below)."""
    if not _kill_all(client, cid, fresh):
        return False
    _run(client, cid, _CLEAN)
    _clean_mounts(client, cid, fresh)
    _restore_files(client, cid, ref, fresh)
    _, ipc = _run(client, cid, _IPC_COUNT)
    return ipc.strip() == "3" and _files_match(client, cid, ref, fresh)


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
