"""Helpers for the OpenRLHF backend tests: upstream source location, upstream's own CLI parser (extracted from
`openrlhf/cli/train_ppo_ray.py` by AST, since that module imports vLLM), and real Experience batches."""

from __future__ import annotations

import argparse
import ast
import importlib.util
import os
import pickle
import signal
import subprocess
import sys
from datetime import datetime
from pathlib import Path

import pytest

OPENRLHF_VERSION = "0.11.2"
HERE = Path(__file__).resolve().parent


def _openrlhf_root() -> Path | None:
    spec = importlib.util.find_spec("openrlhf")
    if spec is None or not spec.submodule_search_locations:
        return None
    return Path(next(iter(spec.submodule_search_locations)))


@pytest.fixture(scope="session")
def orl_root() -> Path:
    root = _openrlhf_root()
    if root is None:
        msg = f"openrlhf=={OPENRLHF_VERSION} is not installed (make setup installs it with --no-deps)"
        if os.environ.get("CI"):
            pytest.fail(msg)
        pytest.skip(msg)
    from importlib.metadata import version

    assert version("openrlhf") == OPENRLHF_VERSION, (
        f"openrlhf {version('openrlhf')} installed, the adapter is written against {OPENRLHF_VERSION}"
    )
    return root


def orl_ast(root: Path, rel: str) -> ast.Module:
    path = root / rel
    assert path.is_file(), f"upstream file moved: openrlhf/{rel} no longer exists"
    return ast.parse(path.read_text())


class UpstreamSource:
    """Read-only AST access to the installed openrlhf package."""

    def __init__(self, root: Path):
        self.root = root

    def tree(self, rel: str) -> ast.Module:
        return orl_ast(self.root, rel)

    def find_def(self, rel: str, cls: str | None, name: str) -> ast.FunctionDef | ast.AsyncFunctionDef:
        tree = self.tree(rel)
        scope: ast.AST = tree
        where = f"openrlhf/{rel}: {cls + '.' if cls else ''}{name}"
        if cls is not None:
            found = [n for n in ast.walk(tree) if isinstance(n, ast.ClassDef) and n.name == cls]
            assert found, f"upstream moved: class {cls} is gone from openrlhf/{rel} (looking for {where})"
            scope = found[0]
        for node in ast.iter_child_nodes(scope):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef) and node.name == name:
                return node
        raise AssertionError(f"upstream moved: {where} no longer exists")

    @staticmethod
    def arg_names(fn: ast.FunctionDef | ast.AsyncFunctionDef) -> list[str]:
        a = fn.args
        return [x.arg for x in (*a.posonlyargs, *a.args, *a.kwonlyargs)]


@pytest.fixture(scope="session")
def orl_src(orl_root) -> UpstreamSource:
    return UpstreamSource(orl_root)


class _ParserDone(Exception):
    pass


@pytest.fixture(scope="session")
def orl_parse(orl_root):
    """upstream_parse(argv) -> hierarchized args, running upstream's parser and its validation block verbatim
    (everything under `if __name__ == "__main__":` before `train(args)`)."""
    tree = orl_ast(orl_root, "cli/train_ppo_ray.py")
    mains = [
        n
        for n in tree.body
        if isinstance(n, ast.If)
        and isinstance(n.test, ast.Compare)
        and ast.unparse(n.test) == "__name__ == '__main__'"
    ]
    assert mains, "upstream moved: train_ppo_ray.py has no `if __name__ == '__main__':` parser block"
    body = [s for s in mains[0].body if ast.unparse(s) != "train(args)" and "use_ms" not in ast.unparse(s)]
    code = compile(ast.Module(body=body, type_ignores=[]), "train_ppo_ray.py:__main__", "exec")

    def parse(argv: list[str]):
        class _Parser(argparse.ArgumentParser):
            def parse_args(self, args=None, namespace=None):  # upstream calls parse_args() on sys.argv
                return super().parse_args(argv, namespace)

            def error(self, message):
                raise ValueError(f"upstream argparse rejected our flags: {message}")

        ns = {"argparse": _ArgparseShim(_Parser), "os": os, "datetime": datetime}
        exec(code, ns)
        return ns["args"]

    return parse


class _ArgparseShim:
    """`argparse` as seen by the upstream block: the same module except ArgumentParser, which parses our argv."""

    def __init__(self, parser_cls):
        self.ArgumentParser = parser_cls

    def __getattr__(self, name):
        return getattr(argparse, name)


@pytest.fixture
def orl_experience():
    """Factory for real OpenRLHF Experience objects (see `make_experience`)."""
    pytest.importorskip("openrlhf.trainer.ppo_utils.experience")
    return make_experience


def make_experience(seqs_mask: list[list[int]], index: list[int], rewards: list[float], **info):
    """A real OpenRLHF Experience for rows whose action masks are given (0/1 lists of equal length A)."""
    import torch
    from openrlhf.trainer.ppo_utils.experience import Experience

    mask = torch.tensor(seqs_mask, dtype=torch.bool)  # (B, A)
    b, a = mask.shape
    return Experience(
        sequences=torch.ones(b, a + 1, dtype=torch.long),
        attention_mask=torch.ones(b, a + 1, dtype=torch.long),
        action_mask=mask,
        action_log_probs=torch.zeros(b, a),
        rewards=torch.tensor(rewards, dtype=torch.float32),
        index=list(index),
        info={k: torch.tensor(v, dtype=torch.float32) for k, v in info.items()},
    )


@pytest.fixture(scope="session")
def orl_process_response(orl_src):
    """Upstream's `SamplesGenerator._process_response_into_experience`, run verbatim (its module imports vLLM):
    process(response, max_len) -> Experience, exactly as OpenRLHF turns an executor response into a sample."""
    import torch
    from openrlhf.trainer.ppo_utils.experience import Experience

    fn = orl_src.find_def(
        "trainer/ppo_utils/samples_generator.py", "SamplesGenerator", "_process_response_into_experience"
    )
    ns = {"torch": torch, "Experience": Experience}
    exec(compile(ast.Module(body=[fn], type_ignores=[]), "samples_generator.py", "exec"), ns)
    method = ns["_process_response_into_experience"]

    def process(response, max_len: int):
        return method(None, response, max_len=max_len)

    return process


@pytest.fixture(scope="session")
def orl_micro_task():
    """A micro-suite task whose Docker image exists (built from the suite's Dockerfile when missing)."""
    from swe_rl.images.task_images import build_task_images, image_exists
    from swe_rl.tasks.loaders import MICRO_SUITE, load_tasks

    task = load_tasks("micro")[0]
    if not image_exists(task.image):
        res = build_task_images(MICRO_SUITE, [task.instance_id])
        assert res[0].status in ("built", "present"), res
    return task


@pytest.fixture(scope="session")
def orl_actor_cls(orl_src):
    """Upstream's `openrlhf.models.actor.Actor` class, defined verbatim from its source (the module imports
    flash-attn, DeepSpeed and peft at top level), with the helpers its forward calls (also verbatim)."""
    from typing import Optional

    import torch
    import torch.distributed as dist
    import torch.nn as nn
    import torch.nn.functional as F

    ns = {"torch": torch, "nn": nn, "F": F, "dist": dist, "Optional": Optional, "__name__": "upstream_actor"}
    helpers = [
        orl_src.find_def("models/utils.py", None, name)
        for name in ("compute_entropy", "log_probs_from_logits", "_logsumexp_by_chunk")
    ]
    actor = [
        n for n in orl_src.tree("models/actor.py").body if isinstance(n, ast.ClassDef) and n.name == "Actor"
    ]
    assert actor, "upstream moved: class Actor is gone from openrlhf/models/actor.py"
    exec(compile(ast.Module(body=[*helpers, *actor], type_ignores=[]), "openrlhf/models", "exec"), ns)
    return ns["Actor"]


@pytest.fixture(scope="session")
def orl_estimator(orl_src):
    """upstream(args) -> an object whose `compute_advantages_and_returns(experiences)` is RemoteExperienceMaker's,
    verbatim from its source with the helpers it calls (its module imports vLLM/DeepSpeed here): `self` carries
    what the method reads (strategy.args, kl_ctl, advantage_estimator)."""
    import itertools
    import logging
    import types
    from typing import List, Optional, Tuple, Union  # noqa: UP035 (upstream's annotations)

    import torch
    from openrlhf.trainer.ppo_utils.experience import Experience
    from openrlhf.trainer.ppo_utils.kl_controller import FixedKLController
    from openrlhf.trainer.ppo_utils.length_penalty import apply_length_penalties

    em = "trainer/ppo_utils/experience_maker.py"
    methods = [
        orl_src.find_def(em, "RemoteExperienceMaker", name)
        for name in ("compute_advantages_and_returns", "get_advantages_and_returns", "get_cumulative_returns")
    ]
    ns = {
        "torch": torch, "itertools": itertools, "List": List, "Tuple": Tuple, "Union": Union,  # noqa: UP006
        "Optional": Optional, "Experience": Experience,
        "apply_length_penalties": apply_length_penalties, "logger": logging.getLogger("upstream"),
    }  # fmt: skip
    helper = orl_src.find_def("models/utils.py", None, "compute_reward")
    cls = ast.ClassDef(name="UpstreamEstimator", bases=[], keywords=[], body=methods, decorator_list=[])
    exec(compile(ast.fix_missing_locations(ast.Module(body=[helper, cls], type_ignores=[])), em, "exec"), ns)

    def upstream(args):
        obj = ns["UpstreamEstimator"]()
        obj.strategy = types.SimpleNamespace(args=args)
        obj.kl_ctl = FixedKLController(args.algo.kl.init_coef)
        obj.advantage_estimator = args.algo.advantage.estimator
        return obj

    return upstream


@pytest.fixture(scope="session")
def orl_run_actors():
    """run(case, job, tmp_path) -> the pickled result of real_actors_main.py CASE (OpenRLHF's real Ray actors)."""
    return run_real_actors


def run_real_actors(case: str, job: dict, tmp_path: Path) -> dict:
    if importlib.util.find_spec("deepspeed") is None:
        msg = "make setup installs DeepSpeed (CPU accelerator) for OpenRLHF's trainer modules"
        pytest.fail(msg) if os.environ.get("CI") else pytest.skip(msg)  # CI installs it: never skip there
    job_path, out_path = tmp_path / "job.pkl", tmp_path / "out.pkl"
    job_path.write_bytes(pickle.dumps({k: v for k, v in job.items() if k != "model"}))
    # the flash-attn fake, the repo, and this folder (the CPU_FOR_CUDA shim the actors import by name)
    path = [str(HERE / "cuda_fakes"), str(HERE.parents[1]), str(HERE)]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(path)}
    env.setdefault("TORCH_EXTENSIONS_DIR", str(Path.home() / ".cache" / "torch_extensions"))
    # the raylet waits this long for its metrics agent (30 s by default): on 2 shared cores at a load average
    # of ~25 the agent takes longer, and the raylet aborts ("Timed out waiting for file .../metrics_agent_port")
    env.setdefault("RAY_raylet_start_wait_time_s", "240")
    # its own process group, stopped before pytest-timeout's 600 s, so a slow or stuck run fails with the
    # subprocess's own output (Ray's start-up, where it waits) and leaves no raylet behind
    proc = subprocess.Popen(
        [sys.executable, str(HERE / "real_actors_main.py"), case, str(job_path), str(out_path)],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env, cwd=HERE.parents[1],
        start_new_session=True,
    )  # fmt: skip
    try:
        stdout, stderr = proc.communicate(timeout=540)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        stdout, stderr = proc.communicate()
        pytest.fail(f"real_actors_main.py {case} ran over 540 s:\n{stdout[-3000:]}\n{stderr[-6000:]}")
    assert proc.returncode == 0, stdout[-3000:] + stderr[-6000:]
    return pickle.loads(out_path.read_bytes())
