"""An image that declares the CPUs it needs (MIN_CPUS_LABEL, set by the SWE-bench builder from a spec's nano_cpus)
gets at least that quota; an image without the label keeps the config's, and an unlimited quota stays unlimited."""

from __future__ import annotations

import os

import pytest

from sandboxes.docker_sandbox import MIN_CPUS_LABEL
from sandboxes.images import build_image
from sandboxes.sync import SyncSandbox

pytestmark = [pytest.mark.docker, pytest.mark.timeout(300)]
QUOTA = (
    "if [ -f /sys/fs/cgroup/cpu.max ]; then cut -d' ' -f1 /sys/fs/cgroup/cpu.max; "
    "else cat /sys/fs/cgroup/cpu/cpu.cfs_quota_us; fi"
)  # cgroup v2, else v1


def quota_of(cfg, image: str) -> str:
    from sandboxes.config import make_sandbox

    with SyncSandbox(make_sandbox(cfg, image=image, run_id="test-min-cpus")) as sb:
        return sb.exec(QUOTA).output.strip()


def test_image_label_raises_the_cpu_quota(sbx_cfg, sbx_docker_client):
    from sandboxes.config import Limits

    tag = "swe-rl/test-min-cpus:latest"
    build_image(sbx_docker_client, tag, dockerfile=f'FROM {sbx_cfg().image}\nLABEL {MIN_CPUS_LABEL}="8"\n')
    try:
        cores = min(8, os.cpu_count() or 1)
        assert quota_of(sbx_cfg(), tag) == str(cores * 100000)  # capped at the host's cores
        assert quota_of(sbx_cfg(), sbx_cfg().image) == "100000"  # no label: the config's 1 CPU
        assert quota_of(sbx_cfg(limits={"cpus": None}), tag) in ("max", "-1")  # unlimited stays unlimited
        assert Limits().cpus == 1.0
    finally:
        sbx_docker_client.api.remove_image(tag, force=True)
