"""The prefill of one group's prompts, in one forward or in chunks (chunked prefill).

A :class:`GroupPrefill` computes the KV cache of a group's prompts (the rows of one dispatched
batch) and each row's first-token logits. Each prompt's longest cached prefix (see
:mod:`prefix_cache`) is reused and only the rest, its *suffix*, is computed. The group's cache
is laid out per row as ``[left padding | cached prefix | suffix | right padding]``: prefixes
are left-padded to the longest hit (``width`` columns), suffixes right-padded to the longest
suffix (``span`` columns). An attention mask hides the padding and explicit position ids keep
each row's own positions, so a row computes exactly what it would alone. Right-padding the
suffixes means no query row is ever fully masked (a padded query still sees its row's real
tokens), which keeps every attention backend finite.

Chunks. :meth:`GroupPrefill.advance` runs ONE forward over the next ``cols`` suffix columns of
every row, continuing the group's own ``DynamicCache``, with the mask cut at the chunk's right
edge (so it grows chunk by chunk) and the chunk's own position ids. Without chunking ``cols``
is the whole span: one forward, the fused prefill, with exactly the inputs it always had. With
``chunk_tokens`` it is ``max(1, chunk_tokens // rows)``, so one forward computes at most
``chunk_tokens`` prompt tokens of the group (at least one column). Chunking changes nothing a
row computes: each query attends to the same keys at the same positions, whether they were
computed in this forward or in an earlier chunk. A row whose suffix ended in an earlier chunk
is padding in the later ones, and its padded queries still see its real tokens in the cache
(every suffix has at least one), so the no-fully-masked-row property holds in every chunk.

Logits are kept only at each row's last real position (``logits_to_keep``), in the chunk that
holds it: the LM head is a fifth of a small model's weights. After the last chunk every whole
prompt's KV goes into the prefix cache; a group that fails part-way stores nothing.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

import torch
from transformers import DynamicCache

from control.executor.adapters.prefix_cache import KV

if TYPE_CHECKING:
    from control.executor.adapters.generate import GenerateAdapter, _Seq


class GroupPrefill:
    """The prefill of ``seqs`` (one group's tokenized rows, at least one), chunk by chunk.

    Construction looks up the prefix cache (sets each row's ``hit``) and builds the inputs;
    each :meth:`advance` is one forward. Once :attr:`done`, every row's ``next_logits`` holds
    its first-token logits and :attr:`cache` / :attr:`mask` are the group's KV cache and mask,
    ``width + span`` columns wide, ready to join a decode loop. ``chunk_tokens`` 0 means one
    forward for the whole prompts."""

    def __init__(self, adapter: GenerateAdapter, seqs: list[_Seq], chunk_tokens: int = 0) -> None:
        self.adapter, self.seqs = adapter, seqs
        for s in seqs:
            # adapter rows: the cached KV came from the base weights
            s.hit, s.cached = (0, None) if s.adapter else adapter.prefix_cache.lookup(s.prompt_ids)
        self.width = max(s.hit for s in seqs)  # past columns (cached prefixes, left-padded)
        self.suffix = [len(s.prompt_ids) - s.hit for s in seqs]
        self.span = max(self.suffix)  # new columns (suffixes, right-padded)
        rows = len(seqs)
        ids = torch.full((rows, self.span), adapter.pad_id, dtype=torch.long)
        pos = torch.zeros((rows, self.span), dtype=torch.long)
        mask = torch.zeros((rows, self.width + self.span), dtype=torch.long)
        for row, (s, n) in enumerate(zip(seqs, self.suffix, strict=True)):
            ids[row, :n] = torch.tensor(s.prompt_ids[s.hit :])
            pos[row, :n] = torch.arange(s.hit, s.hit + n)
            pos[row, n:] = s.hit + n - 1  # padding: any valid position, masked anyway
            mask[row, self.width - s.hit : self.width + n] = 1
        device = adapter.device
        self.ids, self.pos, self.mask = ids.to(device), pos.to(device), mask.to(device)
        past = _left_pad(seqs, self.width) if self.width else None
        self.cache = DynamicCache(ddp_cache_data=past) if past else DynamicCache()
        for s in seqs:
            s.cached = None  # the padded copy holds them now: drop the views
        self.cols = max(1, chunk_tokens // rows) if chunk_tokens > 0 else self.span
        self.computed = 0  # suffix columns already in the cache

    @property
    def done(self) -> bool:
        return self.computed >= self.span

    def finish(self, between: Callable[[], None] = lambda: None) -> None:
        """The chunks left, back to back, calling ``between`` between two of them."""
        while True:
            self.advance()
            if self.done:
                return
            between()

    def advance(self) -> None:
        """One forward over the next chunk of columns. Raises (out of memory, a prompt longer
        than the model's positions) with nothing outside this prefill changed."""
        a, lo = self.adapter, self.computed
        hi = min(lo + self.cols, self.span)
        ends = [n - 1 for n in self.suffix]  # each row's last real column
        keep = sorted({e for e in ends if lo <= e < hi})
        out = a.lora.forward(
            [s.adapter for s in self.seqs],
            input_ids=self.ids[:, lo:hi],
            attention_mask=self.mask[:, : self.width + hi],
            position_ids=self.pos[:, lo:hi],
            cache=self.cache,
            use_cache=True,
            # may be empty (no row ends in this chunk): then no LM head work at all
            logits_to_keep=torch.tensor([e - lo for e in keep], dtype=torch.long, device=a.device),
        )
        self.cache = out.cache
        for row, e in enumerate(ends):
            if lo <= e < hi:
                self.seqs[row].next_logits = out.logits[row, keep.index(e)].float()
        self.computed = hi
        if self.done and a.prefix_cache.max_bytes:
            self._store_prompts()

    def _store_prompts(self) -> None:
        layers = [(layer.keys, layer.values) for layer in self.cache.layers]
        for row, (s, n) in enumerate(zip(self.seqs, self.suffix, strict=True)):
            if s.adapter:
                continue  # its KV holds the adapter's own keys: no other prompt may reuse it
            lo, hi = self.width - s.hit, self.width + n
            kv = [(k[row : row + 1, :, lo:hi].clone(), v[row : row + 1, :, lo:hi].clone())
                  for k, v in layers]  # fmt: skip
            self.adapter.prefix_cache.store(s.prompt_ids, kv)


def _left_pad(seqs: list[_Seq], width: int) -> KV:
    """Stack the rows' cached prefixes (1, heads, hit, dim) into (batch, heads, width, dim),
    padding on the left; a row without a hit is all padding."""
    template = next(s.cached for s in seqs if s.cached)
    layers = []
    for layer, (k0, v0) in enumerate(template):
        keys, values = [], []
        for s in seqs:
            if s.cached:
                k, v = s.cached[layer]
            else:
                k, v = k0[:, :, :0], v0[:, :, :0]
            keys.append(torch.nn.functional.pad(k, (0, 0, width - s.hit, 0)))
            values.append(torch.nn.functional.pad(v, (0, 0, width - s.hit, 0)))
        layers.append((torch.cat(keys, 0), torch.cat(values, 0)))
    return layers
