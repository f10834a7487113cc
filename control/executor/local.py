"""LocalExecutor: the :class:`~control.executor.base.Executor` of one machine, one worker
process per device (see :mod:`worker`), managed from the driver's process.

Public methods are called from the driver's event loop and never block on a worker: they update
state and write to a pipe under one lock. A pump thread reads every worker pipe, turns messages
into events, resolves futures and watches health (dead or silent workers are killed, their
in-flight items reported failed-retriable, and the worker restarted). Events reach the driver
through :meth:`events` (asyncio) or :meth:`poll` (synchronous callers), or to listeners. The
driver's loop may read the pipes itself instead of the pump thread (:meth:`attach`, see
:mod:`attach`): events then reach listeners on the loop's thread.

Exactly-once reporting: every submitted idempotency key gets one completion. A key already
completed (ok, or failed for good) is answered from the store with ``replayed=True`` and never
runs again; a key already in flight is not run a second time. Retriable failures are not stored,
so the core's retry under the same key does run.

The methods are spread over mixins only to keep modules small: loading replicas
(:mod:`loading`), moving work and recording completions (:mod:`pump`), the pump thread and
failed workers (:mod:`watch`).
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import itertools
import logging
import queue
import threading
from collections import OrderedDict
from collections.abc import AsyncIterator, Callable
from typing import Any

from control import clock
from control.executor.attach import AttachMixin
from control.executor.base import (
    BreakerChanged,
    DeviceInfo,
    ExecutorError,
    ExecutorEvent,
    ItemResult,
    LoadReport,
    ModelRef,
    TokenDelta,
    WorkerStatus,
)
from control.executor.breaker import CircuitBreaker
from control.executor.config import ExecutorConfig, _ParkedBatch, _PendingLoad
from control.executor.devices import discover_devices, keep_host_off_worker_cores, pin_process
from control.executor.loading import LoadingMixin
from control.executor.lru import ReplicaTable
from control.executor.pump import PumpMixin
from control.executor.supervisor import WorkerHandle
from control.executor.watch import WatchMixin
from control.executor.worker import WorkerConfig

log = logging.getLogger(__name__)


class LocalExecutor(AttachMixin, LoadingMixin, PumpMixin, WatchMixin):
    def __init__(
        self, config: ExecutorConfig = ExecutorConfig(), devices: list[DeviceInfo] | None = None
    ):
        self.config = config
        self._devices = devices
        self._lock = threading.RLock()
        self._ids = itertools.count()
        self._workers: dict[str, WorkerHandle] = {}
        self._replicas: dict[str, tuple[str, ModelRef]] = {}
        self._table = ReplicaTable()
        self._loads: dict[str, _PendingLoad] = {}
        self._unloads: dict[str, tuple[str, concurrent.futures.Future]] = {}
        self._requests: dict[str, tuple[str, concurrent.futures.Future | str]] = {}
        self._parked: dict[str, _ParkedBatch] = {}
        #: final results by key, pickled (see pump._store); those of the last pump tick may
        #: still be objects, listed in ``_unpacked`` until the pump packs them (see _pack_done)
        self._done: OrderedDict[str, bytes | ItemResult] = OrderedDict()
        self._unpacked: list[str] = []
        self._inflight_keys: dict[str, str] = {}
        self._output_at: dict[tuple[str, str], str] = {}
        #: outputs that came back with their results (``return_output``), until released
        self._returned: OrderedDict[tuple[str, str], object] = OrderedDict()
        #: finished runs whose outputs a worker still holds, told by the pump (see release_run)
        self._releases: dict[str, list[str]] = {}
        self.release_messages = 0  # "release" messages sent (each may name several runs)
        self._breakers: dict[str, CircuitBreaker] = {}
        self._item_ms: dict[str, float] = {}  # replica -> smoothed device ms per item
        self._listeners: list[Callable[[ExecutorEvent], None]] = []
        self._poll: queue.Queue | None = queue.Queue() if config.poll_queue else None
        self._stopping = threading.Event()
        self._pump: threading.Thread | None = None
        self._host_cores_before: set[int] | None = None
        self._watched: dict[int, Any] = {}  # fd -> pipe the attached loop reads (see attach)

    # ---- lifecycle ----------------------------------------------------------------------------

    def start(self) -> None:
        """Discover devices (unless given), keep this process off the CPU workers' cores
        (``keep_host_off_worker_cores``), spawn one worker per device, start the pump."""
        if self._devices is None:
            c = self.config
            self._devices = discover_devices(c.cpu_slots, c.memory_budget_mib, c.use_cuda)
        if self.config.keep_host_off_worker_cores:
            self._host_cores_before = keep_host_off_worker_cores(self._devices)
        wc = WorkerConfig(self.config.heartbeat_s, self.config.cache_dir, self.config.torch_threads)
        now = clock.monotonic()
        with self._lock:
            for dev in self._devices:
                handle = WorkerHandle(dev, wc)
                handle.start(now)
                self._workers[dev.device_id] = handle
        self._pump = threading.Thread(target=self._pump_loop, name="executor-pump", daemon=True)
        self._pump.start()

    def stop(self) -> None:
        """Stop every worker and the pump; pending futures resolve as failed."""
        self.detach()  # attached: the loop lets go of the pipes before they close
        self._stopping.set()
        if self._pump is not None:
            self._pump.join(timeout=5)
        with self._lock:
            for handle in self._workers.values():
                handle.stop()
            for pending in self._loads.values():
                pending.future.set_result(
                    LoadReport(pending.replica_id, pending.device_id, False, "executor stopped")
                )
            self._loads.clear()
        if self._host_cores_before is not None:
            pin_process(self._host_cores_before)
            self._host_cores_before = None

    def devices(self) -> list[DeviceInfo]:
        return list(self._devices or [])

    def wait_ready(self, timeout_s: float = 120.0) -> bool:
        """Block until every worker sent its first heartbeat (for tests and the CLI)."""
        deadline = clock.monotonic() + timeout_s
        while clock.monotonic() < deadline:
            with self._lock:
                if all(h.up for h in self._workers.values()):
                    return True
            self._stopping.wait(0.05)
        return False

    def worker_pid(self, device_id: str) -> int | None:
        return self._worker(device_id).pid

    def heartbeat(self) -> list[WorkerStatus]:
        now = clock.monotonic()
        with self._lock:
            return [h.status(now) for h in self._workers.values()]

    def breaker_state(self, replica_id: str) -> str:
        with self._lock:
            return self._breaker(replica_id).state

    # ---- events -------------------------------------------------------------------------------

    def poll(self, timeout: float) -> ExecutorEvent | None:
        if self._poll is None:
            raise ExecutorError("poll() needs ExecutorConfig.poll_queue=True")
        try:
            return self._poll.get(timeout=timeout)
        except queue.Empty:
            return None

    async def events(self) -> AsyncIterator[ExecutorEvent]:
        """Every event from now on, in order, delivered on the caller's event loop."""
        loop = asyncio.get_running_loop()
        inbox: asyncio.Queue[ExecutorEvent] = asyncio.Queue()

        def listener(event: ExecutorEvent) -> None:
            loop.call_soon_threadsafe(inbox.put_nowait, event)

        with self._lock:
            self._listeners.append(listener)
        try:
            while True:
                yield await inbox.get()
        finally:
            with self._lock:
                self._listeners.remove(listener)

    def add_listener(self, listener: Callable[[ExecutorEvent], None]) -> None:
        """Call ``listener(event)`` for every event from now on, ON THE PUMP THREAD, in order.
        It must not block (hand the event to a loop with ``call_soon_threadsafe``); this saves
        the extra hop through :meth:`events`'s queue and task."""
        with self._lock:
            self._listeners.append(listener)

    def remove_listener(self, listener: Callable[[ExecutorEvent], None]) -> None:
        with self._lock:
            if listener in self._listeners:
                self._listeners.remove(listener)

    def _emit(self, event: ExecutorEvent) -> None:
        if self._poll is not None:
            self._poll.put(event)
        for listener in list(self._listeners):
            listener(event)

    # ---- helpers ------------------------------------------------------------------------------

    def _worker(self, device_id: str) -> WorkerHandle:
        try:
            return self._workers[device_id]
        except KeyError:
            raise ExecutorError(
                f"device_id {device_id!r} is not one of {sorted(self._workers)}"
            ) from None

    def _breaker(self, replica_id: str) -> CircuitBreaker:
        if replica_id not in self._breakers:
            self._breakers[replica_id] = CircuitBreaker(self.config.breaker)
        return self._breakers[replica_id]

    def _send(self, handle: WorkerHandle, msg: tuple) -> bool:
        """Queue ``msg`` for the worker (never blocks the caller, who may hold the lock or
        run the driver's loop). False only when the pipe is known to be gone; a send that
        fails later is seen by the pump as a closed pipe (the worker's work is reported lost)."""
        return handle.send(msg)

    def _record_breaker(self, replica_id: str, ok: bool) -> None:
        changed = self._breaker(replica_id).record(ok, clock.monotonic())
        if changed is not None:
            reason = "probe succeeded" if changed == "closed" else "repeated batch failures"
            self._emit(BreakerChanged(replica_id, changed, reason))

    def _on_delta(self, handle: WorkerHandle, key: str, step, index: int, text: str) -> None:
        self._emit(TokenDelta(key, step, index, text))

    def _on_heartbeat(
        self, handle: WorkerHandle, pid: int, busy: bool, replicas, used: int
    ) -> None:
        from control.executor.base import WorkerUp

        if handle.on_heartbeat(clock.monotonic(), pid, busy, replicas, used):
            self._emit(WorkerUp(handle.device.device_id, pid, handle.restarts))


__all__ = ["ExecutorConfig", "LocalExecutor", "_ParkedBatch"]
