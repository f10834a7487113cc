"""What a local executor does with what its workers say, and on its periodic tick: the calls of
its one pipe reader (:mod:`control.executor.host.reader`), each under the executor's lock.

* :meth:`Inbound.on_message`: one message, handed to the component it is for (the table below:
  one bound method per message kind, built once);
* :meth:`Inbound.on_progress`: part of a message arrived: its worker is alive;
* :meth:`Inbound.on_closed`: a worker's pipe closed (it died): the worker is down;
* :meth:`Inbound.tick`: health (a worker found dead or hung is down), the output releases
  queued since the last tick, and packing the idempotency store: off the path of any result,
  while the reader waits.

A worker down is killed, everything it held is reported lost (its batches' items
failed-retriable, see :meth:`~control.executor.host.dispatch.Dispatch.worker_lost`), its
replicas, loads and outputs are forgotten, ``WorkerDown`` is emitted, and a fresh worker is
started whose pipe the same reader reads. The cause of each lost item says what happened to
ITS batch: when the worker hung, every batch it was running hung with it (``hang``: several when
batches joined one decode loop), while batches still queued behind them were only lost
(``worker_down``); when it crashed, all are ``worker_down``.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from typing import Any

from control.clock import Clock
from control.executor.host.dispatch import Dispatch
from control.executor.host.handle import WorkerHandle
from control.executor.host.idempotency import IdempotencyStore
from control.executor.host.outputs import OutputDirectory
from control.executor.host.replicas import ReplicaSet
from control.executor.host.transfers import Transfers
from control.executor.host.workers import Workers
from control.executor.protocol import ExecutorEvent, StepKey, TokenDelta, WorkerDown, wire

log = logging.getLogger(__name__)


class Inbound:
    def __init__(
        self,
        lock: threading.RLock,
        stopping: threading.Event,
        clock: Clock,
        *,
        workers: Workers,
        replicas: ReplicaSet,
        dispatch: Dispatch,
        store: IdempotencyStore,
        outputs: OutputDirectory,
        transfers: Transfers,
        emit: Callable[[ExecutorEvent], None],
    ) -> None:
        self._lock, self._stopping, self._now = lock, stopping, clock.monotonic
        self._workers, self._replicas, self._dispatch = workers, replicas, dispatch
        self._store, self._outputs, self._transfers = store, outputs, transfers
        self._emit = emit
        self._handlers: dict[str, Callable[..., None]] = {
            wire.HEARTBEAT: self._on_heartbeat,
            wire.LOADED: self._on_loaded,
            wire.LOAD_FAILED: lambda h, *a: replicas.on_load_failed(*a),
            wire.UNLOADED: lambda h, *a: replicas.on_unloaded(*a),
            wire.RESULTS: dispatch.on_results,
            wire.DELTA: self._on_delta,
            wire.EXPORTED: dispatch.on_exported,
            wire.FETCHED: lambda h, *a: transfers.on_fetched(*a),
            wire.STARTED: dispatch.on_started,
            wire.CANCELLED: dispatch.on_cancelled,
        }

    def on_message(self, handle: WorkerHandle, conn: Any, msg: tuple) -> bool:
        """Handle one message read from ``conn``; False when ``conn`` is no longer the
        handle's pipe (its worker was replaced: the message is stale, stop reading it)."""
        with self._lock:
            if handle.conn is not conn:
                return False
            handle.seen(self._now())
            try:
                self._handlers[msg[0]](handle, *msg[1:])
            except Exception:  # a bad message must not stop the reader: logged, and on
                log.exception("executor could not handle %r from %s", msg[0],
                              handle.device.device_id)  # fmt: skip
        return True

    def on_progress(self, handle: WorkerHandle, conn: Any) -> None:
        """Bytes of a message still arriving from ``conn``: its worker is alive (its
        heartbeats may be queued behind that message)."""
        with self._lock:
            if handle.conn is conn:
                handle.seen(self._now())

    def on_closed(self, handle: WorkerHandle, conn: Any) -> None:
        with self._lock:
            if handle.conn is conn:
                self.worker_down(handle, f"pipe closed ({handle.exit_status()})")

    def tick(self) -> None:
        with self._lock:
            for handle, cause, reason in self._workers.verdicts(self._replicas.loading_devices()):
                self.worker_down(handle, reason, cause)
            for device_id, run_ids in self._outputs.take_releases():
                self._workers.send(device_id, (wire.RELEASE, *run_ids))
            self._store.pack()

    def worker_down(self, handle: WorkerHandle, reason: str, cause: str = "worker_down") -> None:
        """Kill, report everything it held as lost, restart (see the module docstring).
        ``cause`` is the worker's: ``worker_down`` or ``hang``."""
        if self._stopping.is_set():
            return
        device_id = handle.device.device_id
        log.warning("worker %s down: %s", device_id, reason)
        hung = set(handle.running) if cause == "hang" else set()
        self._workers.take_down(handle)
        failed = self._dispatch.worker_lost(handle, reason, hung)
        lost = self._replicas.forget_device(device_id, reason)
        self._outputs.forget_device(device_id)
        for parked in self._transfers.forget_holder(device_id):
            self._dispatch.deliver(parked)  # without the inputs it held: "input lost" there
        self._emit(WorkerDown(device_id, reason, lost, tuple(failed)))
        self._workers.bring_up(handle)

    def _on_heartbeat(self, handle: WorkerHandle, *status: Any) -> None:
        up = self._workers.on_heartbeat(handle, *status)
        if up is not None:
            self._emit(up)

    def _on_loaded(self, handle: WorkerHandle, *loaded: Any) -> None:
        self._replicas.on_loaded(*loaded, handle.device.memory_budget_mib, self._now())

    def _on_delta(
        self, handle: WorkerHandle, key: str, step: StepKey, index: int, text: str
    ) -> None:
        self._emit(TokenDelta(key, step, index, text))
