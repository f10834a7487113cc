"""The small models the simulated executor applies to each batch: a replica's KV prefix cache
(LRU over trace block hashes), the scatter of device times around the table, and a router's
branch choice. Each is seeded so that it never depends on event order."""

from __future__ import annotations

import math
import random
import zlib
from collections import OrderedDict
from collections.abc import Mapping

from control.core.actions import BatchItem


class PrefixCache:
    """LRU set of block hashes one replica holds (a KV cache by prefix blocks)."""

    __slots__ = ("blocks", "capacity")

    def __init__(self, capacity: int) -> None:
        self.capacity = capacity
        self.blocks: OrderedDict[int, None] = OrderedDict()

    def hit_then_insert(self, hashes: tuple[int, ...]) -> int:
        """Leading blocks already cached (a prefix match), then cache them all."""
        hits = 0
        for h in hashes:
            if h not in self.blocks:
                break
            hits += 1
        for h in hashes:
            self.blocks[h] = None
            self.blocks.move_to_end(h)
        while len(self.blocks) > self.capacity:
            self.blocks.popitem(last=False)
        return hits


def service_factor(batch_id: str, seed: int, sigma_milli: int) -> float:
    """A log-normal factor of median 1 for one batch's device time: ``exp(N(0, sigma))`` drawn
    from a generator seeded by the batch id and the run's seed (no shared RNG, so a batch's
    factor does not depend on event order)."""
    rng = random.Random(zlib.crc32(f"{seed}/{batch_id}".encode()))
    return math.exp(rng.gauss(0.0, sigma_milli / 1000))


def route_label(item: BatchItem, weights: Mapping[str, Mapping[str, int]], seed: int) -> str:
    """A router's branch: weighted by ``weights[node_id]``, chosen by a stable hash of the run
    and seed (no shared RNG, so the choice does not depend on event order); without weights the
    node's ``default`` label."""
    options = weights.get(item.node_id)
    if not options:
        return str(item.params.get("default", ""))
    total = sum(options.values())
    pick = zlib.crc32(f"{seed}/{item.request_id}/{item.node_id}".encode()) % total
    for label in sorted(options):
        pick -= options[label]
        if pick < 0:
            return label
    return sorted(options)[-1]
