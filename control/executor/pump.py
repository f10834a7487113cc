"""The work-moving half of :class:`~control.executor.local.LocalExecutor`: submitting batches,
moving inputs between workers, reading worker pipes, and handling dead or hung workers.

Everything here runs under the executor's lock, either from a public method (driver thread) or
from the pump thread. Kept apart from ``local.py`` only to keep modules small.
"""

from __future__ import annotations

import concurrent.futures
import logging
import multiprocessing.connection
from dataclasses import replace

from control.executor.base import (
    Batch,
    InputRef,
    ItemCompleted,
    ItemResult,
    LoadReport,
    WorkerDown,
)
from control.executor.config import _ParkedBatch
from control.runtime import clock

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
                    self._emit(ItemCompleted(replace(self._done[key], replayed=True)))
                elif key not in self._inflight_keys and key not in {
                    i.idempotency_key for i in fresh
                }:
                    fresh.append(item)
            if not fresh:
                return
            batch = replace(batch, items=tuple(fresh))
            if batch.replica_id not in self._replicas:
                return self._fail_items(batch, "?", f"replica {batch.replica_id} is not loaded")
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
        handle = self._workers[parked.device_id]
        moved = {k: v for k, v in parked.moved.items() if v is not None}
        handle.inflight[parked.batch.batch_id] = parked.batch
        if not self._send(handle, ("batch", parked.batch, moved)):
            handle.inflight.pop(parked.batch.batch_id, None)
            self._finish(
                parked.batch, self._failures(parked.batch, parked.device_id, "worker pipe closed")
            )

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
            if holder is None:
                future.set_exception(KeyError(f"no worker holds output {run_id}/{node_id}"))
                return future
            request_id = f"fetch-{next(self._ids)}"
            self._requests[request_id] = (holder, future)
            self._send(self._workers[holder], ("fetch", request_id, run_id, node_id))
        return future

    def _on_fetched(self, handle, request_id: str, value, error: str | None) -> None:
        _, future = self._requests.pop(request_id, (None, None))
        if isinstance(future, concurrent.futures.Future):
            if error:
                future.set_exception(KeyError(error))
            else:
                future.set_result(value)

    def release_run(self, run_id: str) -> None:
        """Drop every output of a finished run from the workers holding them."""
        with self._lock:
            holders = {d for (r, _), d in self._output_at.items() if r == run_id}
            for key in [k for k in self._output_at if k[0] == run_id]:
                del self._output_at[key]
            for device_id in holders:
                self._send(self._workers[device_id], ("release", run_id))

    # ---- completions --------------------------------------------------------------------------

    def _on_results(self, handle, batch_id: str, results: list[ItemResult]) -> None:
        batch = handle.inflight.pop(batch_id, None)
        self._finish(batch, results)

    def _finish(self, batch: Batch | None, results: list[ItemResult]) -> None:
        """Report results once each; store final ones; update breaker and LRU bookkeeping."""
        now = clock.monotonic()
        for result in results:
            self._inflight_keys.pop(result.idempotency_key, None)
            if result.ok or not result.retriable:
                self._done[result.idempotency_key] = result
                while len(self._done) > self.config.idempotency_capacity:
                    self._done.popitem(last=False)
            if result.ok:
                self._output_at[(result.step.run_id, result.step.node_id)] = result.device_id
            self._emit(ItemCompleted(result))
        if batch is not None:
            self._table.touch(batch.replica_id, now, -1)
            self._record_breaker(batch.replica_id, not any(r.retriable for r in results))

    def _failures(self, batch: Batch, device_id: str, reason: str) -> list[ItemResult]:
        return [
            ItemResult(
                step=item.step,
                idempotency_key=item.idempotency_key,
                replica_id=batch.replica_id,
                device_id=device_id,
                ok=False,
                error=reason,
                retriable=True,
                batch_size=len(batch.items),
            )
            for item in batch.items
        ]

    def _fail_items(self, batch: Batch, device_id: str, reason: str) -> None:
        for result in self._failures(batch, device_id, reason):
            self._emit(ItemCompleted(result))

    # ---- the pump thread ----------------------------------------------------------------------

    def _pump_loop(self) -> None:
        tick = self.config.heartbeat_s / 5
        while not self._stopping.is_set():
            with self._lock:
                conns = {h.conn: h for h in self._workers.values() if h.conn is not None}
            ready = multiprocessing.connection.wait(list(conns), timeout=tick) if conns else []
            if not conns:
                self._stopping.wait(tick)
            for conn in ready:
                handle = conns[conn]
                try:
                    msg = conn.recv()
                except (EOFError, OSError):
                    with self._lock:
                        if handle.conn is conn:
                            self._worker_down(handle, f"pipe closed ({_exit(handle)})")
                    continue
                with self._lock:
                    if handle.conn is conn:
                        self._dispatch(handle, msg)
            with self._lock:
                self._check_health()

    def _dispatch(self, handle, msg: tuple) -> None:
        handlers = {
            "hb": self._on_heartbeat,
            "loaded": self._on_loaded,
            "load_failed": self._on_load_failed,
            "unloaded": self._on_unloaded,
            "results": self._on_results,
            "delta": self._on_delta,
            "exported": self._on_exported,
            "fetched": self._on_fetched,
        }
        try:
            handlers[msg[0]](handle, *msg[1:])
        except Exception:  # a bad message must not kill the pump: log it and go on
            log.exception("executor could not handle %r from %s", msg[0], handle.device.device_id)

    def _check_health(self) -> None:
        now = clock.monotonic()
        for handle in self._workers.values():
            reason = handle.health(now, self.config.startup_grace_s)
            if reason is not None:
                self._worker_down(handle, reason)

    def _worker_down(self, handle, reason: str) -> None:
        """Kill, report everything it held as lost (items failed-retriable), restart."""
        if self._stopping.is_set():
            return
        device_id = handle.device.device_id
        log.warning("worker %s down: %s", device_id, reason)
        handle.kill()
        failed: list[str] = []
        for batch in list(handle.inflight.values()):
            results = self._failures(batch, device_id, f"worker {device_id} down: {reason}")
            failed.extend(r.idempotency_key for r in results)
            self._finish(batch, results)
        handle.inflight.clear()
        for batch_id, parked in list(self._parked.items()):
            if parked.device_id == device_id:
                del self._parked[batch_id]
                results = self._failures(parked.batch, device_id, f"worker {device_id} down")
                failed.extend(r.idempotency_key for r in results)
                self._finish(parked.batch, results)
        lost = self._forget_device(device_id, reason)
        self._emit(WorkerDown(device_id, reason, lost, tuple(failed)))
        handle.start(clock.monotonic())

    def _forget_device(self, device_id: str, reason: str) -> tuple[str, ...]:
        lost = tuple(sorted(r for r, (d, _) in self._replicas.items() if d == device_id))
        for replica_id in lost:
            del self._replicas[replica_id]
            self._table.remove(replica_id)
        for load_id, pending in list(self._loads.items()):
            if pending.device_id == device_id:
                del self._loads[load_id]
                self._table.remove(pending.replica_id)
                pending.future.set_result(
                    LoadReport(pending.replica_id, device_id, False, f"worker down: {reason}")
                )
        for replica_id, (holder, future) in list(self._unloads.items()):
            if holder == device_id:
                del self._unloads[replica_id]
                future.set_result(0)
        for key in [k for k, d in self._output_at.items() if d == device_id]:
            del self._output_at[key]
        for request_id, (holder, target) in list(self._requests.items()):
            if holder == device_id:
                if isinstance(target, concurrent.futures.Future):
                    del self._requests[request_id]
                    target.set_exception(KeyError(f"worker {device_id} down"))
                else:
                    self._on_exported(None, request_id, None, "holder down")
        return lost


def _exit(handle) -> str:
    proc = handle.process
    if proc is None:
        return "no process"
    proc.join(timeout=0.5)
    return f"exit code {proc.exitcode}"
