"""The warm pool with real containers: ready hand-outs, background refill, drain, TTL, and verified reuse."""

from __future__ import annotations

import asyncio
import contextlib
import os
from collections.abc import AsyncIterator

import pytest

from sandboxes.lifecycle import list_managed
from sandboxes.pool import WarmPool

pytestmark = pytest.mark.docker

# What a first episode leaves behind everywhere a second one could look: the repo (a commit, an untracked file,
# a stash), files outside it (a new file, an edited and a deleted system file, a deleted and a replaced directory,
# changed modes), the writable mounts (/dev, /dev/shm), a SysV shared-memory segment, a process that escaped with
# setsid, and the shell's cwd and exported environment.
_FIRST_EPISODE = """
set -e
mkdir -p /work/repo && cd /work/repo && git init -q && echo base > f && git add f && git commit -qm base
echo fix > f && git commit -qam 'the fix' && echo wip > f && git stash -q && echo untracked > u
echo secret > /root/answer; echo 'eve:x:0:0::/root:/bin/bash' >> /etc/passwd; rm /etc/motd; chmod 700 /opt
rm -rf /usr/share/doc/bash; rm -rf /var/lib/apt && mkdir -p /var/lib/apt/x; chmod 4755 /usr/bin/env
touch /dev/leftover /dev/shm/leftover; ipcmk -M 4096 >/dev/null
setsid sleep 3000 > /dev/null 2>&1 &
cd /tmp && export EPISODE_SECRET=42
echo done
"""
_SECOND_LOOKS = """
echo "cwd=$PWD secret=${EPISODE_SECRET-unset}"
ls -A /work /root /tmp /dev/shm; ls /dev/leftover 2>&1 | head -1
grep -c eve /etc/passwd; test -f /etc/motd && echo motd-back; stat -c %a /opt /usr/bin/env
ls -R /usr/share/doc/bash /var/lib/apt | md5sum
ipcs -m | grep -c 0x || true
ps -eo args= | grep -cx 'sleep 3000' || true  # whole lines: never grep's own
"""


@contextlib.asynccontextmanager
async def _pool(sbx_cfg, client, name: str, **warm) -> AsyncIterator[WarmPool]:
    """A pool of this test's own; closing it must leave none of its containers (idle, used or reference)."""
    run_id = f"pool-{name}-{os.getpid()}"
    pool = WarmPool(sbx_cfg(warm_pool={"size": 1} | warm), run_id=run_id)
    try:
        yield pool
    finally:
        await pool.close()
    assert list_managed(client, run_id=run_id) == []


async def test_pool_hands_out_started_sandboxes_refills_and_drains(sbx_cfg, sbx_docker_client):
    async with _pool(sbx_cfg, sbx_docker_client, "basic", size=2) as pool:
        await pool.warm([pool.config.image])
        assert pool.idle() == 2
        first = pool.sandbox()
        async with first, pool.sandbox() as second:
            assert pool.stats["hits"] == 2 and pool.stats["misses"] == 0
            assert first.id != second.id
            assert (await first.exec("echo ready")).output == "ready\n"
            await pool.warm([pool.config.image])  # refilled in the background meanwhile
            assert pool.idle() == 2
        used = {first.id, second.id}
        live = {c.id for c in list_managed(sbx_docker_client, run_id=pool.run_id)}
        assert len(live) == 2 and not used & live  # the used ones are gone (reuse is off), two idle remain


async def test_an_idle_sandbox_past_its_idle_time_is_replaced(sbx_cfg, sbx_docker_client):
    async with _pool(sbx_cfg, sbx_docker_client, "stale", max_idle=1.0) as pool:
        await pool.warm([pool.config.image])
        await asyncio.sleep(1.5)  # less than `ttl` is left now: handing it out could expire mid-episode
        async with pool.sandbox() as sb:
            assert pool.stats == pool.stats | {"stale": 1, "hits": 0, "misses": 1}
            assert (await sb.exec("echo fresh")).output == "fresh\n"


async def test_reused_sandbox_shows_nothing_of_the_first_episode(sbx_cfg, sbx_docker_client):
    async with _pool(sbx_cfg, sbx_docker_client, "reuse", reuse=True) as pool:
        await pool.warm([pool.config.image])
        async with pool.sandbox() as sb:
            first_id = sb.id
            fresh = (await sb.exec(_SECOND_LOOKS)).output
            r = await sb.exec(_FIRST_EPISODE)
            assert r.exit_code == 0 and r.output.endswith("done\n"), r.output
        assert pool.stats["reused"] == 1, pool.stats
        async with pool.sandbox() as sb:
            assert sb.id == first_id  # the same container, restored
            assert (await sb.exec(_SECOND_LOOKS)).output == fresh
            git = await sb.exec(
                "git -C /work/repo log --all --oneline 2>&1; git fsck --lost-found 2>&1 | head -1"
            )
            assert "fix" not in git.output and "base" not in git.output
            # /etc/hosts is a bind mount, outside the container layer: the restore does not rewrite it, so this
            # sandbox must not be handed out again
            await sb.exec("echo '10.0.0.1 pypi.org' >> /etc/hosts")
        assert pool.stats["not_restored"] == 1 and pool.stats["reused"] == 1, pool.stats
        async with pool.sandbox() as sb:
            assert sb.id != first_id
            assert "pypi" not in (await sb.exec("cat /etc/hosts")).output
