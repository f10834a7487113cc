"""Per-replica prefix-cache index: which KV blocks a replica probably still holds.

Blocks are identified by hash, one per block of ``CoreConfig.prefix_block_tokens`` tokens (512
in the Mooncake traces the twin replays; the live gateway hashes real token ids, see
:mod:`prefix_blocks`), chained (a block's hash covers its whole prefix), so a hit is the
longest run of leading blocks present.
Capacity is in blocks; the least recently used block goes first, as in vLLM's prefix cache.
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
        most recently used and evicts least recently used blocks beyond capacity."""
        if self.capacity_blocks == 0:
            return
        lru = self._lru
        for b in blocks:
            if b in lru:
                lru.move_to_end(b)
            else:
                lru[b] = None
        while len(lru) > self.capacity_blocks:
            lru.popitem(last=False)

    def clear(self) -> None:
        self._lru.clear()
