"""The work-moving half of :class:`~control.executor.local.LocalExecutor`: submitting and
cancelling batches, moving inputs between workers, fetching outputs, recording completions
(the pump thread and dead or hung workers are in :mod:`watch`).

Everything here runs under the executor's lock, either from a public method (driver thread) or
from the pump thread. Kept apart from ``local.py`` only to keep modules small.
"""

from __future__ import annotations

import concurrent.futures
import copy
import logging
import pickle
from dataclasses import replace

from control import clock
from control.executor.base import (
    Batch,
    InputRef,
    ItemCompleted,
    ItemResult,
)
from control.executor.config import _ParkedBatch
from control.executor.supervisor import batch_deadline_s

log = logging.getLogger(__name__)


class PumpMixin:
    # ---- submitting ---------------------------------------------------------------------------

    def submit(self, batch: Batch) -> None:
        """Send a batch to its replica's worker. Never blocks; every item completes once.

        Items whose key already completed are answered from the store (``replayed=True``); items
        already in flight are not sent again; an unknown replica or an open breaker fails the
        items as retriable. Inputs held by another worker are fetched from it first.
        """
        now = clock.monotonic()
        with self._lock:
            fresh = []
            for item in batch.items:
                key = item.idempotency_key
                if key in self._done:
                    self._emit(ItemCompleted(replace(_unstore(self._done[key]), replayed=True)))
                elif key not in self._inflight_keys and key not in {
                    i.idempotency_key for i in fresh
                }:
                    fresh.append(item)
            if not fresh:
                return
            if len(fresh) != len(batch.items):  # the usual batch is sent as it came
                batch = replace(batch, items=tuple(fresh))
            if batch.replica_id not in self._replicas:
                reason = f"replica {batch.replica_id} is not loaded"
                return self._fail_items(batch, "?", reason)
            device_id, _ = self._replicas[batch.replica_id]
            allowed, why = self._breaker(batch.replica_id).allow(now)
            if not allowed:
                return self._fail_items(batch, device_id, why)
            for item in batch.items:
                self._inflight_keys[item.idempotency_key] = batch.batch_id
            self._table.touch(batch.replica_id, now, +1)
            self._route(batch, device_id)

    def _route(self, batch: Batch, device_id: str) -> None:
        """Send now, or park the batch until inputs held elsewhere have been exported."""
        parked = _ParkedBatch(device_id, batch, set())
        for item in batch.items:
            for ref in item.inputs.values():
                if not isinstance(ref, InputRef):
                    continue
                holder = self._output_at.get((ref.run_id, ref.node_id))
                if holder is None or holder == device_id:
                    continue  # held locally, or lost: the worker reports "input lost"
                request_id = f"exp-{next(self._ids)}"
                key = (ref.run_id, ref.node_id, ref.field)
                self._requests[request_id] = (holder, (batch.batch_id, key))
                parked.waiting.add(request_id)
                self._send(
                    self._workers[holder],
                    ("export", request_id, ref.run_id, ref.node_id, ref.field),
                )
                parked.moved.setdefault(key, None)
        if parked.waiting:
            self._parked[batch.batch_id] = parked
        else:
            self._deliver(parked)

    def _deliver(self, parked) -> None:
        # Sent at once even when the worker is busy: a batch for a generate replica whose
        # decode loop is running joins it from the worker's inbox (continuous batching); any
        # other waits there in order, where a cancel can still take its items out.
        handle = self._workers[parked.device_id]
        moved = {k: v for k, v in parked.moved.items() if v is not None}
        batch = parked.batch
        # A worker with nothing of ours in flight starts the batch as it arrives: its hang
        # clock is armed here, and the worker is told not to announce it. Why: ``started``
        # cost the driver's loop one more wake-up and pipe read per batch (~0.1 ms of CPU).
        # A batch sent behind others still announces when it really starts (or joins).
        announce = bool(handle.inflight)
        handle.inflight[batch.batch_id] = batch
        if not announce:
            self._arm(handle, batch)
        if not self._send(handle, ("batch", batch, moved, announce)):
            handle.inflight.pop(batch.batch_id, None)
            handle.on_finished(batch.batch_id)
            fails = self._failures(batch, parked.device_id, "worker pipe closed")
            self._finish(batch, fails)

    # ---- cancelling ---------------------------------------------------------------------------

    def cancel(self, idempotency_keys) -> None:  # noqa: ANN001 - Iterable[str]
        """Best effort: items not yet started come back failed with cause ``cancelled``.

        Items of batches parked here (waiting for inputs) are taken out at once; for batches
        already sent, the worker takes them out of its inbox if they have not started. Running
        items finish normally. Never blocks; unknown or finished keys are ignored.
        """
        with self._lock:
            by_device: dict[str, set[str]] = {}
            for key in set(idempotency_keys):
                batch_id = self._inflight_keys.get(key)
                if batch_id is None:
                    continue
                if batch_id in self._parked:
                    self._cancel_parked(batch_id, key)
                    continue
                for device_id, handle in self._workers.items():
                    if batch_id in handle.inflight:
                        by_device.setdefault(device_id, set()).add(key)
            for device_id, keys in sorted(by_device.items()):
                self._send(self._workers[device_id], ("cancel", tuple(sorted(keys))))

    def _cancel_parked(self, batch_id: str, key: str) -> None:
        parked = self._parked[batch_id]
        gone = [i for i in parked.batch.items if i.idempotency_key == key]
        stay = tuple(i for i in parked.batch.items if i.idempotency_key != key)
        results = self._failures(replace(parked.batch, items=tuple(gone)), parked.device_id,
                                 "cancelled before it started", "cancelled")  # fmt: skip
        if stay:
            parked.batch = replace(parked.batch, items=stay)
            self._finish(None, results)
        else:
            del self._parked[batch_id]  # exports still on their way are then ignored
            self._finish(parked.batch, results)

    def _on_cancelled(self, handle, batch_id: str, results, remaining: int) -> None:
        batch = handle.inflight.get(batch_id)
        gone = {r.idempotency_key for r in results}
        if batch is not None and remaining:
            stay = tuple(i for i in batch.items if i.idempotency_key not in gone)
            handle.inflight[batch_id] = replace(batch, items=stay)
            batch = None  # still in flight: its LRU and breaker bookkeeping comes with results
        elif batch is not None:
            handle.inflight.pop(batch_id)
            handle.on_finished(batch_id)  # a guard: only batches still queued are cancelled
        self._finish(batch, results)

    def _on_exported(self, handle, request_id: str, payload, error: str | None) -> None:
        _, target = self._requests.pop(request_id, (None, (None, None)))
        batch_id, key = target
        parked = self._parked.get(batch_id)
        if parked is None:
            return
        parked.waiting.discard(request_id)
        if payload is not None:
            parked.moved[key] = payload
        if not parked.waiting:
            del self._parked[batch_id]
            self._deliver(parked)

    # ---- outputs ------------------------------------------------------------------------------

    def fetch_output(self, run_id: str, node_id: str) -> concurrent.futures.Future:
        """Future of the full output dict of a completed step (tensors as lists)."""
        future: concurrent.futures.Future = concurrent.futures.Future()
        with self._lock:
            holder = self._output_at.get((run_id, node_id))
            if holder is None and (run_id, node_id) not in self._returned:
                future.set_exception(KeyError(f"no worker holds output {run_id}/{node_id}"))
                return future
            returned = self._returned.get((run_id, node_id))
            if returned is not None:  # came back with its result: no round trip to the worker
                future.set_result(returned)
                return future
            request_id = f"fetch-{next(self._ids)}"
            self._requests[request_id] = (holder, future)
            self._send(self._workers[holder], ("fetch", request_id, run_id, node_id))
        return future

    def returned_output(self, run_id: str, node_id: str) -> dict | None:
        """The full output of a completed step that came back with its result, or None
        (then ask ``fetch_output``). No future to build and resolve: a finished run's outputs
        are usually at hand."""
        with self._lock:
            return self._returned.get((run_id, node_id))

    def _on_fetched(self, handle, request_id: str, value, error: str | None) -> None:
        _, future = self._requests.pop(request_id, (None, None))
        if isinstance(future, concurrent.futures.Future):
            if error:
                future.set_exception(KeyError(error))
            else:
                future.set_result(value)

    def release_run(self, run_id: str) -> None:
        """Drop every output of a finished run. The executor forgets them at once (a fetch
        fails from now on); the workers holding them are told by the pump thread at its next
        turn (within a tick), several runs per message. Why: the message is then not on the
        finished run's way back to its caller, and a worker is woken once for many runs."""
        with self._lock:
            holders = {d for (r, _), d in self._output_at.items() if r == run_id}
            for key in [k for k in self._output_at if k[0] == run_id]:
                del self._output_at[key]
            for key in [k for k in self._returned if k[0] == run_id]:
                del self._returned[key]
            for device_id in holders:
                self._releases.setdefault(device_id, []).append(run_id)

    def _send_releases(self) -> None:
        """Tell each worker which finished runs' outputs to drop (pump thread, under lock)."""
        releases, self._releases = self._releases, {}
        for device_id, run_ids in sorted(releases.items()):
            handle = self._workers.get(device_id)
            if handle is not None:
                self._send(handle, ("release", *run_ids))
                self.release_messages += 1

    # ---- completions --------------------------------------------------------------------------

    def _on_started(self, handle, batch_id: str) -> None:
        """The worker began a batch, or took it into a running decode loop (continuous
        batching): arm ITS hang deadline (its expected time, or ours), counted from now. The
        handle times every running batch against its own deadline (see ``WorkerHandle``)."""
        batch = handle.inflight.get(batch_id)
        if batch is not None:
            self._arm(handle, batch)

    def _arm(self, handle, batch: Batch) -> None:
        """Time ``batch`` from now against its deadline (its expected time, or ours)."""
        expected = batch.expected_ms
        if expected is None and batch.replica_id in self._item_ms:
            expected = self._item_ms[batch.replica_id] * len(batch.items)
        c = self.config
        deadline = batch_deadline_s(expected, c.hang_multiple, c.hang_floor_s)
        handle.on_started(batch.batch_id, clock.monotonic(), deadline)

    def _on_results(self, handle, batch_id: str, results: list[ItemResult]) -> None:
        handle.on_finished(batch_id)
        batch = handle.inflight.pop(batch_id, None)
        ran = [r for r in results if r.ok]
        if batch is not None and ran:
            # ms per item, smoothed: the expected time of this replica's next batches
            per_item = ran[0].device_ms / max(1, ran[0].batch_size)
            old = self._item_ms.get(batch.replica_id, per_item)
            self._item_ms[batch.replica_id] = 0.8 * old + 0.2 * per_item
        self._finish(batch, results)

    def _finish(self, batch: Batch | None, results: list[ItemResult]) -> None:
        """Report results once each; store final ones (never a cancel: a later submit of the
        key runs); update breaker and LRU bookkeeping."""
        now = clock.monotonic()
        for result in results:
            self._inflight_keys.pop(result.idempotency_key, None)
            final = not result.retriable and result.cause != "cancelled"
            if result.ok or final:
                # the store answers replays. Kept as the object until the pump's next tick
                # packs it (see _pack_done): pickling it here cost ~1/20 of the driver's CPU
                # per run, on the way of the result to its caller.
                self._done[result.idempotency_key] = result
                self._unpacked.append(result.idempotency_key)
                while len(self._done) > self.config.idempotency_capacity:
                    self._done.popitem(last=False)
            if result.ok:
                where = (result.step.run_id, result.step.node_id)
                self._output_at[where] = result.device_id
                if result.output is not None:
                    self._returned[where] = result.output
                    while len(self._returned) > self.config.idempotency_capacity:
                        self._returned.popitem(last=False)
            self._emit(ItemCompleted(result))
        if batch is not None:
            self._table.touch(batch.replica_id, now, -1)
            ran = [r for r in results if r.cause != "cancelled"]
            if ran:
                self._record_breaker(batch.replica_id, not any(r.retriable for r in ran))

    def _pack_done(self) -> None:
        """Pickle the final results stored since the last call (pump thread, under lock, at
        each tick: off the loop's path, while it waits for the next call). A key evicted or
        already packed meanwhile is skipped."""
        keys, self._unpacked = self._unpacked, []
        for key in keys:
            stored = self._done.get(key)
            if stored is not None and not isinstance(stored, bytes):
                self._done[key] = _store(stored)  # same key: its place in the order stays

    def _failures(
        self, batch: Batch, device_id: str, reason: str, cause: str = "worker_down"
    ) -> list[ItemResult]:
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

    def _fail_items(self, batch: Batch, device_id: str, reason: str) -> None:
        """Refused before reaching a worker (not loaded, breaker open): retriable elsewhere."""
        for result in self._failures(batch, device_id, reason, "unavailable"):
            self._emit(ItemCompleted(result))


def _store(result: ItemResult) -> bytes:
    """A final result as the idempotency store keeps it: pickled, without its output copy.
    Why bytes: the store holds up to ``idempotency_capacity`` results (100,000 by default) for
    the life of the process, and as objects (a result and its step key each) every one of them
    was rescanned by each full garbage collection of the driver's process, whose pauses grew
    with the store (8 -> 56 ms over a few minutes of serving); bytes are not tracked at all."""
    if result.output is not None:
        # a shallow copy with the one field cleared: the same object ``replace`` would build,
        # more cheaply (``copy`` passes the fields to ``__init__`` by position, ``replace`` by
        # keyword: ItemResult copies and pickles by its fields, see control.core.frozen)
        result = copy.copy(result)
        object.__setattr__(result, "output", None)
    return pickle.dumps(result, protocol=pickle.HIGHEST_PROTOCOL)


def _unstore(stored: bytes | ItemResult) -> ItemResult:
    """A stored result as a replay answers it (without its output copy), packed or not."""
    if isinstance(stored, bytes):
        return pickle.loads(stored)
    return replace(stored, output=None) if stored.output is not None else stored
