"""Bytes moved between actors, per consumer step: what an input held by another actor cost on
its way through Ray's object store (measured by the consumer on arrival)."""

from __future__ import annotations

from collections import OrderedDict

from control.executor.protocol import Batch, InputRef


class MoveLog:
    def __init__(self, capacity: int = 100_000) -> None:
        self.capacity = capacity
        self.moves = 0  # inputs moved between actors
        self.bytes = 0  # their bytes
        self._per_step: OrderedDict[tuple[str, str], int] = OrderedDict()

    def record(self, batch: Batch, sizes: dict[tuple[str, str, str], int]) -> None:
        """``sizes``: bytes of each moved input (run, node, field) of ``batch``."""
        if not sizes:
            return
        self.moves += len(sizes)
        self.bytes += sum(sizes.values())
        for item in batch.items:
            got = sum(sizes.get((v.run_id, v.node_id, v.field), 0)
                      for v in item.inputs.values() if isinstance(v, InputRef))  # fmt: skip
            if got:
                key = (item.step.run_id, item.step.node_id)
                self._per_step[key] = self._per_step.get(key, 0) + got
        while len(self._per_step) > self.capacity:
            self._per_step.popitem(last=False)

    def of_step(self, run_id: str, node_id: str) -> int:
        return self._per_step.get((run_id, node_id), 0)

    def release_run(self, run_id: str) -> None:
        for key in [k for k in self._per_step if k[0] == run_id]:
            del self._per_step[key]
