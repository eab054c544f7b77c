"""`EvalConfig`: what `swe-rl eval` runs — dataset, policy, agent, sandboxes, k runs, pool, grader."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field, model_validator

from swe_rl.agent.config import AgentConfig
from swe_rl.config import StrictModel
from swe_rl.rollout.config import PoolConfig
from swe_rl.rollout.policies import PolicySpec, ScriptedPolicySpec


class DatasetConfig(StrictModel):
    source: str = (
        "micro"  # "micro" (bundled suite), an HF dataset name, a .json/.jsonl/.parquet file, or a task repo
    )
    split: str = "test"  # HF split (ignored by local files and task repos)
    instances: list[str] = Field(
        default_factory=list
    )  # instance ids or fnmatch patterns to keep; empty = all
    limit: int | None = Field(None, ge=1)  # keep the first N instances (after the filter, sorted by id)


class EvalConfig(StrictModel):
    name: str = "eval"  # run directory name under output_dir; rerunning the same name resumes
    output_dir: str = "runs"  # parent of run directories
    model_name: str = "swe-rl"  # model_name_or_path written into SWE-bench predictions
    dataset: DatasetConfig = Field(
        default_factory=lambda: DatasetConfig.model_validate({})
    )  # which instances
    policy: PolicySpec = Field(default_factory=ScriptedPolicySpec)  # who acts (served, local, or scripted)
    agent: AgentConfig = Field(
        default_factory=lambda: AgentConfig.model_validate({})
    )  # agent loop limits and formats
    sandbox: dict[str, Any] = Field(
        default_factory=lambda: {"backend": "docker"}
    )  # sandboxes config (backend union)
    runs: int = Field(1, ge=1)  # k: independent runs over the dataset (Pass@1 = mean over runs; Pass@k)
    grader: Literal["ours", "official"] = (
        "ours"  # ours: swe_rl.tasks grading in the pool; official: swebench harness
    )
    grade_workers: int = Field(2, ge=1)  # parallel gradings for the official harness
    retry_errors: bool = False  # on resume, re-run episodes that ended in an infrastructure error
    pool: PoolConfig = Field(
        default_factory=lambda: PoolConfig.model_validate({})
    )  # Ray actors or local loop

    @model_validator(mode="after")
    def _one_local_episode(self) -> EvalConfig:
        p = self.pool
        in_flight = p.episodes_per_actor * (1 if p.backend == "local" else p.num_actors)
        if self.sandbox.get("backend") == "local" and in_flight != 1:
            raise ValueError(
                f"pool: {in_flight} episodes at a time (num_actors x episodes_per_actor) with sandbox.backend "
                "local; expected 1 (a local sandbox isolates nothing: every episode would work and be graded in "
                "this host's one /testbed)"
            )
        return self

    def identity(self) -> dict[str, Any]:
        """The fields whose change makes earlier episodes incomparable (resume refuses to mix them)."""
        d = self.model_dump(mode="json")
        return {k: d[k] for k in ("model_name", "dataset", "policy", "agent", "sandbox", "grader")}
