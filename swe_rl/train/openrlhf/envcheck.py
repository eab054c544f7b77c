"""Per-node environment check for cluster training: fails early, one clear line per problem.

    python -m swe_rl.train.openrlhf.envcheck --gpus 8 --disk-gb 300 --path /data --images images.txt
Exit 0 when every check passes, 1 otherwise. Used by scripts/cluster/*.sh on every node before Ray starts.
"""

from __future__ import annotations

import argparse
import importlib.util
import shutil
import sys
from dataclasses import dataclass
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path

# What OpenRLHF 0.11.2 pins (its wheel METADATA) and what vLLM 0.29.0 pins (torch).
PINS = {
    "openrlhf": "0.11.2",
    "vllm": "0.29.0",
    "torch": "2.13.0",
    "ray": "2.55.0",
    "transformers": "5.15.0",
    "deepspeed": "0.19.6",
    "flash-attn": "2.8.3",
}


@dataclass(frozen=True)
class Check:
    name: str
    ok: bool
    detail: str

    def line(self) -> str:
        return f"{'OK  ' if self.ok else 'FAIL'} {self.name}: {self.detail}"


def check_python() -> Check:
    v = sys.version_info
    ok = (3, 10) <= (v.major, v.minor) <= (3, 12)
    return Check(
        "python", ok, f"{v.major}.{v.minor}" + ("" if ok else " (need 3.10-3.12; the wheels are cp311)")
    )


def check_package(dist: str, want: str) -> Check:
    try:
        have = version(dist)
    except PackageNotFoundError:
        return Check(dist, False, f"not installed (need {want}; `pip install -e .[gpu]` on the GPU image)")
    ok = have.split("+")[0] == want
    return Check(dist, ok, have if ok else f"{have} installed, need {want}")


def check_gpus(expected: int) -> Check:
    if expected <= 0:
        return Check("gpus", True, "not required")
    if importlib.util.find_spec("torch") is None:
        return Check("gpus", False, "torch is not installed")
    import torch

    n = torch.cuda.device_count() if torch.cuda.is_available() else 0
    return Check(
        "gpus", n >= expected, f"{n} visible CUDA devices, need {expected} (check CUDA_VISIBLE_DEVICES)"
    )


def check_docker(images: list[str]) -> list[Check]:
    try:
        import docker

        client = docker.from_env(timeout=10)
        client.ping()
    except Exception as e:  # engine absent, socket missing, permission denied ...
        return [
            Check(
                "docker",
                False,
                f"engine unreachable ({type(e).__name__}: {e}); start dockerd, add the user "
                "to the docker group",
            )
        ]
    out = [Check("docker", True, f"engine {client.version().get('Version', '?')}")]
    tags = {t for img in client.images.list() for t in img.tags}  # one call, not one per image (thousands)
    missing = []
    for image in images:
        if image in tags or (":" not in image.rsplit("/", 1)[-1] and f"{image}:latest" in tags):
            continue
        try:
            client.images.get(image)  # by id or digest
        except Exception:
            missing.append(image)
    if images:
        detail = f"{len(images) - len(missing)}/{len(images)} present"
        if missing:
            detail += f"; missing e.g. {missing[:3]} (run scripts/cluster/prepull_images.sh)"
        out.append(Check("images", not missing, detail))
    return out


def check_disk(path: str, min_gb: float) -> Check:
    p = Path(path)
    while not p.exists() and p != p.parent:
        p = p.parent
    free = shutil.disk_usage(p).free / 2**30
    return Check(f"disk {path}", free >= min_gb, f"{free:.0f} GiB free, need {min_gb:.0f}")


def check_shm(min_gb: float) -> Check:
    if not Path("/dev/shm").exists():
        return Check("/dev/shm", False, "missing (Ray's object store and NCCL need it)")
    free = shutil.disk_usage("/dev/shm").total / 2**30
    return Check(
        "/dev/shm", free >= min_gb, f"{free:.0f} GiB, need {min_gb:.0f} (docker run --shm-size / SLURM)"
    )


def check_adapter() -> Check:
    from swe_rl.train.openrlhf.launch import agent_func_path

    path = Path(agent_func_path())
    ok = path.is_file() and importlib.util.find_spec("swe_rl.train.openrlhf.actors") is not None
    return Check("swe-rl adapter", ok, f"agent executor {path}" + ("" if ok else " missing"))


def run_checks(
    gpus: int, disk_gb: float, paths: list[str], images: list[str], docker: bool, shm_gb: float
) -> list[Check]:
    checks = [
        check_python(),
        *(check_package(d, v) for d, v in PINS.items()),
        check_gpus(gpus),
        check_adapter(),
    ]
    checks += [check_disk(p, disk_gb) for p in paths]
    if shm_gb > 0:
        checks.append(check_shm(shm_gb))
    if docker:
        checks += check_docker(images)
    return checks


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description="swe-rl cluster node check")
    ap.add_argument("--gpus", type=int, default=8, help="CUDA devices this node must show")
    ap.add_argument("--disk-gb", type=float, default=200.0, help="free space needed on each --path")
    ap.add_argument(
        "--path", action="append", default=None, help="paths that need --disk-gb free (repeatable)"
    )
    ap.add_argument("--images", type=Path, default=None, help="file with one sandbox image per line")
    ap.add_argument("--no-docker", action="store_true", help="skip the Docker checks (trainer-only nodes)")
    ap.add_argument("--shm-gb", type=float, default=16.0, help="minimum /dev/shm size (0 = skip)")
    args = ap.parse_args(argv)
    images = [s.strip() for s in args.images.read_text().splitlines() if s.strip()] if args.images else []
    checks = run_checks(args.gpus, args.disk_gb, args.path or ["."], images, not args.no_docker, args.shm_gb)
    for c in checks:
        print(c.line())
    bad = [c for c in checks if not c.ok]
    print(f"{len(checks) - len(bad)}/{len(checks)} checks passed" + (f"; {len(bad)} failed" if bad else ""))
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
