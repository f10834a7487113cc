"""RayExecutor: the :class:`~control.executor.protocol.Executor` over a Ray cluster, one actor
per device on every node (:mod:`.cluster`), the model code the local workers run (:mod:`.actor`).

Selected by settings (``LEGATO_EXECUTOR=ray``, ``LEGATO_RAY_ADDRESS``; see
:mod:`control.wiring.executor`). Nodes that join or leave while it runs: :mod:`.membership`
(``DeviceJoined``; ``WorkerDown``). The batch flow and lost actors are in :mod:`.flow`, actors
that stop answering their status call in :mod:`.silence`. Ray's completions are handled on one
thread of its own (:mod:`.pump`), which delivers events to the loop given to ``start`` or,
without one, itself. Its public methods and that thread each hold the executor's lock while
they run; none waits on an actor.

Its settings: :mod:`.config`. Multi-device replicas: :mod:`.groups`. Not yet here: hang
deadlines and breakers per replica, eviction to make room (a load that does not fit is
refused), streamed text as it is produced.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import threading
from collections.abc import AsyncIterator, Callable, Iterable
from pathlib import Path
from typing import Any

import ray

from control.clock import SYSTEM_CLOCK, Clock
from control.executor.host.hub import EventHub
from control.executor.host.replicas import estimate_mib
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
from control.executor.ray import cluster, groups
from control.executor.ray.config import RayExecutorConfig
from control.executor.ray.flow import Flow
from control.executor.ray.groups import settle as _settle_load
from control.executor.ray.membership import Membership, NodeWatch
from control.executor.ray.pump import Pump
from control.executor.ray.silence import StatusDeadlines
from control.executor.ray.slots import Slot


class RayExecutor:
    def __init__(self, config: RayExecutorConfig = RayExecutorConfig(),
                 clock: Clock = SYSTEM_CLOCK) -> None:  # fmt: skip
        self.config = config
        self._now = clock.monotonic
        self._lock = threading.RLock()
        self._hub = EventHub(config.poll_queue)
        self._deadlines = StatusDeadlines.of(config)
        self._pump = Pump(self._lock, self._tick, self._deadlines.check_s)
        options = dict(cache_dir=str(Path(config.cache_dir).resolve()),
                       torch_threads=config.torch_threads, max_held=config.max_held_outputs)  # fmt: skip
        self._flow = Flow(self._pump, options, self._now, config.idempotency_capacity)
        self._flow.on_lost = self._fail_loads
        self._loads: dict[str, tuple[str, concurrent.futures.Future]] = {}  # replica -> (dev, f)
        self._groups = groups.Groups()  # the placement groups of multi-device replicas
        self._after: Callable[[], None] | None = None
        self._started = self._connected = False
        self._here = ""
        self._nodes: NodeWatch  # from start: the nodes joining and leaving (.membership)

    # ---- lifecycle

    def start(self, on_event: EventListener | None = None, *,
              loop: asyncio.AbstractEventLoop | None = None,
              after_events: Callable[[], None] | None = None) -> None:  # fmt: skip
        """Connect (or start a local head), find the devices, start one actor per device; the
        node table is read again on every tick (:mod:`.membership`)."""
        if self._started:
            raise ExecutorError("start() was already called on this executor")
        self._started = True
        self._connected = cluster.connect(self.config.ray)
        if on_event is not None:
            self._hub.subscribe(on_event)
        self._after = after_events
        driver = cluster.driver_node()
        nodes = ray.nodes()
        self._here = next(
            (str(n["NodeManagerAddress"]) for n in nodes if n["NodeID"] == driver), ""
        )
        gpu_mib = self.config.ray.gpu_memory_mib
        if not gpu_mib and any(n.get("Resources", {}).get("GPU") for n in nodes if n.get("Alive")):
            gpu_node = next(n["NodeID"] for n in nodes if n.get("Resources", {}).get("GPU"))
            gpu_mib = cluster.gpu_memory_mib(gpu_node)
        with self._lock:
            self._nodes = NodeWatch(self._flow, self._pump, Membership(driver, gpu_mib))
            self._nodes.begin(nodes)
        self._pump.start(self._deliver, loop)

    def _deliver(self, events: list[ExecutorEvent]) -> None:
        for event in events:
            self._hub.emit(event)
        if self._after is not None:
            self._after()

    def wait_ready(self, timeout_s: float = 120.0) -> bool:
        deadline = self._now() + timeout_s
        while self._now() < deadline:
            with self._lock:
                if all(s.up or s.gone for s in self._flow.slots.values()):
                    return True
            threading.Event().wait(0.05)
        return False

    def stop(self) -> None:
        with self._lock:
            self._flow.stopping = True
            slots = list(self._flow.slots.values())
            for replica_id, (_, future) in list(self._loads.items()):
                _settle_load(future, LoadReport(replica_id, "?", False, "executor stopped"))
            self._loads.clear()
        self._pump.stop()
        for slot in slots:
            if slot.actor is not None:
                ray.kill(slot.actor, no_restart=True)
        if self._connected:
            ray.shutdown()

    def devices(self) -> list[DeviceInfo]:
        """Those of ``start`` and those that joined since (a node that left keeps its own)."""
        with self._lock:
            return [s.device for s in self._flow.slots.values()]

    def worker_pid(self, device_id: str) -> int | None:
        with self._lock:
            slot = self._slot(device_id)
            return slot.pid if dict(slot.device.labels).get("address") == self._here else None

    def heartbeat(self) -> list[WorkerStatus]:
        now = self._now()
        with self._lock:
            return [WorkerStatus(s.device_id, s.pid, s.up, now - s.last_seen if s.last_seen
                                 else float("inf"), s.restarts, bool(s.running),
                                 tuple(sorted(s.replicas)), s.used_mib + self._groups.held_mib(s))
                    for s in self._flow.slots.values()]  # fmt: skip

    def _slot(self, device_id: str) -> Slot:
        slot = self._flow.slots.get(device_id)
        if slot is None:
            raise ExecutorError(f"unknown device {device_id!r}")
        return slot

    def _tick(self) -> None:
        """Pump thread, every deadline check (:mod:`.silence`): the silent actors; and every
        heartbeat: the node table, status calls, queued releases, the store's packing."""
        now = self._now()
        self._deadlines.judge(self._flow, now, {device for device, _ in self._loads.values()})
        if not self._deadlines.beat_due(now):
            return
        self._nodes.tick(ray.nodes())
        for slot in self._flow.slots.values():
            self._flow.ping(slot)
        for device_id, run_ids in self._flow.outputs.take_releases():
            slot = self._flow.slots.get(device_id)
            if slot is not None and slot.up:
                slot.actor.release.remote(*run_ids)
        self._flow.store.pack()

    # ---- replicas

    def load(self, replica_id: str, model_ref: ModelRef, device_id: str, *,
             group: tuple[str, ...] = ()) -> concurrent.futures.Future[LoadReport]:  # fmt: skip
        """See the Protocol; a group of k devices is a placement group (:mod:`.groups`)."""
        need = estimate_mib(model_ref, Path(self.config.cache_dir))
        future: concurrent.futures.Future[LoadReport] = concurrent.futures.Future()
        devices = replica_devices(device_id, group)
        with self._lock:
            slot = [self._slot(d) for d in devices][0]
            if replica_id in self._flow.replica_dev or replica_id in self._loads:
                raise ExecutorError(f"replica {replica_id!r} is already loaded")
            why = groups.refusal(self._flow.slots, devices, need)
            if why is not None:
                return _settle_load(future, LoadReport(replica_id, device_id, False, why)) or future
            self._loads[replica_id] = (device_id, future)
            go = lambda _: self._send_load(slot, replica_id, model_ref, need)  # noqa: E731
            if len(devices) == 1:
                return go(None) or future
            late = lambda why: self._fail_loads(slot, why, replica_id)  # noqa: E731
            self._groups.reserve(replica_id, slot.place.node_id, devices, need, self._pump, go,
                                 late)  # fmt: skip
        return future

    def _send_load(self, slot: Slot, replica_id: str, model_ref: ModelRef, need: int) -> None:
        if replica_id in self._loads and slot.up:
            ref = slot.actor.load.options(concurrency_group="load").remote(replica_id, model_ref)
            self._pump.watch(ref, lambda f, g=slot.generation: self._on_loaded(slot, g, replica_id, need, f))  # fmt: skip

    def _on_loaded(self, slot: Slot, gen: int, replica_id: str, need: int, fut: Any) -> None:
        if (entry := self._loads.pop(replica_id, None)) is None or gen != slot.generation:
            return None
        try:
            load_ms, mib = fut.result()
        except Exception as err:  # noqa: BLE001 (any load failure is a report)
            cause, _ = getattr(err, "cause", None) or err, self._groups.release(replica_id)
            why = f"{type(cause).__name__}: {cause}"
            return _settle_load(entry[1], LoadReport(replica_id, slot.device_id, False, why))
        for device_id in self._groups.devices(replica_id) or (slot.device_id,):
            self._flow.slots[device_id].replicas[replica_id] = size = max(need, mib)  # on each
        self._flow.replica_dev[replica_id] = slot.device_id
        _settle_load(entry[1], LoadReport(replica_id, slot.device_id, True, "loaded", load_ms, size))  # fmt: skip

    def _fail_loads(self, slot: Slot, why: str = "device lost", only: str = "") -> None:
        # slot's actor was lost (its loads and groups fail), or only ``only``'s load failed
        gone = {only} if only else self._groups.lost(slot.device_id, self._flow.slots,
                                                       self._flow.replica_dev)  # fmt: skip
        for replica_id, (device_id, future) in list(self._loads.items()):
            if (device_id == slot.device_id and not only) or replica_id in gone:
                del self._loads[replica_id]
                _settle_load(future, LoadReport(replica_id, device_id, False, why))

    def unload(self, replica_id: str) -> concurrent.futures.Future[int]:
        with self._lock:
            device_id = self._flow.replica_dev.pop(replica_id, None)
            if device_id is None:
                raise ExecutorError(f"replica {replica_id!r} is not loaded")
            for held in self._groups.release(replica_id) or (device_id,):
                self._flow.slots[held].replicas.pop(replica_id, None)
            return self._flow.slots[device_id].actor.unload.remote(replica_id).future()

    # ---- work

    def submit(self, batch: Batch) -> None:
        with self._lock:
            self._flow.submit(batch)
        self._pump.call(lambda _: None)  # events submit produced go out on the delivery thread

    def cancel(self, idempotency_keys: Iterable[str]) -> None:
        with self._lock:
            self._flow.cancel(idempotency_keys)
        self._pump.call(lambda _: None)

    # ---- outputs

    def fetch_output(self, run_id: str, node_id: str) -> concurrent.futures.Future[dict]:
        out: concurrent.futures.Future[dict] = concurrent.futures.Future()
        with self._lock:
            returned = self._flow.outputs.returned(run_id, node_id)
            holder = self._flow.outputs.holder(run_id, node_id)
            slot = self._flow.slots.get(holder or "")
            if returned is None and slot is not None and slot.up:
                ref = slot.actor.fetch.remote(run_id, node_id)
                ref.future().add_done_callback(lambda f: _settle_fetch(out, f, run_id, node_id))
                return out
        if returned is not None:
            out.set_result(returned)  # type: ignore[arg-type]
        else:
            out.set_exception(KeyError(f"no actor holds output {run_id}/{node_id}"))
        return out

    def returned_output(self, run_id: str, node_id: str) -> dict | None:
        with self._lock:
            return self._flow.outputs.returned(run_id, node_id)  # type: ignore[return-value]

    def release_run(self, run_id: str) -> None:
        with self._lock:
            self._flow.release_run(run_id)

    def moved_bytes(self, run_id: str, node_id: str) -> int:
        """Bytes of this step's inputs that moved here from other actors (object store)."""
        with self._lock:
            return self._flow.moves.of_step(run_id, node_id)

    def transfer_totals(self) -> dict[str, int]:
        """Inputs moved between actors so far, and their bytes."""
        with self._lock:
            return {"moves": self._flow.moves.moves, "bytes": self._flow.moves.bytes}

    # ---- events

    def poll(self, timeout: float) -> ExecutorEvent | None:
        return self._hub.poll(timeout)

    def events(self) -> AsyncIterator[ExecutorEvent]:
        return self._hub.events()


def _settle_fetch(out: concurrent.futures.Future, fut: Any, run_id: str, node_id: str) -> None:
    try:
        value = fut.result()
    except Exception as err:  # noqa: BLE001 (the holder died meanwhile)
        out.set_exception(KeyError(f"output {run_id}/{node_id} lost: {type(err).__name__}"))
        return
    if value is None:
        out.set_exception(KeyError(f"no actor holds output {run_id}/{node_id}"))
    else:
        out.set_result(value)
