"""A bounded cache of prompt KV states, reused by requests that share a prompt prefix.

One per generate replica, used only by its worker's main thread. Entries are the per-layer
(key, value) tensors of a whole prompt (batch dimension 1). ``lookup`` finds the entry sharing
the longest token prefix with a new prompt and returns views of its first ``n`` positions; the
caller prefills only the remaining tokens. Views are safe to hand out because the model's cache
appends by concatenation (new tensors), never in place.

Memory is bounded by ``max_bytes``: the least recently used entries go first.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Sequence

import torch

KV = list[tuple[torch.Tensor, torch.Tensor]]


class PrefixKvCache:
    def __init__(self, max_bytes: int, min_hit_tokens: int = 2) -> None:
        if max_bytes < 0:
            raise ValueError(f"max_bytes must be >= 0, got {max_bytes}")
        self.max_bytes = max_bytes
        self.min_hit_tokens = min_hit_tokens
        self._entries: OrderedDict[tuple[int, ...], tuple[KV, int]] = OrderedDict()
        self.used_bytes = 0
        self.hits = 0
        self.hit_tokens = 0

    def __len__(self) -> int:
        return len(self._entries)

    def lookup(self, tokens: Sequence[int]) -> tuple[int, KV | None]:
        """Longest reusable prefix of ``tokens``: (length, KV views) or (0, None).

        At most ``len(tokens) - 1`` positions are reused: the model must see at least one new
        token to produce the logits of the next one.
        """
        best_len, best_key = 0, None
        limit = len(tokens) - 1
        for key in self._entries:
            n = _common_prefix(key, tokens, limit)
            if n > best_len:
                best_len, best_key = n, key
        if best_key is None or best_len < self.min_hit_tokens:
            return 0, None
        self._entries.move_to_end(best_key)
        kv, _ = self._entries[best_key]
        self.hits += 1
        self.hit_tokens += best_len
        return best_len, [(k[:, :, :best_len, :], v[:, :, :best_len, :]) for k, v in kv]

    def store(self, tokens: Sequence[int], kv: KV) -> None:
        """Keep the KV of a whole prompt; evicts least recently used entries beyond the bound."""
        key = tuple(tokens)
        size = sum(k.numel() * k.element_size() + v.numel() * v.element_size() for k, v in kv)
        if size > self.max_bytes:
            return
        if key in self._entries:
            self._entries.move_to_end(key)
            return
        self._entries[key] = (kv, size)
        self.used_bytes += size
        while self.used_bytes > self.max_bytes:
            _, (_, dropped) = self._entries.popitem(last=False)
            self.used_bytes -= dropped


def _common_prefix(a: Sequence[int], b: Sequence[int], limit: int) -> int:
    n = min(len(a), len(b), limit)
    i = 0
    while i < n and a[i] == b[i]:
        i += 1
    return i
