"""A toy two-turn environment for fast trainer tests (learning, resume exactness, loss masking).

Episode: prompt "toy task <d>" -> the policy writes `turn_tokens` tokens -> a fixed observation (mask 0) ->
the policy writes `turn_tokens` more -> reward 1 if the first token of the second turn has the parity of d.
A random tiny model succeeds about half the time, so every group is mixed and RL has signal from step 1; the
optimum needs the second turn to condition on the prompt across the observation.

`ToyRollouter` samples all episodes of a step as one batch with a seeded torch.Generator (deterministic),
without KV cache: sequences are ~30 tokens.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch

from swe_rl.agent.trajectory import Trajectory
from swe_rl.tasks.task import Task


def toy_tasks(n: int = 10, stride: int = 1) -> list[Task]:
    """n tasks with digits 0, stride, 2*stride, ... (mod 10); stride=2 makes every target parity even."""
    return [
        Task(
            instance_id=f"toy-{i}",
            problem_statement=f"toy task {i * stride % 10}",
            metadata={"digit": i * stride % 10},
        )
        for i in range(n)
    ]


@torch.no_grad()
def sample_tokens(model: Any, seqs: torch.Tensor, k: int, temperature: float,
                  gen: torch.Generator) -> tuple[torch.Tensor, torch.Tensor]:  # fmt: skip
    """Append k tokens to every row of (B, L) `seqs`, sampled at `temperature` (0 = greedy), full forward per
    token (no KV cache: the in-process environments' sequences are short); returns (tokens (B, k), log-probs
    (B, k) of the distribution they were drawn from)."""
    toks, lps = [], []
    for _ in range(k):
        logits = model(input_ids=seqs).logits[:, -1].float()  # (B, V)
        if temperature == 0:
            logp = torch.log_softmax(logits, -1)
            nxt = logits.argmax(-1, keepdim=True)
        else:
            logp = torch.log_softmax(logits / temperature, -1)
            nxt = torch.multinomial(logp.exp(), 1, generator=gen)  # (B, 1)
        toks.append(nxt)
        lps.append(logp.gather(-1, nxt))
        seqs = torch.cat([seqs, nxt], 1)
    return torch.cat(toks, 1), torch.cat(lps, 1)


def toy_sampler(tasks: list[Task], k: int, rng: Any) -> list[Task]:
    return [rng.choice(tasks) for _ in range(k)]


@dataclass
class ToyRollouter:
    model: Any  # the trained model itself (updated in place by the trainer)
    tokenizer: Any
    turn_tokens: int = 3
    temperature: float = 1.0

    def _ids(self, text: str) -> list[int]:
        return self.tokenizer(text, add_special_tokens=False)["input_ids"]

    def _sample(self, seqs: torch.Tensor, k: int, gen: torch.Generator) -> tuple[torch.Tensor, torch.Tensor]:
        return sample_tokens(self.model, seqs, k, self.temperature, gen)

    def rollout(self, tasks: list[Task], n: int, seed: int) -> list[Trajectory]:
        gen = torch.Generator().manual_seed(seed)
        prompts = [
            self._ids(f"<|im_start|>user\n{t.problem_statement}<|im_end|>\n<|im_start|>assistant\n")
            for t in tasks
        ]
        if len({len(p) for p in prompts}) != 1:
            raise ValueError("toy tasks must have prompts of equal token length")
        obs = self._ids("<|im_end|>\n<|im_start|>user\nok<|im_end|>\n<|im_start|>assistant\n")
        rows = torch.tensor([p for p in prompts for _ in range(n)])  # (B, P) task-major
        b = rows.shape[0]
        a1, lp1 = self._sample(rows, self.turn_tokens, gen)
        seqs = torch.cat([rows, a1, torch.tensor(obs).expand(b, -1)], 1)
        a2, lp2 = self._sample(seqs, self.turn_tokens, gen)
        out = []
        for i in range(b):
            task = tasks[i // n]
            success = int(a2[i, 0]) % 2 == task.metadata["digit"] % 2
            p, k, o = rows.shape[1], self.turn_tokens, len(obs)
            ids = rows[i].tolist() + a1[i].tolist() + obs + a2[i].tolist()
            mask = [0] * p + [1] * k + [0] * o + [1] * k
            lps = [0.0] * p + lp1[i].tolist() + [0.0] * o + lp2[i].tolist()
            out.append(
                Trajectory(
                    task_id=task.instance_id,
                    sample_idx=i % n,
                    prompt_len=p,
                    token_ids=ids,
                    loss_mask=mask,
                    logprobs=lps,
                    exit_status="submitted",
                    terminated=True,
                    reward=float(success),
                    resolved=success,
                    metrics={"steps": 2},
                )
            )
        return out
