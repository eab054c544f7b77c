"""The `sandboxes` CLI against the real engine (typer's runner, in process)."""

from __future__ import annotations

import os

import pytest
from typer.testing import CliRunner

from sandboxes.cli import app

pytestmark = pytest.mark.docker


def test_run_passes_output_and_exit_code(sbx_cfg):
    runner = CliRunner()
    res = runner.invoke(app, ["run", sbx_cfg().image, "--memory", "128m", "--", "ls /sys/class/net; exit 3"])
    assert res.exit_code == 3 and res.stdout == "lo\n"
    res = runner.invoke(app, ["run", sbx_cfg().image, "--timeout", "1", "--", "sleep", "30"])
    assert res.exit_code == 124
    res = runner.invoke(app, ["run", sbx_cfg().image, "-e", "A=1 2", "--", 'echo "$A"'])
    assert res.exit_code == 0 and res.stdout == "1 2\n"
    res = runner.invoke(app, ["run", sbx_cfg().image])
    assert res.exit_code == 2 and "no command given" in res.output


def test_build_has_no_network_and_ls_reap_are_scoped(sbx_cfg, sbx_docker_client, tmp_path):
    tag = f"sbx-pytest/derived:{os.getpid()}"
    (tmp_path / "Dockerfile").write_text(f"FROM {sbx_cfg().image}\nRUN ls /sys/class/net > /nets\n")
    (tmp_path / "payload.txt").write_text("from the context\n")
    (tmp_path / "alt.Dockerfile").write_text(f"FROM {sbx_cfg().image}\nCOPY payload.txt /payload.txt\n")
    runner = CliRunner()
    try:
        res = runner.invoke(app, ["build", str(tmp_path), "--tag", tag])
        assert res.exit_code == 0, res.output
        res = runner.invoke(app, ["run", tag, "--", "cat /nets"])
        assert res.stdout == "lo\n"  # the build step saw only loopback
        res = runner.invoke(
            app, ["build", str(tmp_path / "alt.Dockerfile"), "--tag", tag]
        )  # a file: -f semantics
        assert res.exit_code == 0, res.output
        assert runner.invoke(app, ["run", tag, "--", "cat /payload.txt"]).stdout == "from the context\n"
    finally:
        sbx_docker_client.api.remove_image(tag, force=True)
    res = runner.invoke(app, ["build", str(tmp_path / "nope"), "--tag", tag])
    assert res.exit_code == 1 and "nope" in res.output
    res = runner.invoke(app, ["ls", "--run-id", f"none-{os.getpid()}"])
    assert res.exit_code == 0 and "0 sandbox container(s)" in res.stdout
    res = runner.invoke(app, ["reap", "--dry-run", "--run-id", f"none-{os.getpid()}"])
    assert res.exit_code == 0 and "0 container(s) to reap" in res.stdout
    res = runner.invoke(app, ["build-base", "--tag", sbx_cfg().image])
    assert res.exit_code == 0 and "present" in res.stdout  # idempotent: an existing base is kept


def test_a_rebuild_removes_the_image_it_replaced_unless_in_use(sbx_cfg, sbx_docker_client, tmp_path):
    """A rebuild moves the tag; the replaced image would stay behind untagged on every rebuild. It is removed, but
    not while a container still uses it."""
    api = sbx_docker_client.api
    tag = f"sbx-pytest/rebuilt:{os.getpid()}"
    runner = CliRunner()
    ids = []
    try:
        for n in range(3):
            (tmp_path / "Dockerfile").write_text(f"FROM {sbx_cfg().image}\nRUN echo {n} > /n\n")
            res = runner.invoke(app, ["build", str(tmp_path), "--tag", tag])
            assert res.exit_code == 0, res.output
            ids.append(api.inspect_image(tag)["Id"])
            if n == 1:  # a container of the second image is alive while the third is built
                holder = api.create_container(ids[1], command="true")
        assert len(set(ids)) == 3
        with pytest.raises(Exception, match="No such image"):
            api.inspect_image(ids[0])
        assert api.inspect_image(ids[1])["Id"] == ids[1]  # in use: kept
    finally:
        api.remove_container(holder, force=True)
        for i in ids[1:]:
            api.remove_image(i, force=True)


@pytest.mark.slow
def test_build_base_from_debootstrap(sbx_docker_client):
    tag = f"sbx-pytest/base:{os.getpid()}"
    try:
        res = CliRunner().invoke(app, ["build-base", "--tag", tag, "--force"])
        assert res.exit_code == 0, res.output
        cfg = sbx_docker_client.api.inspect_image(tag)["Config"]
        assert cfg["StopSignal"] == "SIGKILL"
        res = CliRunner().invoke(
            app, ["run", tag, "--", "python3 -m pytest --version && git --version && patch -v"]
        )
        assert res.exit_code == 0, res.output
    finally:
        sbx_docker_client.api.remove_image(tag, force=True)


def test_disk_floor_warns_before_build(sbx_docker_client, caplog):
    from sandboxes.images import check_disk_floor

    with caplog.at_level("WARNING", logger="sandboxes.images"):
        free = check_disk_floor(sbx_docker_client, 10**6, "building x")  # a floor no disk meets
        assert free is not None
        assert "floor 1000000.0 GB" in caplog.text and "before building x" in caplog.text
        caplog.clear()
        check_disk_floor(sbx_docker_client, 0, "building y")
        assert caplog.text == ""


async def test_bench_runs_small(sbx_cfg):
    from sandboxes.bench import report, run_bench

    result = await run_bench(sbx_cfg().image, starts=1, trips=8, concurrent=2, loops=3)
    assert result.failures == 0 and result.commands == 6
    text = report(result)
    assert "ratio shell/exec_run" in text and "bare engine create+start" in text
