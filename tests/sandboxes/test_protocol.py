"""Pure protocol pieces (no Docker): output cap, end-marker scanning, frame demux, configs, import hygiene."""

from __future__ import annotations

import ast
import pathlib
import subprocess
import sys
from typing import Annotated, Literal

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic import Field, TypeAdapter

import sandboxes
from sandboxes import DockerSandboxConfig, LocalSandboxConfig, SandboxBackendConfig, make_sandbox
from sandboxes.config import parse_sandbox_config
from sandboxes.shell import MARK, FrameDemux, MarkerScanner, OutputCap, new_nonce


def _split(data: bytes, cuts: list[int]) -> list[bytes]:
    points = sorted({c % (len(data) + 1) for c in cuts})
    return [data[a:b] for a, b in zip([0, *points], [*points, len(data)], strict=True)]


@settings(max_examples=200, deadline=None)
@given(st.binary(max_size=3000), st.integers(64, 1000), st.lists(st.integers(0, 5000), max_size=8))
def test_output_cap_keeps_exact_head_and_tail(data, limit, cuts):
    cap = OutputCap(limit)
    for chunk in _split(data, cuts):
        cap.add(chunk)
    assert cap.total == len(data)
    if len(data) <= limit:
        assert bytes(cap.head + cap.tail) == data
    else:
        half = limit // 2
        assert bytes(cap.head) == data[:half] and bytes(cap.tail) == data[len(data) - (limit - half) :]
        assert f"[... {len(data) - limit} bytes of output cut" in cap.text()


@settings(max_examples=200, deadline=None)
@given(
    st.binary(max_size=2000), st.integers(0, 255), st.lists(st.integers(0, 3000), max_size=10), st.booleans()
)
def test_marker_scanner_recovers_output_and_code(output, code, cuts, decoy):
    nonce = new_nonce()
    if decoy:  # output that prints a marker with another nonce, and a prefix of ours, must stay output
        output = output + MARK + new_nonce().encode() + b"_001" + MARK + nonce.encode()[:7]
    stream = output + MARK + nonce.encode() + b"_" + f"{code:03d}".encode() + b"stray"
    scanner = MarkerScanner(nonce, OutputCap(10**6))
    seen = [scanner.feed(chunk) for chunk in _split(stream, cuts)]
    assert seen[-1] and scanner.exit_code == code
    assert bytes(scanner.cap.head + scanner.cap.tail) == output
    assert scanner.after == b"stray"


@settings(max_examples=100, deadline=None)
@given(
    st.lists(st.tuples(st.sampled_from([1, 2]), st.binary(max_size=300)), max_size=10),
    st.lists(st.integers()),
)
def test_frame_demux_reassembles_frames(frames, cuts):
    wire = b"".join(bytes([s, 0, 0, 0]) + len(p).to_bytes(4, "big") + p for s, p in frames)
    demux, got = FrameDemux(), []
    for chunk in _split(wire, cuts):
        got += demux.feed(chunk)
    assert got == frames


def test_configs_validate_with_clear_errors():
    assert isinstance(parse_sandbox_config({"backend": "local"}), LocalSandboxConfig)
    cfg = parse_sandbox_config({"backend": "docker", "limits": {"memory": "1g"}})
    assert isinstance(cfg, DockerSandboxConfig) and cfg.limits.memory == "1g" and cfg.limits.network == "none"
    with pytest.raises(ValueError, match=r"docker\.limits\.memroy: Extra inputs are not permitted"):
        parse_sandbox_config({"backend": "docker", "limits": {"memroy": "1g"}})
    with pytest.raises(ValueError, match="backend must be one of: docker, local"):
        parse_sandbox_config({"backend": "kubernetes"})
    with pytest.raises(ValueError, match="exec_timeout"):
        parse_sandbox_config({"backend": "local", "exec_timeout": -1})
    assert type(make_sandbox()).__name__ == "DockerSandbox"  # default backend; nothing started


class _EchoConfig(SandboxBackendConfig):
    """A third backend defined outside the package: the extension path another backend (Ray, k8s) follows."""

    backend: Literal["echo"] = "echo"
    greeting: str = "hello"

    def build(self, *, image=None, copy_from=None, run_id=None, labels=None):
        from sandboxes.local import LocalSandbox

        return LocalSandbox(LocalSandboxConfig(env={"GREETING": self.greeting}))


async def test_a_new_backend_is_one_more_union_member():
    Wider = Annotated[DockerSandboxConfig | LocalSandboxConfig | _EchoConfig, Field(discriminator="backend")]
    cfg = TypeAdapter(Wider).validate_python({"backend": "echo", "greeting": "hi"})
    async with make_sandbox(cfg) as sb:
        assert (await sb.exec("echo $GREETING")).output == "hi\n"


def _imported(nodes) -> set[str]:
    names: list[str] = []
    for node in nodes:
        names += [a.name for a in node.names] if isinstance(node, ast.Import) else []
        names += [node.module] if isinstance(node, ast.ImportFrom) and node.module else []
    return {n.split(".")[0] for n in names}


def test_package_never_imports_swe_rl_torch_or_ray():
    """swe_rl and torch: nowhere. ray: only lazily inside a function (an optional Ray backend may start it)."""
    root = pathlib.Path(sandboxes.__file__).parent
    for path in root.rglob("*.py"):
        tree = ast.parse(path.read_text())
        assert not _imported(ast.walk(tree)) & {"swe_rl", "torch"}, path
        functions = [n for n in ast.walk(tree) if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))]
        lazy = {id(x) for f in functions for x in ast.walk(f)}
        assert "ray" not in _imported(n for n in ast.walk(tree) if id(n) not in lazy), (
            f"{path}: top-level ray import"
        )
    mods = [
        f"sandboxes.{p.relative_to(root).with_suffix('').as_posix().replace('/', '.')}"
        for p in root.rglob("*.py")
    ]
    code = (
        "import sys\n"
        + "".join(f"import {m.removesuffix('.__init__')}\n" for m in mods)
        + "print(*sys.modules)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert not {m.split(".")[0] for m in out.split()} & {"swe_rl", "torch", "ray"}


def test_image_references_name_their_registry_and_tag():
    from sandboxes.images import registry_of, split_reference

    assert registry_of("swebench/sweb.eval.x86_64.django_1776_django-11099:latest") == (
        "registry-1.docker.io",
        443,
    )
    assert registry_of("ghcr.io/org/img:1") == ("ghcr.io", 443)
    assert registry_of("localhost:5000/img") == ("localhost", 5000)
    assert registry_of("ubuntu") == ("registry-1.docker.io", 443)
    assert split_reference("localhost:5000/img") == ("localhost:5000/img", "latest")
    assert split_reference("a/b:v2") == ("a/b", "v2")
    assert split_reference("a/b@sha256:" + "0" * 64) == ("a/b@sha256:" + "0" * 64, None)
