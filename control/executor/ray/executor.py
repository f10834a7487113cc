"""RayExecutor: the :class:`~control.executor.protocol.Executor` over a Ray cluster, one actor
per device on every node (:mod:`.cluster`), the model code the local workers run (:mod:`.actor`).

Selected by settings (``LEGATO_EXECUTOR=ray``, ``LEGATO_RAY_ADDRESS``; see
:mod:`control.wiring.executor`). Nodes that join or leave while it runs: :mod:`.membership`
(``DeviceJoined``; ``WorkerDown``). The batch flow and lost actors are in :mod:`.flow`, actors
that stop answering their status call in :mod:`.silence`. Ray's completions are handled on one
thread of its own (:mod:`.pump`), which delivers events to the loop given to ``start`` or,
without one, itself. Its public methods and that thread each hold the executor's lock while
they run; none waits on an actor.

As on the local executor: hang deadlines of the batches the actors run (:mod:`.deadlines`; a
hung actor is killed and restarted), a circuit breaker per replica (:mod:`.breakers`), room for a
load made by evicting least-recently-used idle replicas (:mod:`.loads`, :mod:`.room`; refused,
naming why, only when even that cannot make room), and streamed text that reaches the executor
as it is produced (:mod:`.streams`). Its settings: :mod:`.config`. Multi-device replicas:
:mod:`.groups`.
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
from control.executor.futures import fail, settle
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
from control.executor.ray import cluster, deadlines
from control.executor.ray.config import RayExecutorConfig
from control.executor.ray.flow import Flow
from control.executor.ray.loads import Loads
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
        timer = deadlines.Deadlines(config.hang_multiple, config.hang_floor_s)
        self._flow = Flow(self._pump, options, self._now, config.idempotency_capacity,
                          deadlines=timer, breaker=config.breaker)  # fmt: skip
        self._replicas = Loads(self._flow, self._pump, self._now)
        self._flow.on_lost = self._replicas.fail
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
            self._replicas.stop()
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
        """Each actor's status, with the batches it runs now and their hang deadlines."""
        now = self._now()
        with self._lock:
            return [WorkerStatus(s.device_id, s.pid, s.up, now - s.last_seen if s.last_seen
                                 else float("inf"), s.restarts, bool(s.running),
                                 tuple(sorted(s.replicas)),
                                 s.used_mib + self._replicas.groups.held_mib(s),
                                 self._flow.deadlines.running(s.device_id, now))
                    for s in self._flow.slots.values()]  # fmt: skip

    def breaker_state(self, replica_id: str) -> str:
        with self._lock:
            return self._flow.breakers.of(replica_id).state

    def _slot(self, device_id: str) -> Slot:
        slot = self._flow.slots.get(device_id)
        if slot is None:
            raise ExecutorError(f"unknown device {device_id!r}")
        return slot

    def _tick(self) -> None:
        """Pump thread, every deadline check (:mod:`.silence`): the silent actors; and every
        heartbeat: the node table, hung actors, status calls, queued releases, the store's
        packing."""
        now = self._now()
        self._deadlines.judge(self._flow, now, self._replicas.loading_devices())
        if not self._deadlines.beat_due(now):
            return
        self._nodes.tick(ray.nodes())
        deadlines.kill_hung(self._flow, self._now())
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
        """See the Protocol; room is made by evicting idle replicas, and a group of k devices
        is a placement group (:mod:`.loads`)."""
        need = estimate_mib(model_ref, Path(self.config.cache_dir))
        devices = replica_devices(device_id, group)
        with self._lock:
            for d in devices:
                self._slot(d)  # raises for an unknown device
            return self._replicas.load(replica_id, model_ref, devices, need)

    def unload(self, replica_id: str) -> concurrent.futures.Future[int]:
        with self._lock:
            return self._replicas.unload(replica_id)

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
        """Steps that got inputs from another actor so far, and the inputs' bytes."""
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
        fail(out, KeyError(f"output {run_id}/{node_id} lost: {type(err).__name__}"))
        return
    if value is None:
        fail(out, KeyError(f"no actor holds output {run_id}/{node_id}"))
    else:
        settle(out, value)
