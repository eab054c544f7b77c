"""What writing one episode's JSONL line costs: `Trajectory.to_json` against the `dataclasses.asdict` baseline it
replaced (which deep-copied every token list and message before serializing), as a ratio, in one run.

An episode of --tokens tokens (ids, loss mask, logprobs and entropy per token) and --turns messages of 2,000
characters, as DeepSWE-sized episodes have (up to 64K tokens, 100 turns). Both lines must be equal; each timing is
the best of --repeats runs, interleaved (the machine is shared; the best is the least disturbed).

Usage: .venv/bin/python bench/trajectory_json.py [--tokens 65536] [--turns 100] [--repeats 5]
"""

from __future__ import annotations

import argparse
import json
import random
import time
from dataclasses import asdict

from swe_rl.agent.trajectory import Trajectory


def episode(tokens: int, turns: int) -> Trajectory:
    rng = random.Random(0)
    return Trajectory(
        "bench__episode-1",
        prompt_len=512,
        token_ids=[rng.randrange(151_936) for _ in range(tokens)],
        loss_mask=[int(i >= 512) for i in range(tokens)],
        logprobs=[-rng.random() for _ in range(tokens)],
        entropy=[rng.random() for _ in range(tokens)],
        messages=[{"role": ("user", "assistant")[i % 2], "content": "x" * 2000} for i in range(turns)],
        metrics={"turns": turns, "grading": {"tests": {"t": "PASSED"}}},
    )


def timed(fn) -> float:
    t0 = time.perf_counter()
    fn()
    return time.perf_counter() - t0


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--tokens", type=int, default=65536)
    ap.add_argument("--turns", type=int, default=100)
    ap.add_argument("--repeats", type=int, default=5)
    a = ap.parse_args()
    t = episode(a.tokens, a.turns)

    def baseline() -> str:
        return json.dumps(asdict(t))

    line = t.to_json()
    assert line == baseline() and Trajectory.from_json(line) == t, "to_json differs from the asdict baseline"
    base = now = float("inf")
    for _ in range(a.repeats):  # interleaved: both see the same machine
        base = min(base, timed(baseline))
        now = min(now, timed(t.to_json))
    print(f"episode of {a.tokens} tokens, {a.turns} messages, {len(line) / 1e6:.1f} MB of JSON")
    print(f"asdict baseline {base * 1e3:.1f} ms, to_json {now * 1e3:.1f} ms: {base / now:.2f}x faster")


if __name__ == "__main__":
    main()
