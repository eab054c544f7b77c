"""The container layer of a used sandbox put back to its image's version, and checked (restore.py uses it).

What changed is read from the container's overlay2 upper directory on this host: every path written, created or
deleted since the container started is there (deleted ones as whiteouts, replaced directories marked opaque or
redirected). That is milliseconds where `docker diff` walks the whole tree (~2 s here). The pristine version of
each path comes from a reference container of the same image (created, never started) through the engine's
archive API; the check compares every upper entry, read on the host, with it. Needs a local overlay2 engine
whose data root this process can read; elsewhere `upper_dir` is None and sandboxes are not reused.
"""

from __future__ import annotations

import contextlib
import hashlib
import io
import os
import stat
import tarfile
from typing import Any

Sig = tuple[Any, ...]  # (tar type, mode bits, uid, gid, size, link target, sha256) of one path


def archive(client: Any, cid: str, path: str, *, full: bool) -> tuple[Sig, bytes] | None:
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
    with tarfile.open(fileobj=io.BytesIO(buf.getvalue()), mode="r|") as tar:
        ti = tar.next()
        if ti is None:
            return None
        digest = ""
        if ti.isfile() and full:
            f = tar.extractfile(ti)
            digest = hashlib.sha256(f.read() if f else b"").hexdigest()
        sig = (ti.type, ti.mode & 0o7777, ti.uid, ti.gid, ti.size if ti.isfile() else 0, ti.linkname, digest)
    return sig, buf.getvalue()


class Reference:
    """A created, never-started container of one image: the pristine source of files (archive API only)."""

    def __init__(self, client: Any, image: str, labels: dict[str, str]) -> None:
        self.client, self.image = client, image
        created = client.api.create_container(image, command=["true"], labels=labels, network_disabled=True)
        self.id = created["Id"]
        self._cache: dict[tuple[str, bool], Any] = {}  # (path, full) -> archive(...) of the pristine image

    def get(self, path: str, *, full: bool) -> tuple[Sig, bytes] | None:
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


def upper_dir(client: Any, cid: str) -> str | None:
    """The container's overlay2 upper directory when this host can read it, else None."""
    driver = client.api.inspect_container(cid).get("GraphDriver") or {}
    upper = (driver.get("Data") or {}).get("UpperDir")
    if driver.get("Name") != "overlay2" or not upper or not os.access(upper, os.R_OK | os.X_OK):
        return None
    return upper


def upper_entries(upper: str) -> list[str]:
    """Container paths present in the upper directory (top-down order)."""
    out = []
    for root, dirs, files in os.walk(upper):
        dirs.sort()
        for name in sorted(dirs) + sorted(files):
            out.append("/" + os.path.relpath(os.path.join(root, name), upper))
    return out


def _is_whiteout(st: os.stat_result) -> bool:
    return stat.S_ISCHR(st.st_mode) and st.st_rdev == 0


def _replaced(host: str) -> bool:
    """A directory whose lower contents are hidden (deleted and recreated, or renamed in)."""
    try:
        names = os.listxattr(host, follow_symlinks=False)
    except OSError:
        return False
    return "trusted.overlay.opaque" in names or "trusted.overlay.redirect" in names


def _rename(name: str, base: str) -> str:
    rest = name.split("/", 1)[1] if "/" in name else ""
    return f"{base}/{rest}" if rest else base


def _retarget(data: bytes, path: str, *, header_only: bool) -> list[tuple[tarfile.TarInfo, bytes | None]]:
    """Members of the reference's tar of `path` (named from its basename) renamed relative to `/`."""
    base, out = path.strip("/"), []
    with tarfile.open(fileobj=io.BytesIO(data), mode="r|") as src:
        for ti in src:
            ti.name = _rename(ti.name, base)
            if ti.islnk():  # a hard link names another member of the same archive
                ti.linkname = _rename(ti.linkname, base)
            f = src.extractfile(ti) if ti.isfile() else None
            out.append((ti, f.read() if f else None))
            if header_only:
                break
    return out


def plan(upper: str, baseline: frozenset[str], ref: Reference) -> tuple[list[str], bytes]:
    """What to remove (topmost paths) and a tar (relative to `/`) of what to put back from the image."""
    doomed: list[str] = []
    members: list[tuple[tarfile.TarInfo, bytes | None]] = []
    pruned: list[str] = []
    for path in upper_entries(upper):
        if path in baseline or any(path.startswith(p + "/") for p in pruned):
            continue
        host = upper + path
        st = os.lstat(host)
        if stat.S_ISDIR(st.st_mode) and not _replaced(host) and ref.is_dir(path):
            got = ref.get(path, full=False)  # a directory still there: its own mode/owner/times only
            members += _retarget(got[1], path, header_only=True)  # type: ignore[index]
            continue
        if not _is_whiteout(st):
            doomed.append(path)  # written, created or replaced: remove it (whole subtree) ...
        pruned.append(path)
        got = ref.get(path, full=True)  # ... and put the image's version back, if the image has one
        if got is not None:
            members += _retarget(got[1], path, header_only=False)
    out = io.BytesIO()
    with tarfile.open(fileobj=out, mode="w") as tar:
        for ti, data in members:
            tar.addfile(ti, io.BytesIO(data) if data is not None else None)
    return doomed, out.getvalue() if members else b""


def put_root(client: Any, cid: str, data: bytes) -> None:
    """Extract a tar at `/` keeping owners (the SDK's put_archive cannot ask for copyUIDGID)."""
    api = client.api
    url = api._url("/containers/{0}/archive", cid)
    api._raise_for_status(api._put(url, params={"path": "/", "copyUIDGID": "1"}, data=data))


def _host_sig(host: str) -> Sig:
    st = os.lstat(host)
    mode = st.st_mode & 0o7777
    if stat.S_ISREG(st.st_mode):
        with open(host, "rb") as f:
            digest = hashlib.file_digest(f, "sha256").hexdigest()
        return (tarfile.REGTYPE, mode, st.st_uid, st.st_gid, st.st_size, "", digest)
    if stat.S_ISDIR(st.st_mode):
        return (tarfile.DIRTYPE, mode, st.st_uid, st.st_gid, 0, "", "")
    if stat.S_ISLNK(st.st_mode):
        return (tarfile.SYMTYPE, mode, st.st_uid, st.st_gid, 0, os.readlink(host), "")
    kinds = {stat.S_ISFIFO: tarfile.FIFOTYPE, stat.S_ISCHR: tarfile.CHRTYPE, stat.S_ISBLK: tarfile.BLKTYPE}
    kind = next((t for test, t in kinds.items() if test(st.st_mode)), b"?")
    return (kind, mode, st.st_uid, st.st_gid, 0, "", "")


def matches(upper: str, baseline: frozenset[str], ref: Reference) -> bool:
    """Every path in the upper directory equals the image's version (a whiteout or an extra path never does)."""
    for path in upper_entries(upper):
        if path in baseline:
            continue
        host = upper + path
        if _is_whiteout(os.lstat(host)):
            return False
        mine = _host_sig(host)
        want = ref.get(path, full=mine[0] == tarfile.REGTYPE)
        if want is None or want[0] != mine:
            return False
    return True
