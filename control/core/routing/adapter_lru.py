"""The core's mirror of one replica's LoRA adapter LRU (see :mod:`.adapters`)."""

from __future__ import annotations


class AdapterLru:
    """Adapter names a replica holds, least recently used first; ``load_us``: what loading
    one costs when the adapter's own load time is not known (its model's ``adapter_load_s``)."""

    __slots__ = ("capacity", "load_us", "order")

    def __init__(self, capacity: int, load_us: int = 0) -> None:
        self.capacity = capacity
        self.load_us = load_us
        self.order: dict[str, None] = {}  # insertion order: least recently used first

    def holds(self, name: str) -> bool:
        return name in self.order

    def held(self) -> tuple[str, ...]:
        return tuple(self.order)

    def use(self, names: list[str]) -> tuple[list[str], list[str]]:
        """Use ``names`` (a batch's adapters, in batch order; ``""`` is the base): returns
        (adapters loaded now, adapters evicted), each in order. As on the replica, eviction
        happens only when a batch uses adapters (a base-only batch changes nothing)."""
        loaded: list[str] = []
        if not any(names):
            return loaded, []
        for name in names:
            if not name:
                continue
            if name in self.order:
                del self.order[name]
            elif name not in loaded:
                loaded.append(name)
            self.order[name] = None
        evicted: list[str] = []
        busy = set(names)
        for name in list(self.order):
            if len(self.order) <= self.capacity:
                break
            if name not in busy:
                del self.order[name]
                evicted.append(name)
        return loaded, evicted
