"""An in-process multi-decision environment for the AEM outcome study: `data.source: decisions`.

Why it exists: the Docker pipeline's episodes have one real decision (the edit) and trivial turns, so span entropies
differ by turn type and barely within one, and the study's sizes (3 arms x 10 seeds x 100 steps, 200 held-out tasks
x 4 samples every 10 steps) would take ~15 CPU-hours through sandboxes. Here an episode has the shape of a
localize / edit / edit / submit agent run, every turn carries a decision with a plausible wrong alternative, and a
whole episode is ~95 tokens sampled in one torch batch, so the study fits 2 hours on 2 cores.

Episode (token ids, one row of a batch; each assistant turn = a decision token + one free "reasoning" token, in
that order, or reasoning first with `reason_first`):
    prompt   "fix" f z1 z2 z3           f = the file named by the failing test (0..3), z = distractor digits
    turn 1   locate: FILE[k]            right iff k == f
    obs 1    "view" c1 c2   (right file: the two constants of the buggy lines)
             "miss" c1' c2' (a wrong file: its own constants; the episode can no longer succeed)
    turn 2   edit 1: EDIT1[j]           right iff j == c1 (c in {0, 1}: the fix depends on what the file showed)
    obs 2    "ok"
    turn 3   edit 2: EDIT2[j]           right iff j == c2
    obs 3    "ok"
    turn 4   SUBMIT or CONTINUE         CONTINUE = the episode ends without submitting
Patch graded: 1 iff the file and both edits are right. Exit status `submitted` after SUBMIT, else `format_error`,
so the trainer's reward spec decides what an unsubmitted patch scores (`algo.reward.unsubmitted`, default zero).
Any other token in a decision position is wrong, as an unparsable tool call would be.

Tasks are (f, z1, z2, z3, c1, c2) tuples: 4 x 10^3 x 4 = 16,000. A task's split (train / validation / test) is a hash of the tuple,
so the three are disjoint by construction; held-out tasks combine constants and files the policy never saw
together. The start checkpoint (`build_start`) is a tiny Qwen2 fitted to noisy demonstrations: each decision right
with probability `p_correct`, submit with `p_submit`, the free token a turn-type template with probability
`p_template`; the fewer SFT steps, the higher its entropy.
"""

from __future__ import annotations

import hashlib
import json
import random
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from swe_rl.agent.trajectory import Trajectory
from swe_rl.experiments.toy import sample_tokens
from swe_rl.tasks.task import Task
from swe_rl.train.batch import register_turn_types

N_FILES = 4
FILE_TOK = (150, 151, 152, 153)
EDIT1_TOK = (160, 161)
EDIT2_TOK = (170, 171)
SUBMIT_TOK, CONTINUE_TOK = 180, 181
FREE_LO, FREE_HI = 100, 140  # the free tokens' range
TEMPLATE_TOK = (110, 120, 130, 135)  # the demonstrations' usual free token of each turn
TURNS = ("locate", "edit:1", "edit:2", "submit")
register_turn_types(
    {"locate": (), "edit": ("1", "2"), "submit": ()}
)  # α-by-turn-type keys (closed vocabulary)
SPLITS = ("train", "validation", "test")
SPLIT_SHARES = (0.8, 0.1, 0.1)


def split_of(*key: int) -> str:
    h = int(hashlib.sha256("|".join(map(str, key)).encode()).hexdigest()[:8], 16) / 16**8
    return (
        "train" if h < SPLIT_SHARES[0] else "validation" if h < SPLIT_SHARES[0] + SPLIT_SHARES[1] else "test"
    )


def decision_tasks(split: str, n: int, seed: int = 0, field: str = "n") -> list[Task]:
    """n distinct tasks of `split`, drawn deterministically from `seed` (at most the split's size; `field` names
    the config key that asked for n in the error)."""
    if split not in SPLITS:
        raise ValueError(f"split={split!r}: expected one of {SPLITS}")
    pool = [
        (f, z // 100, z // 10 % 10, z % 10, c // 2, c % 2)
        for f in range(N_FILES)
        for z in range(1000)
        for c in range(4)
        if split_of(f, z, c) == split
    ]
    if n > len(pool):
        raise ValueError(f"{field}={n}: the decisions split {split!r} has only {len(pool)} tasks")
    random.Random(f"{seed}|{split}").shuffle(pool)
    return [
        Task(
            instance_id=f"dec__{split}-{i:05d}",
            problem_statement=f"fix {f} {z1} {z2} {z3}",
            metadata={"family": f"file{f}", "f": f, "z": [z1, z2, z3], "c": [c1, c2], "split": split},
        )
        for i, (f, z1, z2, z3, c1, c2) in enumerate(pool[:n])
    ]


class Layout:
    """Token ids of the fixed parts of an episode (prompt template, observations) for one tokenizer."""

    def __init__(self, tok: Any):
        ids = lambda s: tok(s, add_special_tokens=False)["input_ids"]  # noqa: E731
        self.digit = [ids(str(d)) for d in range(10)]
        if any(len(d) != 1 for d in self.digit):
            raise ValueError("decisions env: the tokenizer must encode each digit as one token")
        self.digit = [d[0] for d in self.digit]
        self.head = ids("<|im_start|>user\nfix")
        self.tail = ids("<|im_end|>\n<|im_start|>assistant\n")
        self.user = ids("<|im_end|>\n<|im_start|>user\n")
        view, miss, ok = ids("view"), ids("miss"), ids("ok")
        width, space = max(len(view), len(miss), len(ok)), ids(" ")
        # every observation has one length, so a batch's rows stay aligned whatever the policy chose
        self.view, self.miss, self.ok = (w + space * (width - len(w)) for w in (view, miss, ok))

    def prompt(self, t: Task) -> list[int]:
        m = t.metadata
        return self.head + [self.digit[x] for x in [m["f"], *m["z"]]] + self.tail

    def observe(self, word: list[int], digits: list[int]) -> list[int]:
        return self.user + word + [self.digit[d] for d in digits] + self.tail

    def view_obs(self, t: Task, chosen_file: int | None) -> list[int]:
        word = self.view if chosen_file == t.metadata["f"] else self.miss
        return self.observe(word, list(shown_constants(t, chosen_file)))

    def ok_obs(self) -> list[int]:
        return self.observe(self.ok, [0, 0])


def shown_constants(t: Task, chosen_file: int | None) -> tuple[int, int]:
    """The constants the viewed file shows: the task's own for the right file, another file's otherwise."""
    c1, c2 = t.metadata["c"]
    if chosen_file == t.metadata["f"]:
        return c1, c2
    k = (chosen_file if chosen_file is not None else N_FILES) + 1
    return (c1 + k) % 2, (c2 + k // 2) % 2


def right_tokens(t: Task) -> tuple[int, int, int, int]:
    c1, c2 = t.metadata["c"]
    return FILE_TOK[t.metadata["f"]], EDIT1_TOK[c1], EDIT2_TOK[c2], SUBMIT_TOK


@dataclass
class DecisionRollouter:
    """Samples all episodes of a call as one batch (seeded torch.Generator, no KV cache: ~95 tokens)."""

    model: Any
    tokenizer: Any
    temperature: float = 1.0  # 0 = greedy
    turn_tokens: int = 2  # decision + free tokens per assistant turn
    reason_first: bool = False  # the free token comes first, the decision is the turn's last token

    def __post_init__(self) -> None:
        self.layout = Layout(self.tokenizer)

    def with_temperature(self, temperature: float) -> DecisionRollouter:
        return DecisionRollouter(self.model, self.tokenizer, temperature, self.turn_tokens, self.reason_first)

    def rollout(self, tasks: list[Task], n: int, seed: int) -> list[Trajectory]:
        gen = torch.Generator().manual_seed(seed)
        lay = self.layout
        rows = [t for t in tasks for _ in range(n)]  # task-major
        seqs = torch.tensor([lay.prompt(t) for t in rows])
        p = seqs.shape[1]
        ids = [s.tolist() for s in seqs]
        mask = [[0] * p for _ in rows]
        lps = [[0.0] * p for _ in rows]
        firsts: list[list[int]] = [[] for _ in rows]
        spans: list[list[tuple[int, int]]] = [[] for _ in rows]
        acts: list[list[int]] = [
            [] for _ in rows
        ]  # action starts (reason_first; else each turn counts whole)
        for turn in range(len(TURNS)):
            a, lp = sample_tokens(self.model, seqs, self.turn_tokens, self.temperature, gen)
            for i in range(len(rows)):
                start = len(ids[i])
                ids[i] += a[i].tolist()
                mask[i] += [1] * self.turn_tokens
                lps[i] += lp[i].tolist()
                firsts[i].append(int(a[i, -1 if self.reason_first else 0]))  # the decision token
                spans[i].append((start, len(ids[i])))
                if self.reason_first:  # the action is the decision, the turn's last token
                    acts[i].append(len(ids[i]) - 1)
            if turn == len(TURNS) - 1:
                break
            obs = []
            for i, t in enumerate(rows):
                if turn == 0:
                    chosen = FILE_TOK.index(firsts[i][0]) if firsts[i][0] in FILE_TOK else None
                    obs.append(lay.view_obs(t, chosen))
                else:
                    obs.append(lay.ok_obs())
            for i, o in enumerate(obs):
                ids[i] += o
                mask[i] += [0] * len(o)
                lps[i] += [0.0] * len(o)
            seqs = torch.tensor(ids)
        out = []
        for i, t in enumerate(rows):
            right = right_tokens(t)
            ok = [firsts[i][k] == right[k] for k in range(4)]
            patch_ok = ok[0] and ok[1] and ok[2]
            submitted = ok[3]
            msgs = [
                {"role": "assistant", "span": list(spans[i][k]), "correct": ok[k],
                 "action": {"name": TURNS[k].split(":")[0],
                            "params": {"command": TURNS[k].split(":")[1]} if ":" in TURNS[k] else {}}}
                for k in range(4)
            ]  # fmt: skip
            out.append(
                Trajectory(
                    task_id=t.instance_id,
                    sample_idx=i % n,
                    prompt_len=p,
                    token_ids=ids[i],
                    loss_mask=mask[i],
                    logprobs=lps[i],
                    action_starts=acts[i],
                    messages=msgs,
                    patch="fixed" if patch_ok else "",
                    exit_status="submitted" if submitted else "format_error",
                    terminated=submitted,
                    reward=float(patch_ok),  # the graded patch; the reward spec handles unsubmitted episodes
                    resolved=patch_ok and submitted,
                    metrics={"steps": 4, "correct": ok},
                )
            )
        return out


# ---- the start checkpoint ---------------------------------------------------------------------------------------


def demonstration(lay: Layout, t: Task, rng: random.Random, p_correct: float, p_submit: float,
                  p_template: float, reason_first: bool = False,
                  p_correct_reasoned: float | None = None) -> tuple[list[int], list[int]]:  # fmt: skip
    """One noisy demonstration: each decision right with probability p_correct (else its plausible alternative,
    or for the file a uniformly drawn wrong one), submit with p_submit, free tokens a template with p_template.
    `reason_first`: the free token comes before the decision, and a decision after the template token is right
    with probability `p_correct_reasoned` instead (reasoning that makes the decision surer and more often right).
    Returns (token ids, loss mask: 1 on the demonstrator's tokens)."""
    if not reason_first:  # this draw order made the outcome study's start: keep it
        return _act_then_reason(lay, t, rng, p_correct, p_submit, p_template)
    right = right_tokens(t)
    ids, mask = list(lay.prompt(t)), [0] * len(lay.prompt(t))
    chosen = 0
    for turn in range(len(TURNS)):
        templ = rng.random() < p_template
        free = TEMPLATE_TOK[turn] if templ else rng.randrange(FREE_LO, FREE_HI)
        p = p_correct_reasoned if templ and p_correct_reasoned is not None else p_correct
        ok = rng.random() < (p_submit if turn == 3 else p)
        if turn == 0:
            act = right[0] if ok else rng.choice([x for x in FILE_TOK if x != right[0]])
            chosen = FILE_TOK.index(act)
            obs = lay.view_obs(t, chosen)
        elif turn in (1, 2):
            # after a wrong file the demonstrator still edits by the constants it was shown
            c = shown_constants(t, chosen)[turn - 1]
            pair = EDIT1_TOK if turn == 1 else EDIT2_TOK
            act, obs = (pair[c] if ok else pair[1 - c]), lay.ok_obs()
        else:
            act, obs = (SUBMIT_TOK if ok else CONTINUE_TOK), []
        ids += [free, act, *obs]
        mask += [1, 1] + [0] * len(obs)
    return ids, mask


def _act_then_reason(lay: Layout, t: Task, rng: random.Random, p_correct: float, p_submit: float,
                     p_template: float) -> tuple[list[int], list[int]]:  # fmt: skip
    right = right_tokens(t)

    def free(turn: int) -> int:
        return TEMPLATE_TOK[turn] if rng.random() < p_template else rng.randrange(FREE_LO, FREE_HI)

    f_tok = right[0] if rng.random() < p_correct else rng.choice([x for x in FILE_TOK if x != right[0]])
    chosen = FILE_TOK.index(f_tok)
    # after a wrong file the demonstrator still edits by the constants it was shown
    c1, c2 = shown_constants(t, chosen)
    e1 = EDIT1_TOK[c1] if rng.random() < p_correct else EDIT1_TOK[1 - c1]
    e2 = EDIT2_TOK[c2] if rng.random() < p_correct else EDIT2_TOK[1 - c2]
    s = SUBMIT_TOK if rng.random() < p_submit else CONTINUE_TOK
    ids, mask = list(lay.prompt(t)), [0] * len(lay.prompt(t))
    for turn, (act, obs) in enumerate(
        [(f_tok, lay.view_obs(t, chosen)), (e1, lay.ok_obs()), (e2, lay.ok_obs()), (s, [])]
    ):
        ids += [act, free(turn), *obs]
        mask += [1, 1] + [0] * len(obs)
    return ids, mask


def start_key(cfg: Any) -> dict[str, Any]:
    d = cfg.data.decisions.model_dump()
    if not d["reason_first"]:  # act-then-reason starts do not depend on these (and keep their older keys)
        d.pop("reason_first")
        d.pop("p_correct_reasoned")
    return {"decisions": d, "seed": cfg.data.seed, "size": cfg.model.size,
            "arch": cfg.model.arch, "vocab_size": cfg.model.vocab_size}  # fmt: skip


def start_folder(cfg: Any) -> Path:
    """<out_dir>/starts/decisions-<hash of the start's configuration>: one start per configuration, shared."""
    digest = hashlib.sha256(json.dumps(start_key(cfg), sort_keys=True).encode()).hexdigest()[:12]
    return Path(cfg.out_dir) / "starts" / f"decisions-{digest}"


def build_start(cfg: Any, path: Path) -> Path:
    """The SFT start of a decisions run (a HF folder with its tokenizer), built once per configuration: a
    folder whose start.json matches `cfg` is reused, another configuration is refused (pick a new folder)."""
    from swe_rl.policy.tiny import build_tiny_model, build_tokenizer, save_tokenizer

    path = Path(path)
    key = start_key(cfg)
    meta = path / "start.json"
    if (path / "config.json").is_file() and meta.is_file():
        have = json.loads(meta.read_text())
        if have.get("key") != key:
            raise ValueError(f"{path}: holds a start built with {have.get('key')}; this config needs {key}")
        return path
    d = cfg.data.decisions
    tok = build_tokenizer(vocab_size=cfg.model.vocab_size)
    lay = Layout(tok)
    model = build_tiny_model(tok, arch=cfg.model.arch, size=cfg.model.size, seed=d.start_seed)
    tasks = decision_tasks("train", cfg.data.n_train, cfg.data.seed, field="data.n_train")
    rng = random.Random(d.start_seed)
    opt = torch.optim.Adam(model.parameters(), lr=d.sft_lr)
    model.train()
    losses = []
    for _ in range(d.sft_steps):
        demos = [demonstration(lay, rng.choice(tasks), rng, d.p_correct, d.p_submit, d.p_template,
                               d.reason_first, d.p_correct_reasoned) for _ in range(d.sft_batch)]  # fmt: skip
        ids = torch.tensor([x for x, _ in demos])
        mask = torch.tensor([m for _, m in demos], dtype=torch.float32)[:, 1:]
        logits = model(input_ids=ids).logits[:, :-1].float()
        tok_loss = torch.nn.functional.cross_entropy(
            logits.reshape(-1, logits.shape[-1]), ids[:, 1:].reshape(-1), reduction="none"
        ).view_as(mask)
        loss = (tok_loss * mask).sum() / mask.sum()
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(float(loss.detach()))
    model.eval()
    path.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(path)
    save_tokenizer(tok, path)
    meta.write_text(json.dumps({"key": key, "sft_loss_last": losses[-1] if losses else None}, indent=1))
    return path
