"""Upstream contract: what the adapter relies on in openrlhf 0.11.2, read from its installed source by AST where
importing is impossible on CPU. A failure names what moved."""

from __future__ import annotations

import ast
import dataclasses
from pathlib import Path

import pytest
import yaml

from swe_rl.config import load_config
from swe_rl.train.openrlhf.config import OpenRLHFTrainConfig
from swe_rl.train.openrlhf.flags import flag_names, to_argv

RECIPES = sorted(  # every OpenRLHF recipe (the built-in trainer's YAMLs there have no `cluster` section)
    str(p) for p in Path("configs/train").glob("*.yaml") if "cluster" in (yaml.safe_load(p.read_text()) or {})
)
assert len(RECIPES) >= 5, RECIPES  # 7B and 32B AEM, their async variants, the 32B baseline


EM = "trainer/ppo_utils/experience_maker.py"


def test_wrapped_method_name_and_signature(orl_src):
    fn = orl_src.find_def(EM, "RemoteExperienceMaker", "compute_advantages_and_returns")
    names = orl_src.arg_names(fn)
    assert names == ["self", "experiences"], f"compute_advantages_and_returns signature changed: {names}"
    src = ast.unparse(fn)
    for needle in ("args.rollout.n_samples_per_prompt", "experience.index", "experience.advantages"):
        assert needle in src, (
            f"compute_advantages_and_returns no longer uses {needle} (group mapping assumption)"
        )
    caller = ast.unparse(orl_src.find_def(EM, "RemoteExperienceMaker", "make_experience_batch"))
    assert "self.compute_advantages_and_returns(experiences)" in caller, (
        "advantages are no longer computed there"
    )


def test_experience_fields_we_use(orl_root):
    from openrlhf.trainer.ppo_utils.experience import Experience

    names = {f.name for f in dataclasses.fields(Experience)}
    used = {
        "action_mask",
        "action_log_probs",
        "advantages",
        "rewards",
        "index",
        "info",
        "truncated",
        "sequences",
    }
    assert used <= names, f"Experience lost fields: {sorted(used - names)}"


def test_policy_forward_and_entropy_path(orl_src):
    fwd = orl_src.find_def("trainer/ray/ppo_actor.py", "PolicyModelActor", "forward")
    expected = [
        "self",
        "sequences",
        "action_mask",
        "attention_mask",
        "packed_seq_lens",
        "mm_train_inputs_list",
    ]
    names = orl_src.arg_names(fwd)
    assert names == expected, (
        f"PolicyModelActor.forward (overridden for exact entropy) signature changed: {names}"
    )
    afwd = orl_src.find_def("models/actor.py", "Actor", "forward")
    for arg in ("return_entropy", "return_output", "ring_attn_group"):
        assert arg in orl_src.arg_names(afwd), f"Actor.forward lost its `{arg}` argument"
    src = ast.unparse(afwd)
    assert "compute_entropy(output['logits'])" in src, "Actor.forward no longer calls compute_entropy(logits)"
    assert "setattr(output, 'entropy', entropy[:, :-1])" in src, "Actor.forward stores entropy differently"
    imports = [
        n
        for n in orl_src.tree("models/actor.py").body
        if isinstance(n, ast.ImportFrom) and n.module == "utils"
    ]
    assert any(a.name == "compute_entropy" for n in imports for a in n.names), (
        "models/actor.py no longer imports compute_entropy by name (our chunked swap targets that name)"
    )


def _imports_in(node: ast.AST) -> set[tuple[str, str]]:
    return {(n.module, a.name) for n in ast.walk(node) if isinstance(n, ast.ImportFrom) for a in n.names}


def test_names_our_classes_replace_are_looked_up_where_we_put_them(orl_src):
    """actors.REPLACEMENTS: where train_ppo_ray and PPOTrainerAsync find the classes we substitute."""
    cli = orl_src.tree("cli/train_ppo_ray.py")
    top = {(n.module, a.name) for n in cli.body if isinstance(n, ast.ImportFrom) for a in n.names}
    assert ("openrlhf.trainer.ray.ppo_actor", "PolicyModelActor") in top, (
        "train_ppo_ray no longer imports PolicyModelActor by name at module import"
    )
    train = _imports_in(orl_src.find_def("cli/train_ppo_ray.py", None, "train"))
    assert ("openrlhf.trainer.ppo_trainer", "PPOTrainer") in train, "train() imports PPOTrainer elsewhere"
    assert ("openrlhf.trainer.ppo_trainer_async", "PPOTrainerAsync") in train, "PPOTrainerAsync moved"
    init = ast.unparse(orl_src.find_def("trainer/ppo_trainer_async.py", "PPOTrainerAsync", "__init__"))
    for name in ("GenerateSamplesActor.remote(", "TrainingActor.remote("):
        assert name in init, f"PPOTrainerAsync.__init__ no longer creates {name[:-8]} from its module globals"
    policy = ast.unparse(orl_src.find_def("cli/train_ppo_ray.py", None, "train"))
    assert "RayActorGroup(args.actor.num_nodes, args.actor.num_gpus_per_node, PolicyModelActor" in policy


def test_parts_our_trainers_replace(orl_src):
    """use_swe_rl_parts rebuilds the maker / samples generator from the attributes upstream's ctors store."""
    base = ast.unparse(orl_src.find_def("trainer/ppo_trainer.py", "BasePPOTrainer", "__init__"))
    assert (
        "self.experience_maker = RemoteExperienceMaker(self.actor_model_group, self.critic_model_group, "
        "self.reward_model_group, self.reference_model_group, self.kl_ctl, self.strategy, tokenizer)"
    ) in base, "BasePPOTrainer builds its experience maker differently"
    em = orl_src.find_def(EM, "RemoteExperienceMaker", "__init__")
    assert orl_src.arg_names(em)[:8] == [
        "self", "actor_model_group", "critic_model_group", "reward_model_group", "initial_model_group",
        "kl_controller", "strategy", "tokenizer",
    ]  # fmt: skip
    src = ast.unparse(em)
    for attr in ("initial_model_group", "kl_ctl", "tokenizer"):
        assert f"self.{attr} = " in src, f"RemoteExperienceMaker no longer stores self.{attr}"
    for rel, cls in (
        ("trainer/ppo_trainer.py", "PPOTrainer"),
        ("trainer/ppo_trainer_async.py", "GenerateSamplesActor"),
    ):
        init = ast.unparse(orl_src.find_def(rel, cls, "__init__"))
        assert "self.samples_generator = SamplesGenerator(strategy=strategy" in init, (
            f"{cls}: samples generator"
        )
    sg = orl_src.find_def("trainer/ppo_utils/samples_generator.py", "SamplesGenerator", "__init__")
    assert orl_src.arg_names(sg) == [
        "self",
        "strategy",
        "prompts_dataloader",
        "eval_dataloader",
        "tokenizer",
        "vllm_engines",
    ]


def test_where_our_maker_and_generator_hook_in(orl_src):
    """The upstream lines SweRlExperienceMaker / SweRlSamplesGenerator and valid_groups rely on."""
    make = ast.unparse(orl_src.find_def(EM, "RemoteExperienceMaker", "make_experience"))
    assert "action_log_probs_list = self._flatten_results(action_log_probs_ref, duplicate_factor)" in make
    assert "samples.action_log_probs = action_log_probs" in make
    assert "method_name='forward'" in ast.unparse(
        orl_src.find_def(EM, "RemoteExperienceMaker", "_dispatch_forward")
    )
    adv = ast.unparse(orl_src.find_def(EM, "RemoteExperienceMaker", "compute_advantages_and_returns"))
    assert (
        "args = self.strategy.args" in adv and "rewards.reshape(-1, args.rollout.n_samples_per_prompt)" in adv
    )
    gen = ast.unparse(
        orl_src.find_def("trainer/ppo_utils/samples_generator.py", "SamplesGenerator", "_generate_vllm")
    )
    assert "self._dispatch_prompts_to_vllm(" in gen and "for response in ray.get(ref)" in gen
    assert "scores = [e.scores[0].item() for e in experiences]" in gen, (
        "the dynamic filter reads scores differently"
    )
    assert "if not min_r < avg_reward < max_r:" in gen, "the dynamic filter's range test changed"
    batch = ast.unparse(orl_src.find_def("trainer/ray/launcher.py", "BaseModelActor", "execute_batch"))
    assert "func = getattr(self, method_name)" in batch


def test_agent_executor_api(orl_root):
    import inspect

    from openrlhf.utils.agent import AgentInstanceBase, MultiTurnAgentExecutor

    params = list(inspect.signature(MultiTurnAgentExecutor.execute).parameters)
    assert params == [
        "self",
        "prompt",
        "label",
        "sampling_params",
        "max_length",
        "hf_tokenizer",
        "llm_engine",
        "images",
    ]
    assert list(inspect.signature(MultiTurnAgentExecutor.__init__).parameters) == [
        "self",
        "agent_instance_cls",
    ]
    assert inspect.iscoroutinefunction(AgentInstanceBase.step) and inspect.iscoroutinefunction(
        AgentInstanceBase.reset
    )


def test_ray_init_skipped_when_initialized(orl_src):
    src = ast.unparse(orl_src.find_def("cli/train_ppo_ray.py", None, "train"))
    assert "if not ray.is_initialized():" in src, (
        "train() may now call ray.init itself: our runtime env would be lost"
    )


def test_response_fields_for_sample_processing(orl_src):
    fn = orl_src.find_def(
        "trainer/ppo_utils/samples_generator.py", "SamplesGenerator", "_process_response_into_experience"
    )
    src = ast.unparse(fn)
    for key in (
        "observation_tokens",
        "action_ranges",
        "rollout_log_probs",
        "reward",
        "scores",
        "extra_logs",
        "truncated",
    ):
        assert f"'{key}'" in src, f"sample processing no longer reads response[{key!r}]"


@pytest.mark.parametrize("recipe", RECIPES)
def test_recipe_flags_parse_with_upstream_parser(recipe, orl_parse):
    cfg = load_config(OpenRLHFTrainConfig, files=[recipe])
    argv = to_argv(cfg, "/opt/swe_rl/agent_func.py")
    args = orl_parse(argv)  # upstream parser + its validation asserts, verbatim
    assert args.actor.model_name_or_path == cfg.model.path
    assert args.algo.advantage.estimator == cfg.optim.estimator
    assert args.rollout.n_samples_per_prompt == cfg.rollout.samples_per_prompt
    assert args.train.agent_func_path == "/opt/swe_rl/agent_func.py"
    assert args.algo.kl.init_coef == cfg.optim.kl_coef
    assert tuple(args.actor.eps_clip_low_high) == (cfg.optim.clip_low, cfg.optim.clip_high)
    assert args.reward.remote_url == ["agent"]  # upstream's marker for the agent executor path
    assert len(flag_names(argv)) == len(set(flag_names(argv))), "a flag is emitted twice"


def test_unknown_flag_is_rejected_by_upstream_parser(orl_parse):
    with pytest.raises(ValueError, match=r"unrecognized arguments: --actor\.no_such_flag"):
        orl_parse(["--actor.model_name_or_path", "m", "--actor.no_such_flag", "1"])
