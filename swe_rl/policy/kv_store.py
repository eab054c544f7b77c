"""Prefix KV reuse for multi-turn episodes: a turn's prompt is the previous turn's prompt + its reply + an
observation, so the keys/values of everything but the new tokens are already known.

`PrefixKVStore` keeps, per finished generation, the per-layer K/V of its tokens (prompt + reply minus the last
sampled token, whose K/V was never computed). `take(prompt)` pops the longest stored sequence that is a strict prefix
of `prompt`; each entry is used once (an episode continues once), the oldest are evicted past `max_entries` or
`max_bytes`.
Entries are dropped when the model's weights change (version counters + a value sample, see `weights_version`),
so a trainer step never leaves stale K/V behind.

`assemble(...)` builds the batch for a prefill over cached prefixes: cached K/V right-aligned into (R, H, C, D),
new tokens right-aligned into (R, N), a 2D mask over C + N columns with holes where rows are shorter, and explicit
position ids continuing each row's own prefix.
"""

from __future__ import annotations

from collections import OrderedDict
from dataclasses import dataclass
from typing import Any


@dataclass
class KVEntry:
    ids: list[int]  # (L,) tokens whose K/V are stored
    kv: list[tuple[Any, Any]]  # per layer (keys (H, L, D), values (H, L, D))
    nbytes: int = 0


def weights_version(model: Any) -> tuple[int, float]:
    """Changes whenever the weights change: the parameters' in-place version counters (optimizer steps,
    load_state_dict) plus a strided sample of their values (fused optimizers update without bumping versions)."""
    import torch

    with torch.no_grad():
        versions, sums = 0, []
        for p in model.parameters():
            versions += p._version
            flat = p.detach().reshape(-1)
            sums.append(flat[:: max(1, flat.numel() // 256)].double().sum())
        if not sums:
            return versions, 0.0
        # one host read for all parameters (a per-parameter float() is a device sync each on a GPU)
        return versions, float(torch.stack([x.to(sums[0].device) for x in sums]).sum())


class PrefixKVStore:
    def __init__(self, max_entries: int = 512, max_bytes: int = 256 << 20):
        self.max_entries = max_entries
        self.max_bytes = max_bytes  # finished episodes leave entries behind: the oldest go first
        self.nbytes = 0
        self.entries: OrderedDict[int, KVEntry] = OrderedDict()
        self.version: tuple[int, float] | None = None
        self._next = 0
        self.hits = 0
        self.reused_tokens = 0

    def sync(self, version: tuple[int, float]) -> None:
        if version != self.version:
            self.entries.clear()
            self.nbytes = 0
            self.version = version

    def take(self, prompt: list[int]) -> KVEntry | None:
        best_key, best_len = None, 0
        for key, e in self.entries.items():
            n = len(e.ids)
            if best_len < n < len(prompt) and prompt[:n] == e.ids:
                best_key, best_len = key, n
        if best_key is None:
            return None
        self.hits += 1
        self.reused_tokens += best_len
        entry = self.entries.pop(best_key)
        self.nbytes -= entry.nbytes
        return entry

    def put(self, ids: list[int], kv: list[tuple[Any, Any]]) -> None:
        if not ids:
            return
        size = sum(k.numel() * k.element_size() + v.numel() * v.element_size() for k, v in kv)
        self.entries[self._next] = KVEntry(ids, kv, size)
        self.nbytes += size
        self._next += 1
        while self.entries and (len(self.entries) > self.max_entries or self.nbytes > self.max_bytes):
            self.nbytes -= self.entries.popitem(last=False)[1].nbytes


def assemble(
    prompts: list[list[int]], cached: list[KVEntry | None], pad_id: int, device: Any
) -> dict[str, Any]:
    """Inputs for one batched prefill where row r reuses cached[r] (or nothing): input_ids (R, N), attention_mask
    (R, C + N), position_ids (R, N), and per-layer cache tensors (R, H, C, D) or None when nothing is cached."""
    import torch

    lens_c = [0 if e is None else len(e.ids) for e in cached]
    lens_n = [len(p) - c for p, c in zip(prompts, lens_c, strict=True)]
    rows, width_c, width_n = len(prompts), max(lens_c), max(lens_n)
    input_ids = torch.full((rows, width_n), pad_id, dtype=torch.long, device=device)
    attn = torch.zeros((rows, width_c + width_n), dtype=torch.long, device=device)
    pos = torch.zeros((rows, width_n), dtype=torch.long, device=device)
    for r, (p, c, n) in enumerate(zip(prompts, lens_c, lens_n, strict=True)):
        input_ids[r, width_n - n :] = torch.tensor(p[c:], device=device)
        pos[r, width_n - n :] = torch.arange(c, c + n, device=device)
        attn[r, width_c - c : width_c] = 1
        attn[r, width_c + width_n - n :] = 1
    layers = None
    if width_c:
        ref = next(e for e in cached if e is not None).kv
        layers = []
        for li, (k0, v0) in enumerate(ref):
            keys = k0.new_zeros((rows, k0.shape[0], width_c, k0.shape[2]))
            values = v0.new_zeros((rows, v0.shape[0], width_c, v0.shape[2]))
            for r, e in enumerate(cached):
                if e is not None:
                    k, v = e.kv[li]
                    keys[r, :, width_c - k.shape[1] :] = k
                    values[r, :, width_c - v.shape[1] :] = v
            layers.append((keys, values))
    return {"input_ids": input_ids, "attention_mask": attn, "position_ids": pos, "layers": layers}


def extract(cache: Any, row: int, valid: Any) -> list[tuple[Any, Any]]:
    """Row `row`'s K/V at the columns where `valid` (C,) is true, per layer: [(H, L, D), (H, L, D)]."""
    return [
        (layer.keys[row][:, valid].clone(), layer.values[row][:, valid].clone()) for layer in cache.layers
    ]
