"""A bounded cache of prompt KV states, reused by requests that share a prompt prefix.

One per generate replica, used only by its worker's main thread. Entries are the per-layer
(key, value) tensors of a whole prompt (batch dimension 1). ``lookup`` finds the entry sharing
the longest token prefix with a new prompt and returns views of its first ``n`` positions; the
caller prefills only the remaining tokens. Views are safe to hand out because the model's cache
appends by concatenation (new tensors), never in place.

Memory is bounded by ``max_bytes``: the least recently used entries go first. A stored prompt
never duplicates a cached one it shares most of its tokens with (see :meth:`PrefixKvCache.store`):
with one entry per prompt, two chats of one system prompt would otherwise fill two slots with
nearly equal KV and push another system prompt out, so a replica sized for two prompts held one.
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
        """Longest reusable prefix of ``tokens``: (length, KV views) or (0, None). The entry
        becomes most recently used when the hit covers at least half of it.

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
        if 2 * best_len >= len(best_key):
            # only a hit on most of an entry makes it recent: a short shared header (a chat
            # template's) would otherwise keep an unrelated prompt and evict a used one
            self._entries.move_to_end(best_key)
        kv, _ = self._entries[best_key]
        self.hits += 1
        self.hit_tokens += best_len
        return best_len, [(k[:, :, :best_len, :], v[:, :, :best_len, :]) for k, v in kv]

    def store(self, tokens: Sequence[int], kv: KV) -> None:
        """Keep the KV of a whole prompt; evicts least recently used entries beyond the bound.

        Against the cached entry sharing the longest prefix with ``tokens`` (``n`` tokens):
        ``tokens`` extending it (a conversation's next turn) replaces it; ``tokens`` that it
        already covers only touch it; ``tokens`` diverging from it after at least half of it (a
        sibling: the same system prompt, another question) shrink it to the shared ``n`` tokens,
        which is what later prompts reuse, and are not stored themselves. Otherwise ``tokens``
        get an entry of their own."""
        key = tuple(tokens)
        best_len, best_key = 0, None
        for old in self._entries:
            n = _common_prefix(old, key, len(key))
            if n > best_len:
                best_len, best_key = n, old
        if best_key is not None and best_len >= self.min_hit_tokens:
            if best_len == len(key):  # covered (or equal): nothing new to keep
                self._entries.move_to_end(best_key)
                return
            if best_len == len(best_key):  # an extension: it replaces the shorter entry
                self._drop(best_key)
            elif 2 * best_len >= len(best_key):  # a sibling: keep the shared prefix once
                old_kv, _ = self._drop(best_key)
                key = key[:best_len]
                kv = [(k[:, :, :best_len, :].clone(), v[:, :, :best_len, :].clone())
                      for k, v in old_kv]  # fmt: skip
        self._put(key, kv)

    def _drop(self, key: tuple[int, ...]) -> tuple[KV, int]:
        kv, size = self._entries.pop(key)
        self.used_bytes -= size
        return kv, size

    def _put(self, key: tuple[int, ...], kv: KV) -> None:
        size = sum(k.numel() * k.element_size() + v.numel() * v.element_size() for k, v in kv)
        if size > self.max_bytes:
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
