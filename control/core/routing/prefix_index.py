"""Per-replica prefix-cache index: which KV blocks a replica probably still holds.

Blocks are identified by hash, one per block of ``CoreConfig.prefix_block_tokens`` tokens (512
in the Mooncake traces the twin replays; the live gateway hashes real token ids, see
:mod:`prefix_blocks`), chained (a block's hash covers its whole prefix), so a hit is the
longest run of leading blocks present.
Capacity is in blocks; the least recently used block goes first, as in vLLM's prefix cache. The
blocks past the held run of a prompt that mostly hits (a sibling of a held prompt: the same system
prompt, another question) count as least recently used: the worker's cache keeps a sibling's
shared prefix, not its tail (``PrefixKvCache.store``), and with them most recent every chat's
question block would push out the held prefix of another prompt the replica still serves.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Sequence


class PrefixIndex:
    def __init__(self, capacity_blocks: int) -> None:
        if capacity_blocks < 0:
            raise ValueError(f"PrefixIndex.capacity_blocks={capacity_blocks}: must be >= 0")
        self.capacity_blocks = capacity_blocks
        self._lru: OrderedDict[int, None] = OrderedDict()

    def __len__(self) -> int:
        return len(self._lru)

    def __contains__(self, block: object) -> bool:
        return block in self._lru

    def match(self, blocks: Sequence[int]) -> int:
        """Leading blocks of ``blocks`` present now (predicted cache hit). Changes nothing."""
        n = 0
        for b in blocks:
            if b not in self._lru:
                break
            n += 1
        return n

    def insert(self, blocks: Sequence[int]) -> None:
        """Record that the replica now holds ``blocks`` (after running them); touches hits as
        most recently used and evicts least recently used blocks beyond capacity. When at least
        half of ``blocks`` hit, the rest go in as least recently used (see the module's
        docstring)."""
        if self.capacity_blocks == 0:
            return
        lru = self._lru
        held = self.match(blocks)
        tail_last = not held or 2 * held < len(blocks)
        for i, b in enumerate(blocks):
            recent = i < held or tail_last
            if b in lru:
                lru.move_to_end(b, last=recent)
            else:
                lru[b] = None
                if not recent:
                    lru.move_to_end(b, last=False)
        while len(lru) > self.capacity_blocks:
            lru.popitem(last=False)

    def clear(self) -> None:
        self._lru.clear()
