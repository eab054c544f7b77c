"""One episode as the viewer shows it (`Episode`), read from its source; `row` is its line in the index.

Outcomes are the evaluation report's buckets (swe_rl.evaluation.report.episode_from for evaluation runs, so the
viewer's counts are report.md's): resolved, unresolved, empty_patch, infra_failure. A training step record has no
patch and no `resolved` field: its reward decides (None: infra_failure, >= 1: resolved).
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from swe_rl.view.load import RunInfo, Source, repo_of

_ISSUE = re.compile(r"<github_issue>\s*(.*?)\s*</github_issue>", re.S)
LOG_TAIL_LINES = 60


@dataclass
class Turn:
    index: int  # 1-based
    reply: str  # the assistant's text (reasoning + call as generated)
    reasoning: str  # the text before the call (or <think> content)
    action: dict[str, Any] | None  # {name, params}: the parsed call
    parse_error: str | None
    observation: str | None  # the next message's content, as the agent saw it (after the tools' truncation)
    tokens: int | None  # policy tokens of the turn (its span)
    entropy: float | None  # mean token entropy over the turn (the rollout's, when recorded)
    alpha: float | None = None  # AEM's α for the turn (training records that carry it)
    advantage: float | None = None  # the advantage the turn received (training records that carry it)
    finish: str | None = None


@dataclass
class Episode:
    key: str
    kind: str  # eval | train | heldout | grade
    instance: str
    repo: str
    sample: int
    step: int | None
    outcome: str
    exit: str
    steps: int
    tokens: int
    reward: float | None
    failure: str | None = None
    suspicious: list[str] = field(default_factory=list)
    problem: str = ""
    prompt: str = ""
    system: str = ""
    turns: list[Turn] = field(default_factory=list)
    patch: str | None = None
    tests: dict[str, Any] = field(default_factory=dict)  # the grader's test report
    log_tail: str = ""
    error: str | None = None
    raw: list[tuple[str, str]] = field(default_factory=list)  # (label, path relative to the run root)
    mode: str = ""  # held-out: greedy / sampled
    node: str | None = None  # the rollout actor's Ray node, "<ip> <id8>" (evaluation runs on Ray)

    def row(self) -> list[Any]:
        """The index line; columns in index order (swe_rl/view/assets/index.js reads them by position)."""
        return [self.key, self.instance, self.repo, self.sample, self.step, self.kind, self.exit, self.steps,
                self.tokens, self.reward, self.outcome, self.failure or "", "; ".join(self.suspicious)]  # fmt: skip


ROW_COLUMNS = ["key", "instance", "repo", "sample", "step", "kind", "exit", "steps", "tokens", "reward",
               "outcome", "failure", "suspicious"]  # fmt: skip


def load_episode(info: RunInfo, src: Source, cache: dict[str, Any]) -> Episode:
    """`cache` holds a JSONL file's lines across the sources of one file (read once)."""
    if src.how == "eval":
        return _eval_episode(info.root, src)
    ep = _grade_episode(info.root, src) if src.how == "grade" else _line_episode(info, src, cache)
    if not ep.problem and ep.instance in info.problems:  # a grade output keeps no problem statement
        ep.problem = info.problems[ep.instance]
    return ep


def _read_json(path: Path) -> Any:
    try:
        return json.loads(path.read_text())
    except (OSError, json.JSONDecodeError):
        return None


def _eval_episode(root: Path, src: Source) -> Episode:
    from swe_rl.agent.trajectory import Trajectory
    from swe_rl.evaluation.report import episode_from

    data = _read_json(root / src.files[0])
    if not isinstance(data, dict):
        raise ValueError(f"{src.files[0]}: not a trajectory JSON object")
    traj = Trajectory(**data)
    grading = _read_json(root / src.files[1])
    grading = grading if isinstance(grading, dict) else _own_grading(traj)
    rep = episode_from(traj, grading, repo_of(traj.task_id))
    g = grading or traj.metrics.get("grading") or {}
    ep = Episode(src.key, "eval", traj.task_id, rep.repo, traj.sample_idx, None, rep.bucket, rep.exit_status,
                 rep.steps, rep.tokens, traj.reward, rep.failure, list(rep.suspicious), patch=traj.patch,
                 tests=g.get("tests") or {}, log_tail=g.get("log_tail") or "", error=traj.error,
                 node=rep.node)  # fmt: skip
    _fill_messages(ep, traj.messages, traj.entropy, traj.loss_mask)
    ep.raw = [("trajectory", src.files[0])] + ([("grading", src.files[1])] if grading else [])
    return ep


def _own_grading(traj: Any) -> dict[str, Any] | None:
    """A run being written: the episode's file is there, its grading file not yet. With `grader: ours` the
    trajectory carries its grading; the record swe_rl.evaluation.harness.grading_record would write from it."""
    g = traj.metrics.get("grading")
    if not isinstance(g, dict) or traj.exit_status == "error":
        return None
    return {"resolved": bool(traj.resolved), "reward": traj.reward, "failure": g.get("failure"),
            "tests": g.get("tests") or {}, "suspicious": g.get("suspicious") or [], "log_tail": g.get("log_tail")}  # fmt: skip


def _line_episode(info: RunInfo, src: Source, cache: dict[str, Any]) -> Episode:
    rel = src.files[0]
    if rel not in cache:
        from swe_rl.view.load import read_jsonl

        cache.clear()  # sources come file by file: keep one file's lines
        cache[rel] = dict(read_jsonl(info.root / rel, info.root, []))
    rec = cache[rel][src.line]
    heldout = src.how == "heldout_line"
    reward = rec.get("reward")
    exit_ = str(rec.get("exit") or "unknown")
    g = rec.get("grading") or {}
    failure = rec.get("failure") or g.get("failure")
    if exit_ == "error" or reward is None:
        outcome, failure = "infra_failure", failure or ("episode_error" if exit_ == "error" else "not_scored")
    elif heldout and "resolved" in rec:
        outcome = "resolved" if rec["resolved"] else "unresolved"
    else:
        outcome = "resolved" if reward >= 1 else "unresolved"
    msgs = rec.get("messages") or []
    tokens = sum(m["span"][1] - m["span"][0] for m in msgs if isinstance(m.get("span"), list))
    iid = str(rec.get("task_id") or "?")
    ep = Episode(src.key, "heldout" if heldout else "train", iid, repo_of(iid, iid.split("-")[0]), src.sample,
                 src.step, outcome, exit_, 0, tokens, reward, failure, list(g.get("suspicious") or []),
                 patch=rec.get("patch"), tests=g.get("tests") or {}, log_tail=g.get("log_tail") or "",
                 error=rec.get("error"), mode=str(rec.get("mode") or ""))  # fmt: skip
    _fill_messages(ep, msgs, None, None, rec.get("turns"))
    ep.steps = len(ep.turns)
    ep.raw = [(f"{Path(rel).name}, line {src.line}", rel)]
    return ep


def _grade_episode(root: Path, src: Source) -> Episode:
    iid = str(src.extra.get("id") or Path(src.files[0]).parent.name)
    report = _read_json(root / iid / "report.json") if src.files else None
    failure_doc = _read_json(root / iid / "failure.json") if src.files else None
    tests: dict[str, Any] = {}
    reward: float | None = None
    failure: str | None = None
    resolved = False
    if isinstance(report, dict):
        tests = report.get(iid) or (list(report.values()) or [{}])[0]
        reward, failure, resolved = tests.get("reward"), tests.get("failure"), bool(tests.get("resolved"))
    elif isinstance(failure_doc, dict):
        tests = failure_doc.get("tests") or {}
        reward, failure = failure_doc.get("reward"), failure_doc.get("failure") or "unknown"
    patch = _text(root / iid / "patch.diff") if src.files else ""
    if src.extra.get("empty_patch") or (patch is not None and not patch.strip() and not failure):
        outcome, reward = "empty_patch", 0.0
    elif reward is None:
        outcome = "infra_failure"
    else:
        outcome = "resolved" if resolved else "unresolved"
    suspicious = list((tests.get("integrity") or {}).get("suspicious") or [])
    log = _text(root / iid / "test_output.txt") or ""
    ep = Episode(iid, "grade", iid, repo_of(iid, iid), 0, None, outcome, "graded", 0, 0, reward, failure,
                 suspicious, patch=patch, tests=tests, log_tail=_tail(log))  # fmt: skip
    ep.raw = [(n, f) for n, f in zip(("report", "failure", "patch", "test output"), src.files, strict=False)
              if (root / f).is_file()]  # fmt: skip
    return ep


def _text(path: Path) -> str | None:
    try:
        return path.read_text(errors="replace")
    except OSError:
        return None


def _tail(text: str, n: int = LOG_TAIL_LINES) -> str:
    return "\n".join(text.rstrip("\n").split("\n")[-n:]) if text else ""


def _fill_messages(
    ep: Episode,
    msgs: list[dict[str, Any]],
    entropy: list[float] | None,
    mask: list[int] | None,
    turn_stats: list[dict[str, Any]] | None = None,
) -> None:
    """System prompt, task prompt (and the issue in it), then one Turn per assistant message with the message
    after it as its observation. `turn_stats` (a training record's per-turn entropy / alpha / advantage)."""
    turns: list[Turn] = []
    for i, m in enumerate(msgs):
        role, content = m.get("role"), str(m.get("content") or "")
        if role == "system" and not ep.system:
            ep.system = content
        elif role == "user" and not ep.prompt and not turns:
            ep.prompt = content
        elif role == "assistant":
            nxt = msgs[i + 1] if i + 1 < len(msgs) and msgs[i + 1].get("role") != "assistant" else None
            span = m.get("span") if isinstance(m.get("span"), list) else None
            turns.append(Turn(len(turns) + 1, content, _reasoning(content), m.get("action"), m.get("parse_error"),
                              None if nxt is None else str(nxt.get("content") or ""),
                              None if span is None else span[1] - span[0],
                              _span_entropy(entropy, mask, span), finish=m.get("finish_reason")))  # fmt: skip
    for t, stats in zip(turns, turn_stats or [], strict=False):
        if isinstance(stats, dict):
            t.entropy = stats.get("entropy", t.entropy)
            t.alpha, t.advantage = stats.get("alpha"), stats.get("advantage")
    ep.turns = turns
    found = _ISSUE.search(ep.prompt)
    ep.problem = found.group(1) if found else ep.prompt


def _reasoning(reply: str) -> str:
    """The text before the call: a <think> block's content and any words before `<function=` / `<tool_call>`."""
    cut = [i for i in (reply.find("<function="), reply.find("<tool_call>")) if i >= 0]
    head = reply[: min(cut)] if cut else reply
    return head.replace("<think>", "").replace("</think>", "\n").strip()


def _span_entropy(
    entropy: list[float] | None, mask: list[int] | None, span: list[int] | None
) -> float | None:
    if not entropy or span is None:
        return None
    s, e = span
    vals = [entropy[i] for i in range(s, min(e, len(entropy))) if mask is None or (i < len(mask) and mask[i])]
    return sum(vals) / len(vals) if vals else None
