"""`pip install -e .[gpu]` must resolve on a GPU machine: our core ranges vs openrlhf 0.11.2's exact pins.

A resolver dry run (uv pip compile against PyPI) of our package plus openrlhf's own requirements, read from the
installed wheel's metadata, and vllm==0.29.0 (its `vllm` extra). flash-attn is left out: it ships only as a source
distribution whose build needs CUDA, so no resolver can read its metadata here (see README).
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from importlib.metadata import requires
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def _openrlhf_requirements() -> list[str]:
    reqs = []
    for r in requires("openrlhf") or []:
        name = re.split(r"[ ;<>=!~\[]", r, maxsplit=1)[0].lower()
        if name == "flash-attn" or ("extra ==" in r and 'extra == "vllm"' not in r):
            continue
        reqs.append(r.split(";")[0].strip())
    return reqs


def test_gpu_extra_resolves_against_openrlhf_pins(tmp_path):
    venv_uv = Path(sys.executable).parent / "uv"
    uv = str(venv_uv) if venv_uv.exists() else shutil.which("uv")
    if uv is None:
        if os.environ.get("CI"):
            pytest.fail("uv is not on PATH (make setup installs it)")
        pytest.skip("uv not installed")
    reqs = _openrlhf_requirements()
    assert any(r.startswith("vllm==") for r in reqs), f"openrlhf's vllm extra moved: {reqs}"
    src = tmp_path / "gpu.in"
    src.write_text("\n".join([f"-e {ROOT}", *reqs]) + "\n")
    out = tmp_path / "gpu.txt"
    proc = subprocess.run(
        [uv, "pip", "compile", str(src), "--python-version", "3.11", "--python-platform",
         "x86_64-manylinux_2_28", "--no-header", "-q", "-o", str(out)],
        capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert proc.returncode == 0, f"[gpu] extra does not resolve with our core ranges:\n{proc.stderr[-3000:]}"
    pins = dict(
        line.split("==", 1) for line in out.read_text().splitlines() if "==" in line and line[0] != " "
    )
    assert pins["ray"] == "2.55.0" and pins["transformers"] == "5.15.0" and pins["torch"].startswith("2.13.0")
