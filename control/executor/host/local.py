"""LocalExecutor: the :class:`~control.executor.protocol.Executor` of one machine, one worker
process per device (:mod:`control.executor.worker`), managed from the driver's process.

It is built from components, each owning its own state: the worker processes and their health
(:class:`~.workers.Workers`), the replicas and their memory (:class:`~.replicas.ReplicaSet`),
the breakers (:class:`~.breaker.Breakers`), the idempotency store
(:class:`~.idempotency.IdempotencyStore`), where outputs are
(:class:`~.outputs.OutputDirectory`) and how they move (:class:`~.transfers.Transfers`), the
flow of batches (:class:`~.dispatch.Dispatch`), what the workers say (:class:`~.inbound.Inbound`)
and who hears the events (:class:`~.hub.EventHub`). The components are not thread-safe; this
class is the one concurrency boundary: its public methods and the pipe reader's calls each hold
the executor's lock while they run. None of them blocks on a worker (sends never block, see
:mod:`~.sender`).

One reader per worker pipe, chosen at :meth:`LocalExecutor.start` (:mod:`~.reader`): the event
loop given there, or a thread of the executor's own. Time is read through the :class:`Clock`
given at construction (tests drive a ``ManualClock``).
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import threading
from collections.abc import AsyncIterator, Callable, Iterable
from dataclasses import replace
from pathlib import Path

from control.clock import SYSTEM_CLOCK, Clock
from control.executor.host.breaker import Breakers
from control.executor.host.config import ExecutorConfig
from control.executor.host.devices import discover_devices, keep_host_off_worker_cores, pin_process
from control.executor.host.dispatch import Dispatch
from control.executor.host.hub import EventHub
from control.executor.host.idempotency import IdempotencyStore
from control.executor.host.inbound import Inbound
from control.executor.host.outputs import OutputDirectory
from control.executor.host.reader import LoopReader, ThreadReader
from control.executor.host.replicas import ReplicaSet, estimate_mib
from control.executor.host.transfers import Transfers
from control.executor.host.workers import Workers
from control.executor.protocol import (
    Batch,
    DeviceInfo,
    EventListener,
    ExecutorError,
    ExecutorEvent,
    LoadReport,
    ModelRef,
    WorkerStatus,
)
from control.executor.protocol.executor import replica_devices


class LocalExecutor:
    def __init__(
        self,
        config: ExecutorConfig = ExecutorConfig(),
        devices: list[DeviceInfo] | None = None,
        clock: Clock = SYSTEM_CLOCK,
    ) -> None:
        self.config = config
        self._devices = devices
        self._now = clock.monotonic
        self._lock = threading.RLock()
        self._stopping = threading.Event()
        self._started = False
        self._host_cores_before: set[int] | None = None
        self._hub = EventHub(config.poll_queue)
        emit = self._hub.emit
        self._workers = Workers(config, clock)
        self._replicas = ReplicaSet(self._workers.send, emit)
        self._breakers = Breakers(config.breaker, emit)
        self._store = IdempotencyStore(config.idempotency_capacity)
        self._outputs = OutputDirectory(config.idempotency_capacity)
        self._transfers = Transfers(self._outputs, self._workers.send)
        parts = dict(workers=self._workers, replicas=self._replicas, store=self._store,
                     outputs=self._outputs, transfers=self._transfers, emit=emit)  # fmt: skip
        self._dispatch = Dispatch(config, clock, breakers=self._breakers, **parts)
        self._inbound = Inbound(self._lock, self._stopping, clock, dispatch=self._dispatch, **parts)

    # ---- lifecycle

    def start(
        self,
        on_event: EventListener | None = None,
        *,
        loop: asyncio.AbstractEventLoop | None = None,
        after_events: Callable[[], None] | None = None,
    ) -> None:
        """Discover devices (unless given), keep this process off the CPU workers' cores
        (``keep_host_off_worker_cores``), spawn one worker per device, and read their pipes on
        ``loop`` (call this on it) or, without one, on a reader thread. See the Protocol for
        ``on_event`` and ``after_events``. Once only."""
        if self._started:
            raise ExecutorError("start() was already called on this executor")
        self._started = True
        if self._devices is None:
            c = self.config
            self._devices = discover_devices(c.cpu_slots, c.memory_budget_mib, c.use_cuda)
        if self.config.keep_host_off_worker_cores:
            self._host_cores_before = keep_host_off_worker_cores(self._devices)
        if on_event is not None:
            self._hub.subscribe(on_event)
        inbound = self._inbound
        calls = (inbound.on_message, inbound.on_closed, inbound.tick, self._workers.tick_s)
        progress = inbound.on_progress
        reader = (LoopReader(loop, *calls, after_events, on_progress=progress) if loop is not None
                  else ThreadReader(*calls, after_events, on_progress=progress))  # fmt: skip
        with self._lock:
            self._workers.start(self._devices, reader)

    def stop(self) -> None:
        """Stop reading, stop every worker; pending loads resolve as failed."""
        self._stopping.set()
        self._workers.close_reader()  # not under the lock: a loop reader hops onto its loop
        with self._lock:
            self._workers.stop_all()
            self._replicas.fail_loads("executor stopped")
        if self._host_cores_before is not None:
            pin_process(self._host_cores_before)
            self._host_cores_before = None

    def wait_ready(self, timeout_s: float = 120.0) -> bool:
        """Block until every worker sent its first heartbeat (not on the reading loop)."""
        deadline = self._now() + timeout_s
        while self._now() < deadline:
            with self._lock:
                if self._workers.all_up():
                    return True
            self._stopping.wait(0.05)
        return False

    def devices(self) -> list[DeviceInfo]:
        return list(self._devices or [])

    def worker_pid(self, device_id: str) -> int | None:
        with self._lock:
            return self._workers[device_id].pid

    def heartbeat(self) -> list[WorkerStatus]:
        """The workers' statuses, each with the multi-device replicas that hold its device."""
        with self._lock:
            out = []
            for s in self._workers.statuses():
                held = self._replicas.held_on(s.device_id)
                out.append(replace(s, replicas=tuple(sorted({*s.replicas, *(r for r, _ in held)})),
                                   used_mib=s.used_mib + sum(m for _, m in held)) if held else s)  # fmt: skip
            return out

    def breaker_state(self, replica_id: str) -> str:
        with self._lock:
            return self._breakers.of(replica_id).state

    @property
    def release_messages(self) -> int:
        """Release messages sent so far (each may name several runs)."""
        return self._outputs.release_messages

    # ---- replicas

    def load(
        self, replica_id: str, model_ref: ModelRef, device_id: str, *, group: tuple[str, ...] = ()
    ) -> concurrent.futures.Future[LoadReport]:
        """See the Protocol. A replica of a group of k devices runs on ``device_id`` (the model
        code here does not shard) and holds its MiB on each of the k (their statuses list it)."""
        budgets = {d: self._workers[d].device.memory_budget_mib  # raises for a bad device
                   for d in replica_devices(device_id, group)}  # fmt: skip
        need = estimate_mib(model_ref, Path(self.config.cache_dir))  # reads the disk: unlocked
        with self._lock:
            return self._replicas.load(replica_id, model_ref, budgets, need, self._now())

    def unload(self, replica_id: str) -> concurrent.futures.Future[int]:
        with self._lock:
            return self._replicas.unload(replica_id)

    # ---- work

    def submit(self, batch: Batch) -> None:
        with self._lock:
            self._dispatch.submit(batch)

    def cancel(self, idempotency_keys: Iterable[str]) -> None:
        with self._lock:
            self._dispatch.cancel(idempotency_keys)

    # ---- outputs

    def fetch_output(self, run_id: str, node_id: str) -> concurrent.futures.Future[dict]:
        with self._lock:
            returned = self._outputs.returned(run_id, node_id)
            holder = self._outputs.holder(run_id, node_id)
            if returned is None and holder is not None:
                return self._transfers.fetch(holder, run_id, node_id)
        future: concurrent.futures.Future[dict] = concurrent.futures.Future()
        if returned is not None:  # came back with its result: no round trip to the worker
            future.set_result(returned)  # type: ignore[arg-type]
        else:
            future.set_exception(KeyError(f"no worker holds output {run_id}/{node_id}"))
        return future

    def returned_output(self, run_id: str, node_id: str) -> dict | None:
        with self._lock:
            return self._outputs.returned(run_id, node_id)  # type: ignore[return-value]

    def release_run(self, run_id: str) -> None:
        with self._lock:
            self._outputs.release_run(run_id)
            self._store.release_run(run_id)

    # ---- events

    def poll(self, timeout: float) -> ExecutorEvent | None:
        return self._hub.poll(timeout)

    def events(self) -> AsyncIterator[ExecutorEvent]:
        return self._hub.events()
