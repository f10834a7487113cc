"""The idempotency store: the final result of every completed key, so that a key submitted again
is answered (``replayed=True``) instead of run again.

Final means ok, or failed for good (not retriable, not cancelled): a retriable failure or a
cancel is never stored, so the core's retry under the same key does run. The store holds up to
``capacity`` keys, oldest out first, and forgets a run's keys when the run is released
(:meth:`IdempotencyStore.release_run`, called with the executor's own ``release_run``).

Why a run's keys go at its release: a replay guards the steps of a run that is still going (a
retry under the same key after a lost answer, a duplicate submit); once the run has ended and
its outputs are released, no step of it is submitted again (a client's retry with the same
``Idempotency-Key`` is answered by the gateway's request record, and a recomputation runs under
a fresh attempt key), and a replay could not hand back its output anyway. Kept for the life of
the process, the 100,000 results were the largest structure left growing in the 20-minute
soak (~520 B each, filling for minutes after warm-up).

A key here is a step's idempotency key as the core built it, which is namespaced by tenant
(:func:`control.core.runs.step_key_base`): two tenants sending one ``Idempotency-Key`` never
share a key here, so one tenant's run is never answered with another's result.

Results are kept pickled (:func:`pack_result`). Why bytes: the store holds up to 100,000 results
for the life of the process, and as objects (a result and its step key each) every one of them
was rescanned by each full garbage collection of the driver's process, whose pauses grew with
the store (8 -> 56 ms over a few minutes of serving); bytes are not tracked at all. A result is
kept as the object until the next :meth:`IdempotencyStore.pack` (the executor's periodic tick):
pickling it at once cost ~1/20 of the driver's CPU per run, on the way of the result to its
caller. Not thread-safe: the executor calls it under its lock.
"""

from __future__ import annotations

import copy
import pickle
from collections import OrderedDict
from dataclasses import replace

from control.executor.protocol import ItemResult


class IdempotencyStore:
    def __init__(self, capacity: int) -> None:
        self.capacity = capacity
        self._done: OrderedDict[str, bytes | ItemResult] = OrderedDict()
        self._unpacked: list[str] = []  # keys kept as objects since the last pack()
        # run id -> its stored keys, oldest run first (bounded like the keys themselves)
        self._by_run: OrderedDict[str, list[str]] = OrderedDict()

    def __contains__(self, key: str) -> bool:
        return key in self._done

    def __len__(self) -> int:
        return len(self._done)

    def keys(self) -> list[str]:
        """The stored keys, oldest first."""
        return list(self._done)

    def replay(self, key: str) -> ItemResult | None:
        """The stored result of ``key`` as a replay answers it (``replayed=True``, without its
        output copy), or None when the key has no final result."""
        stored = self._done.get(key)
        if stored is None:
            return None
        return replace(unpack_result(stored), replayed=True)

    def keep(self, result: ItemResult) -> None:
        """Store ``result`` if it is final (see the module docstring); evict the oldest keys
        beyond the capacity."""
        if not (result.ok or (not result.retriable and result.cause != "cancelled")):
            return
        key = result.idempotency_key
        self._done[key] = result
        self._unpacked.append(key)
        run_keys = self._by_run.get(result.step.run_id)
        if run_keys is None:
            run_keys = self._by_run[result.step.run_id] = []
        run_keys.append(key)
        while len(self._done) > self.capacity:
            self._done.popitem(last=False)
        while len(self._by_run) > self.capacity:
            self._by_run.popitem(last=False)

    def release_run(self, run_id: str) -> int:
        """Forget the stored results of a run that ended (see the module docstring); how many
        were forgotten. A result of the run that completes later is stored again (a step
        finishing after its run was cancelled) and goes with the oldest keys."""
        forgotten = 0
        for key in self._by_run.pop(run_id, ()):
            if self._done.pop(key, None) is not None:
                forgotten += 1
        return forgotten

    def pack(self) -> None:
        """Pickle the results kept since the last call. A key evicted or packed meanwhile is
        skipped; a key keeps its place in the order."""
        keys, self._unpacked = self._unpacked, []
        for key in keys:
            stored = self._done.get(key)
            if stored is not None and not isinstance(stored, bytes):
                self._done[key] = pack_result(stored)

    def stored(self, key: str) -> bytes | ItemResult | None:
        """The stored form of ``key`` (bytes once packed), for tests of the packing."""
        return self._done.get(key)


def pack_result(result: ItemResult) -> bytes:
    """A final result as the store keeps it: pickled, without its output copy."""
    if result.output is not None:
        # a shallow copy with the one field cleared: the same object ``replace`` would build,
        # more cheaply (``copy`` passes the fields to ``__init__`` by position, ``replace`` by
        # keyword: ItemResult copies and pickles by its fields, see control.core.values)
        result = copy.copy(result)
        object.__setattr__(result, "output", None)
    return pickle.dumps(result, protocol=pickle.HIGHEST_PROTOCOL)


def unpack_result(stored: bytes | ItemResult) -> ItemResult:
    """A stored result (packed or not) as a replay answers it, without its output copy."""
    if isinstance(stored, bytes):
        return pickle.loads(stored)
    return replace(stored, output=None) if stored.output is not None else stored
