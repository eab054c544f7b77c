"""`RewardResult`: what grading hands the trainer and the evaluation harness; the `suspicious` label and the reward
policy that decides what a suspicious episode earns (`zero` / `mask` / `keep`)."""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any, Literal

# What a suspicious episode earns: `zero` reward 0 (every training recipe), `mask` reward None (left out of the
# loss like an infrastructure failure), `keep` the graded reward (evaluation: the label is reported, not acted on).
RewardPolicy = Literal["zero", "mask", "keep"]
SUSPICIOUS_FAILURE = "suspicious"  # RewardResult.failure of an episode masked by the `mask` policy


@dataclass(frozen=True)
class RewardResult:
    reward: float | None  # None = unscorable (infrastructure failure): masked out, never scored 0
    resolved: bool
    tests: dict[str, Any] = field(default_factory=dict)  # swebench-style FAIL_TO_PASS / PASS_TO_PASS report
    log: str = ""  # test output (capped)
    failure: str | None = None  # infra failure label ("image_missing", "sandbox_died", "test_timeout", ...)
    suspicious: tuple[
        str, ...
    ] = ()  # why a reward hack is suspected (tripwire, trusted check); () = nothing seen


def label_suspicious(
    result: RewardResult, patch: str | None, trusted: Iterable[str] = (), test_code: Any = None
) -> RewardResult:
    """result labelled with the static tripwire's findings on `patch` and the trusted check's `trusted` findings;
    the reasons also go to `tests["integrity"]["suspicious"]` (so every grading report carries them).
    `test_code`: the task's test code (swe_rl.integrity.tripwire.TestCode); None: test files by name."""
    from swe_rl.integrity.tripwire import scan_patch

    reasons = tuple(dict.fromkeys([*result.suspicious, *scan_patch(patch, test_code), *trusted]))
    if not reasons:
        return result
    tests = dict(result.tests)
    tests["integrity"] = {**tests.get("integrity", {}), "suspicious": list(reasons)}
    return dataclasses.replace(result, suspicious=reasons, tests=tests)


def apply_policy(result: RewardResult, policy: RewardPolicy) -> RewardResult:
    """What `policy` makes of a suspicious result (others pass unchanged); the label always stays."""
    if not result.suspicious or policy == "keep" or result.reward is None:
        return result
    if policy == "zero":
        return dataclasses.replace(result, reward=0.0)
    if policy == "mask":
        return dataclasses.replace(result, reward=None, failure=SUSPICIOUS_FAILURE)
    raise ValueError(f"reward policy: expected 'zero', 'mask' or 'keep', got {policy!r}")


def harness_touched(tests: dict[str, Any]) -> bool:
    """Whether the grader had to reset test-harness files the patch touched (swe_rl.integrity.tree)."""
    integrity = tests.get("integrity") or {}
    keys = ("harness_restored", "runner_restored", "test_files_removed")
    return any(integrity.get(k) for k in keys)


def probe_unavailable(tests: dict[str, Any]) -> bool:
    """Whether the grading's probe run could not observe anything (swe_rl.integrity.probe: no label came of it)."""
    probe = (tests.get("integrity") or {}).get("probe") or {}
    return probe.get("status") == "unavailable"


def patch_caused(tests: dict[str, Any]) -> bool:
    """Whether a timeout or a sandbox death was the patch's (swe_rl.grading.grader._patch_caused: reward 0)."""
    return bool(tests.get("patch_caused"))


def _rate(
    prefix: str, flags: list[tuple[bool, bool]], unavailable: list[bool], caused: list[bool]
) -> dict[str, float]:
    n = len(flags)
    sus, touched, blind = sum(s for s, _ in flags), sum(t for _, t in flags), sum(unavailable)
    return {
        f"{prefix}patch_caused": float(sum(caused)),
        f"{prefix}patch_caused_frac": sum(caused) / n if n else 0.0,
        f"{prefix}suspicious": float(sus),
        f"{prefix}suspicious_frac": sus / n if n else 0.0,
        f"{prefix}harness_touched": float(touched),
        f"{prefix}harness_touched_frac": touched / n if n else 0.0,
        f"{prefix}probe_unavailable": float(blind),
        f"{prefix}probe_unavailable_frac": blind / n if n else 0.0,
    }


def integrity_metrics(results: Iterable[RewardResult | None], prefix: str = "integrity/") -> dict[str, float]:
    """Counts and fractions of suspicious, harness-touching, probe-unavailable and patch-caused (a timeout or a
    sandbox death that was the patch's) results (None: not graded)."""
    graded = [r for r in results if r is not None]
    flags = [(bool(r.suspicious), harness_touched(r.tests)) for r in graded]
    return _rate(
        prefix, flags, [probe_unavailable(r.tests) for r in graded], [patch_caused(r.tests) for r in graded]
    )


def episode_flags(metrics: dict[str, Any]) -> tuple[bool, bool] | None:
    """(suspicious, harness touched) of a trajectory from its metrics["grading"] (rollout_one); None: ungraded."""
    grading = metrics.get("grading")
    if not isinstance(grading, dict) or grading.get("failure") not in (None, SUSPICIOUS_FAILURE):
        return None
    return bool(grading.get("suspicious")), harness_touched(grading.get("tests") or {})


def police_episodes(
    trajs: Iterable[Any], policy: RewardPolicy, prefix: str = "integrity/"
) -> dict[str, float]:
    """Apply the reward policy to graded trajectories in place (a suspicious one gets reward 0 under `zero`, None
    under `mask`, its reward under `keep`); returns the step's counts and fractions of suspicious and
    harness-touching episodes (over the graded ones). Trajectories: anything with .reward and .metrics."""
    flags, unavailable, caused = [], [], []
    for t in trajs:
        f = episode_flags(t.metrics)
        if f is None:
            continue
        flags.append(f)
        unavailable.append(probe_unavailable(t.metrics["grading"].get("tests") or {}))
        caused.append(patch_caused(t.metrics["grading"].get("tests") or {}))
        if f[0] and t.reward is not None and policy != "keep":
            t.metrics["grading"]["reward_before_policy"] = t.reward
            t.reward = 0.0 if policy == "zero" else None
    return _rate(prefix, flags, unavailable, caused)
