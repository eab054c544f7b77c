"""Images without a registry: the debootstrap base image, derived images built with no network, guarded pulls.

- `build_base_image`: debootstrap a Debian minbase rootfs with the tools SWE tasks need, `docker import` it,
  then derive the tagged image (git identity, LANG, STOPSIGNAL SIGKILL so stops are instant).
- `build_image`: `docker build --network none` from a Dockerfile (text, file or context directory).
- `ensure_image`: present -> done; missing -> pull only when the image's registry answers, else a clear error.
Every build or pull first warns when free disk under the Docker root is below a floor.
"""

from __future__ import annotations

import io
import json
import logging
import os
import shutil
import socket
import subprocess
import tarfile
import tempfile
from typing import Any

from sandboxes.base import SandboxStartError

log = logging.getLogger("sandboxes.images")

BASE_PACKAGES = ["python3", "git", "patch", "procps", "ca-certificates", "python3-pytest"]
# why: Debian splits distutils out of python3.9's standard library, and pip on Python < 3.10 imports it (its
# install locations come from distutils there): an environment built on bullseye's Python needs the whole module.
SUITE_PACKAGES = {"bullseye": ["python3-distutils"]}
BASE_DOCKERFILE = """FROM {raw}
ENV LANG=C.UTF-8 PYTHONDONTWRITEBYTECODE=1
RUN git config --system user.email sandbox@swe-rl && git config --system user.name sandbox \\
 && git config --system init.defaultBranch main
STOPSIGNAL SIGKILL
CMD ["/bin/bash"]
"""


def image_exists(client: Any, image: str) -> bool:
    import docker

    try:
        client.api.inspect_image(image)
        return True
    except docker.errors.ImageNotFound:
        return False


def check_disk_floor(client: Any, floor_gb: float, what: str) -> float | None:
    """Free GB under the Docker root (or "/" when that is not local); logs a warning below `floor_gb`."""
    try:
        root = client.info().get("DockerRootDir") or "/"
    except Exception:
        root = "/"
    path = root if os.path.isdir(root) else "/"
    free_gb = shutil.disk_usage(path).free / 2**30
    if free_gb < floor_gb:
        log.warning("only %.1f GB free under %s (floor %.1f GB) before %s", free_gb, path, floor_gb, what)
    return free_gb


def registry_of(image: str) -> tuple[str, int]:
    """(host, port) of the registry an image reference points at; Docker Hub when none is named."""
    first = image.split("/", 1)[0]
    if "/" in image and ("." in first or ":" in first or first == "localhost"):
        host, _, port = first.partition(":")
        return host, int(port) if port.isdigit() else 443
    return "registry-1.docker.io", 443


def split_reference(image: str) -> tuple[str, str | None]:
    """(repository, tag) for a pull; a digest reference stays whole (tag None); no tag means "latest"."""
    if "@" in image:
        return image, None
    last = image.rsplit("/", 1)[-1]
    if ":" in last:
        repo, _, tag = image.rpartition(":")
        return repo, tag
    return image, "latest"


def registry_reachable(image: str, timeout: float = 3.0) -> bool:
    host, port = registry_of(image)
    try:
        with socket.create_connection((host, port), timeout=timeout):
            return True
    except OSError:
        return False


def ensure_image(client: Any, image: str, *, pull: str = "missing", disk_floor_gb: float = 10.0) -> None:
    """Make `image` present locally, pulling it only when allowed and its registry is reachable."""
    if image_exists(client, image):
        return
    hint = "build it with `sandboxes build` (or `sandboxes build-base` for the base image)"
    if pull == "never":
        raise SandboxStartError(f"image {image!r} is not present locally and pull='never'; {hint}")
    host, port = registry_of(image)
    if not registry_reachable(image):
        raise SandboxStartError(
            f"image {image!r} is not present locally and registry {host}:{port} is unreachable; {hint}"
        )
    check_disk_floor(client, disk_floor_gb, f"pulling {image}")
    repo, tag = split_reference(image)
    try:
        client.api.pull(repo, tag=tag)
    except Exception as e:
        raise SandboxStartError(f"pulling image {image!r} from {host} failed", cause=e) from e


def build_image(
    client: Any,
    tag: str,
    *,
    dockerfile: str | None = None,
    context_dir: str | None = None,
    network: str = "none",
    disk_floor_gb: float = 10.0,
    dockerfile_name: str = "Dockerfile",
) -> str:
    """Build `tag` from Dockerfile text or a context directory (with its Dockerfile), with no network by default.

    dockerfile_name: the Dockerfile's path inside context_dir (like `docker build -f`).

    Returns the build log. Raises RuntimeError with the log tail when the build fails.
    """
    if (dockerfile is None) == (context_dir is None):
        raise ValueError("build_image: give exactly one of dockerfile (text) or context_dir")
    check_disk_floor(client, disk_floor_gb, f"building {tag}")
    replaced = _image_id(client, tag)
    if context_dir is not None:
        if not os.path.isfile(os.path.join(context_dir, dockerfile_name)):
            raise FileNotFoundError(f"context_dir {context_dir!r}: no {dockerfile_name} inside")
        stream = client.api.build(
            path=context_dir, dockerfile=dockerfile_name, tag=tag, network_mode=network, rm=True, forcerm=True
        )
    else:
        assert dockerfile is not None
        buf = io.BytesIO()
        with tarfile.open(fileobj=buf, mode="w") as tar:
            data = dockerfile.encode()
            info = tarfile.TarInfo("Dockerfile")
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
        buf.seek(0)
        stream = client.api.build(
            fileobj=buf, custom_context=True, tag=tag, network_mode=network, rm=True, forcerm=True
        )
    lines: list[str] = []
    for raw in stream:
        for part in raw.decode(errors="replace").splitlines():
            try:
                msg = json.loads(part)
            except json.JSONDecodeError:
                continue
            if "error" in msg:
                raise RuntimeError(f"building {tag} failed: {msg['error'].strip()}\n" + "".join(lines[-20:]))
            lines.append(msg.get("stream", ""))
    if replaced and _image_id(client, tag) != replaced:
        _remove_if_unused(client, replaced)
    return "".join(lines)


def _image_id(client: Any, image: str) -> str | None:
    try:
        return str(client.api.inspect_image(image)["Id"])
    except Exception:
        return None


def _remove_if_unused(client: Any, image_id: str) -> None:
    """A rebuild moves the tag to the new image; the one it replaced would stay behind untagged, a leak of disk
    with every rebuild. Removed without force: the engine refuses while a container, another tag or a child image
    still uses it, and then it stays."""
    try:
        client.api.remove_image(image_id, noprune=False)
    except Exception as e:
        log.debug("kept the image %s replaced by a rebuild: %s", image_id[:19], e)


BASE_REPOSITORY = "swe-rl/base"  # base images are <repository>:<Debian suite>; the suite is the tag


def ensure_base_image(client: Any, tag: str, **kw: Any) -> bool:
    """The base image `tag` (`swe-rl/base:<suite>`), debootstrapped from that Debian suite when missing: what a
    test or builder that starts FROM a base image calls first, so nothing reaches for a registry. Returns whether
    it was built."""
    repo, _, suite = tag.rpartition(":")
    if repo != BASE_REPOSITORY or not suite:
        raise ValueError(f"base image tag: expected {BASE_REPOSITORY}:<Debian suite>, got {tag!r}")
    return build_base_image(client, tag, suite=suite, **kw)


def build_base_image(
    client: Any,
    tag: str = "swe-rl/base:bookworm",
    *,
    suite: str = "bookworm",
    mirror: str = "http://deb.debian.org/debian",
    packages: list[str] | None = None,
    force: bool = False,
    disk_floor_gb: float = 10.0,
) -> bool:
    """debootstrap + `docker import` + a no-network derived build. Idempotent: returns False when `tag` exists."""
    if not force and image_exists(client, tag):
        return False
    if shutil.which("debootstrap") is None:
        raise RuntimeError("debootstrap is not installed (apt-get install -y debootstrap)")
    check_disk_floor(client, disk_floor_gb, f"building {tag}")
    include = ",".join(packages or [*BASE_PACKAGES, *SUITE_PACKAGES.get(suite, [])])
    with tempfile.TemporaryDirectory(prefix="sandboxes-base-") as work:
        rootfs = os.path.join(work, "rootfs")
        proc = subprocess.run(
            ["debootstrap", "--variant=minbase", f"--include={include}", suite, rootfs, mirror],
            capture_output=True,
            text=True,
        )
        if proc.returncode != 0:
            raise RuntimeError(
                f"debootstrap failed (exit {proc.returncode}):\n{proc.stdout[-3000:]}{proc.stderr[-3000:]}"
            )
        for junk in ("var/cache/apt/archives", "var/lib/apt/lists"):
            for entry in os.listdir(os.path.join(rootfs, junk)):
                path = os.path.join(rootfs, junk, entry)
                if os.path.isfile(path):
                    os.unlink(path)
        tar_path = os.path.join(work, "rootfs.tar")
        subprocess.run(["tar", "-C", rootfs, "-cf", tar_path, "."], check=True)
        raw = f"{tag}-raw"
        repo, _, rtag = raw.rpartition(":")
        client.api.import_image_from_file(tar_path, repository=repo, tag=rtag)
    try:
        build_image(client, tag, dockerfile=BASE_DOCKERFILE.format(raw=raw), disk_floor_gb=0)
    finally:
        try:
            client.api.remove_image(raw)
        except Exception:
            log.debug("could not remove %s", raw)
    return True
