"""Batches from ``submit`` to their completion: the exactly-once path of a local executor.

Every submitted idempotency key completes once per submission. A key already completed (ok, or
failed for good) is answered from the :class:`~control.executor.host.idempotency.IdempotencyStore`
with ``replayed=True`` and never runs again; a key already in flight is not sent a second time;
retriable failures and cancels are not stored, so the core's retry under the same key does run.

A batch goes to its replica's worker at once, or is parked until inputs held by other workers
have been exported (:class:`~control.executor.host.transfers.Transfers`). It completes when its
worker reports it (``results``), when its items are cancelled before they started, or when its
worker is lost (every item failed-retriable). :meth:`Dispatch.finish` is the one place a result
is reported: it stores final ones, records where ok outputs are, emits ``ItemCompleted`` and
keeps the replica's breaker and LRU bookkeeping.

Not thread-safe: the executor calls it under its lock.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable
from dataclasses import replace

from control.clock import Clock
from control.executor.host.breaker import Breakers
from control.executor.host.config import ExecutorConfig
from control.executor.host.handle import ExpectedTimes, WorkerHandle
from control.executor.host.idempotency import IdempotencyStore
from control.executor.host.outputs import OutputDirectory
from control.executor.host.replicas import ReplicaSet
from control.executor.host.transfers import ParkedBatch, Transfers
from control.executor.host.workers import Workers
from control.executor.protocol import Batch, ExecutorEvent, ItemCompleted, ItemResult, wire

log = logging.getLogger(__name__)


class Dispatch:
    """The in-flight keys and the flow of batches, over the executor's other components."""

    def __init__(
        self,
        config: ExecutorConfig,
        clock: Clock,
        *,
        workers: Workers,
        replicas: ReplicaSet,
        breakers: Breakers,
        store: IdempotencyStore,
        outputs: OutputDirectory,
        transfers: Transfers,
        emit: Callable[[ExecutorEvent], None],
    ) -> None:
        self.config = config
        self._now = clock.monotonic
        self._workers, self._replicas, self._breakers = workers, replicas, breakers
        self._store, self._outputs, self._transfers = store, outputs, transfers
        self._emit = emit
        self._inflight: dict[str, str] = {}  # idempotency key -> batch id
        self._times = ExpectedTimes()  # of each replica's batches: their hang deadlines

    def in_flight(self) -> int:
        """Keys submitted and not completed yet."""
        return len(self._inflight)

    # ---- submitting

    def submit(self, batch: Batch) -> None:
        """See :meth:`~control.executor.protocol.Executor.submit`. Items of an unknown replica
        or behind an open breaker fail retriable (``unavailable``)."""
        now = self._now()
        fresh = []
        for item in batch.items:
            key = item.idempotency_key
            replayed = self._store.replay(key)
            if replayed is not None:
                self._emit(ItemCompleted(replayed))
            elif key not in self._inflight and key not in {i.idempotency_key for i in fresh}:
                fresh.append(item)
        if not fresh:
            return
        if len(fresh) != len(batch.items):  # the usual batch is sent as it came
            batch = replace(batch, items=tuple(fresh))
        device_id = self._replicas.device_of(batch.replica_id)
        if device_id is None:
            return self._refuse(batch, "?", f"replica {batch.replica_id} is not loaded")
        allowed, why = self._breakers.allow(batch.replica_id, now)
        if not allowed:
            return self._refuse(batch, device_id, why)
        for item in batch.items:
            self._inflight[item.idempotency_key] = batch.batch_id
        self._replicas.table.touch(batch.replica_id, now, +1)
        ready = self._transfers.route(batch, device_id)
        if ready is not None:
            self.deliver(ready)

    def deliver(self, parked: ParkedBatch) -> None:
        """Send a batch whose inputs are all at hand to its worker."""
        # Sent at once even when the worker is busy: a batch for a generate replica whose
        # decode loop is running joins it from the worker's inbox (continuous batching); any
        # other waits there in order, where a cancel can still take its items out.
        handle = self._workers[parked.device_id]
        batch = parked.batch
        # A worker with nothing of ours in flight starts the batch as it arrives: its hang
        # clock is armed here, and the worker is told not to announce it. Why: ``started``
        # cost the driver's loop one more wake-up and pipe read per batch (~0.1 ms of CPU).
        # A batch sent behind others still announces when it really starts (or joins).
        announce = bool(handle.inflight)
        handle.inflight[batch.batch_id] = batch
        if not announce:
            self._arm(handle, batch)
        if not handle.send((wire.BATCH, batch, parked.values(), announce)):
            handle.inflight.pop(batch.batch_id, None)
            handle.on_finished(batch.batch_id)
            self.finish(batch, failures(batch, parked.device_id, "worker pipe closed"))

    def _refuse(self, batch: Batch, device_id: str, reason: str) -> None:
        """Refused before reaching a worker (not loaded, breaker open): retriable elsewhere."""
        for result in failures(batch, device_id, reason, "unavailable"):
            self._emit(ItemCompleted(result))

    # ---- cancelling

    def cancel(self, idempotency_keys: Iterable[str]) -> None:
        """See :meth:`~control.executor.protocol.Executor.cancel`. Items of parked batches are
        taken out here at once; for batches already sent, their workers are asked."""
        by_device: dict[str, set[str]] = {}
        for key in set(idempotency_keys):
            batch_id = self._inflight.get(key)
            if batch_id is None:
                continue
            if self._transfers.is_parked(batch_id):
                device_id, gone, emptied = self._transfers.cancel(batch_id, key)
                reason = "cancelled before it started"
                self.finish(emptied, failures(gone, device_id, reason, "cancelled"))
                continue
            for handle in self._workers:
                if batch_id in handle.inflight:
                    by_device.setdefault(handle.device.device_id, set()).add(key)
        for device_id, keys in sorted(by_device.items()):
            self._workers.send(device_id, (wire.CANCEL, tuple(sorted(keys))))

    def on_cancelled(
        self, handle: WorkerHandle, batch_id: str, results: list[ItemResult], remaining: int
    ) -> None:
        batch = handle.inflight.get(batch_id)
        gone = {r.idempotency_key for r in results}
        if batch is not None and remaining:
            stay = tuple(i for i in batch.items if i.idempotency_key not in gone)
            handle.inflight[batch_id] = replace(batch, items=stay)
            batch = None  # still in flight: its LRU and breaker bookkeeping comes with results
        elif batch is not None:
            handle.inflight.pop(batch_id)
            handle.on_finished(batch_id)  # a guard: only batches still queued are cancelled
        self.finish(batch, results)

    # ---- what the workers report

    def on_exported(
        self, handle: WorkerHandle, request_id: str, payload: object, error: str | None
    ) -> None:
        ready = self._transfers.on_exported(request_id, payload)
        if ready is not None:
            self.deliver(ready)

    def on_started(self, handle: WorkerHandle, batch_id: str) -> None:
        """The worker began a batch, or took it into a running decode loop (continuous
        batching): arm ITS hang deadline, counted from now. The handle times every running
        batch against its own deadline."""
        batch = handle.inflight.get(batch_id)
        if batch is not None:
            self._arm(handle, batch)

    def _arm(self, handle: WorkerHandle, batch: Batch) -> None:
        """Time ``batch`` from now against its deadline (its expected time, or ours)."""
        c = self.config
        deadline = self._times.deadline_s(batch, c.hang_multiple, c.hang_floor_s)
        handle.on_started(batch.batch_id, self._now(), deadline)

    def on_results(self, handle: WorkerHandle, batch_id: str, results: list[ItemResult]) -> None:
        handle.on_finished(batch_id)
        batch = handle.inflight.pop(batch_id, None)
        if batch is not None:  # the expected time of this replica's next batches
            self._times.record(batch.replica_id, results)
        self.finish(batch, results)

    def worker_lost(self, handle: WorkerHandle, reason: str, hung: set[str]) -> list[str]:
        """Its worker was killed: fail every batch sent to it and every batch parked for it
        (retriable; ``hang`` for the batches in ``hung``, that were running when it hung).
        Returns the failed keys."""
        device_id = handle.device.device_id
        failed: list[str] = []
        for batch in list(handle.inflight.values()):
            why = "hang" if batch.batch_id in hung else "worker_down"
            results = failures(batch, device_id, f"worker {device_id} down: {reason}", why)
            failed.extend(r.idempotency_key for r in results)
            self.finish(batch, results)
        handle.inflight.clear()
        for batch in self._transfers.drop_parked_for(device_id):
            results = failures(batch, device_id, f"worker {device_id} down")
            failed.extend(r.idempotency_key for r in results)
            self.finish(batch, results)
        return failed

    # ---- completing

    def finish(self, batch: Batch | None, results: list[ItemResult]) -> None:
        """Report ``results`` once each (the batch, when given, has ended: its replica's LRU
        and breaker bookkeeping follow)."""
        now = self._now()
        if batch is not None:  # before the results: a breaker that opens is known to the
            # consumer before the failures it retries (never retried onto the open replica)
            self._replicas.table.touch(batch.replica_id, now, -1)
            ran = [r for r in results if r.cause != "cancelled"]
            if ran:  # only failures about the replica count (never a bad input)
                self._breakers.record_results(batch.replica_id, ran, now)
            else:  # every item cancelled: says nothing of the replica, but a probe is over
                self._breakers.of(batch.replica_id).settle()
        for result in results:
            self._inflight.pop(result.idempotency_key, None)
            self._store.keep(result)
            if result.ok:
                self._outputs.record(result)
            self._emit(ItemCompleted(result))


def failures(
    batch: Batch, device_id: str, reason: str, cause: str = "worker_down"
) -> list[ItemResult]:
    """Every item of ``batch`` failed with ``cause`` (retriable unless cancelled)."""
    return [
        ItemResult(
            step=item.step,
            idempotency_key=item.idempotency_key,
            replica_id=batch.replica_id,
            device_id=device_id,
            ok=False,
            error=reason,
            retriable=cause != "cancelled",
            batch_size=len(batch.items),
            cause=cause,
        )
        for item in batch.items
    ]
