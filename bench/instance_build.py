"""A further instance image on its present env image: the builder's layout (source archive ADDed, base commit made
in the image) against the previous one (source unpacked and committed on the host, tree + .git through the build
context, COPY), built alternately under a probe tag in this process; prints each build's seconds and new/old.

Usage: SWE_RL_REAL_INPUTS=DIR .venv/bin/python bench/instance_build.py [INSTANCE_ID] [ROUNDS]
Needs the instance's env image present (it is never built here); the probe tag is removed after each build, so no
build reuses another's layers. Without SWE_RL_REAL_INPUTS: one line, exit 0.
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from swe_rl.images.swebench_build import Progress, Session, build_instance, plan_instance, read_rows
from swe_rl.images.swebench_env import ENV_LABEL, load_overrides
from swe_rl.images.swebench_images import Instance, load_spec_table, source_of, source_sha256
from swe_rl.images.swebench_stage import (
    StagedSource,
    _commit,
    _unpack,
    base_commit_lines,
    instance_script,
    stage_archive,
    stage_instance,
)
from swe_rl.images.task_images import image_label, sandboxes_builder

TAG = "swe-rl/buildprobe:{}"
OLD_DOCKERFILE = """FROM {env}
COPY local-requirements.txt /opt/swe-rl-env/local-requirements.txt
COPY testbed/ /testbed/
COPY setup.sh /opt/swe-rl-setup.sh
RUN bash /opt/swe-rl-setup.sh && git config --global --add safe.directory /testbed
WORKDIR /testbed
LABEL org.swe-rl.base-commit="{base}"
"""


def old_layout(inst: Instance, ctx: Path, env: str, local: list[str], tag: str) -> str:
    """The previous builder's instance build (before ad85797), for the baseline only."""
    stage_instance(inst, ctx, env, local, "")
    _unpack(inst.source, ctx / "testbed")
    base = _commit(ctx / "testbed")
    skip = set(base_commit_lines())
    script = "".join(f"{x}\n" for x in instance_script(inst, bool(local)).splitlines() if x not in skip)
    (ctx / "setup.sh").write_text(script)
    (ctx / "Dockerfile").write_text(OLD_DOCKERFILE.format(env=env, base=base))
    sandboxes_builder(tag, ctx / "Dockerfile", ctx)
    return base


def new_layout(inst: Instance, ctx: Path, env: str, local: list[str], tag: str) -> str:
    stage_instance(inst, ctx, env, local, "")
    stage_archive(inst.source, ctx)
    return build_instance(tag, ctx, {"org.swe-rl.bench": "1"})


def main(inputs: Path, iid: str, rounds: int) -> int:
    (row,) = read_rows(inputs, [iid])
    table = load_spec_table(inputs / "wheels", inputs / "specs.json")
    s = Session(inputs, table, load_overrides(), False, Progress())
    inst = Instance(row, table.spec(row), source_of(inputs, iid))
    with tempfile.TemporaryDirectory() as tmp:
        env, local, info = plan_instance(
            inst, s, StagedSource(inst.source, Path(tmp) / "t", source_sha256(inst.source))
        )
    key = env.key(info.image_id)
    if image_label(env.tag(key), ENV_LABEL) != key:
        print(f"{iid}: env image {env.tag(key)} is not present (this bench never builds one): skipped")
        return 0
    times: dict[str, list[float]] = {"old": [], "new": []}
    shas = set()
    for _ in range(rounds):
        for name, build in (("old", old_layout), ("new", new_layout)):
            tag = TAG.format(iid.split("__")[-1])
            load = Path("/proc/loadavg").read_text().split()[0]
            with tempfile.TemporaryDirectory(prefix="swe-rl-bench-") as tmp:
                ctx = Path(tmp) / "ctx"
                ctx.mkdir()
                t0 = time.monotonic()
                try:
                    shas.add(build(inst, ctx, env.tag(key), local, tag))
                    times[name].append(time.monotonic() - t0)
                finally:
                    subprocess.run(["docker", "rmi", "-f", tag], capture_output=True)
            print(f"{name}: {times[name][-1]:.1f} s (load {load})", flush=True)
    old, new = min(times["old"]), min(times["new"])
    print(f"{iid}: old {old:.1f} s, new {new:.1f} s (best of {rounds}); new/old {new / old:.2f}")
    print(f"base commits: {'the same' if len(shas) == 1 else 'DIFFER: ' + ', '.join(sorted(shas))}")
    return 0 if len(shas) == 1 else 1


if __name__ == "__main__":
    if not os.environ.get("SWE_RL_REAL_INPUTS"):
        print("bench/instance_build.py: SWE_RL_REAL_INPUTS is not set (real SWE-bench inputs): skipped")
        sys.exit(0)
    args = sys.argv[1:]
    sys.exit(main(Path(os.environ["SWE_RL_REAL_INPUTS"]), args[0] if args else "django__django-16631",
                  int(args[1]) if len(args) > 1 else 2))  # fmt: skip
