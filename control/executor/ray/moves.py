"""Bytes moved between actors, per consumer step: what the inputs held by another actor cost on
their way through Ray's object store (``ItemResult.moved_bytes``, measured by the consumer's
batch runner on arrival)."""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Iterable

from control.executor.protocol import ItemResult


class MoveLog:
    def __init__(self, capacity: int = 100_000) -> None:
        self.capacity = capacity
        self.moves = 0  # steps that got inputs from another actor
        self.bytes = 0  # their bytes
        self._per_step: OrderedDict[tuple[str, str], int] = OrderedDict()

    def record(self, results: Iterable[ItemResult]) -> None:
        """The results of a batch an actor ran: what moved to each of its steps."""
        for result in results:
            if result.moved_bytes:
                self.moves += 1
                self.bytes += result.moved_bytes
                key = (result.step.run_id, result.step.node_id)
                self._per_step[key] = self._per_step.get(key, 0) + result.moved_bytes
        while len(self._per_step) > self.capacity:
            self._per_step.popitem(last=False)

    def of_step(self, run_id: str, node_id: str) -> int:
        return self._per_step.get((run_id, node_id), 0)

    def release_run(self, run_id: str) -> None:
        for key in [k for k in self._per_step if k[0] == run_id]:
            del self._per_step[key]
