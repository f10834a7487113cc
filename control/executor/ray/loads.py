"""Replicas on the Ray executor's actors: loading, unloading and evicting them.

A load is planned first (:mod:`.room`): room is made by evicting least-recently-used idle
replicas (each a ``ReplicaEvicted`` event, named in the load's report), and a load that does
not fit even so is refused, naming why. The planned MiB is then reserved on each of its devices
(in :attr:`Loads.pending`) until the actor answers; a multi-device replica is loaded once its
placement group is ready (:mod:`.groups`). An actor that is lost fails its loads and the groups
holding its device (:meth:`Loads.fail`, the flow's ``on_lost``).

Not thread-safe: called under the executor's lock (a public method or the pump thread).
"""

from __future__ import annotations

import concurrent.futures
from collections.abc import Callable
from typing import Any

from control.executor.futures import settle
from control.executor.protocol import ExecutorError, LoadReport, ModelRef, ReplicaEvicted
from control.executor.ray import groups
from control.executor.ray.flow import Flow
from control.executor.ray.pump import Pump
from control.executor.ray.room import Loading
from control.executor.ray.slots import Slot


class Loads:
    def __init__(self, flow: Flow, pump: Pump, now: Callable[[], float]) -> None:
        self.flow, self.pump, self.now = flow, pump, now
        self.pending: dict[str, Loading] = {}  # replica id -> its load in progress
        self.groups = groups.Groups()  # the placement groups of multi-device replicas

    def loading_devices(self) -> set[str]:
        """The devices whose actor loads a replica now (their status may be slow to answer)."""
        return {p.device_id for p in self.pending.values()}

    def load(self, replica_id: str, model_ref: ModelRef, devices: tuple[str, ...],
             need: int) -> concurrent.futures.Future[LoadReport]:  # fmt: skip
        """Load ``replica_id`` (``need`` MiB planned) on ``devices``: the first runs it, the
        others hold its MiB for it (module docstring)."""
        future: concurrent.futures.Future[LoadReport] = concurrent.futures.Future()
        flow, slot = self.flow, self.flow.slots[devices[0]]
        if replica_id in flow.replica_dev or replica_id in self.pending:
            raise ExecutorError(f"replica {replica_id!r} is already loaded")
        plan = flow.room.plan(flow.slots, flow.replica_dev, self.pending, devices, need)
        if not plan.fits:
            settle(future, LoadReport(replica_id, slot.device_id, False, plan.reason))
            return future
        for victim in plan.evict:
            self.evict(victim, f"LRU: making room for {replica_id} ({need} MiB)")
        if plan.evict:
            self.pump.call(lambda _: None)  # the evictions go out on the delivery thread
        self.pending[replica_id] = Loading(slot.device_id, future, devices, need, plan.evict)
        go = lambda _: self._send(slot, replica_id, model_ref, need)  # noqa: E731
        if len(devices) == 1:
            go(None)
            return future
        late = lambda why: self.fail(slot, why, replica_id)  # noqa: E731
        self.groups.reserve(replica_id, slot.place.node_id, devices, need, self.pump, go, late)
        return future

    def _send(self, slot: Slot, replica_id: str, model_ref: ModelRef, need: int) -> None:
        if replica_id in self.pending and slot.up:
            ref = slot.actor.load.options(concurrency_group="load").remote(replica_id, model_ref)
            self.pump.watch(ref, lambda f, g=slot.generation: self._on_loaded(slot, g, replica_id, need, f))  # fmt: skip

    def _on_loaded(self, slot: Slot, gen: int, replica_id: str, need: int, fut: Any) -> None:
        if (entry := self.pending.pop(replica_id, None)) is None or gen != slot.generation:
            return None
        try:
            load_ms, mib = fut.result()
        except Exception as err:  # noqa: BLE001 (any load failure is a report)
            cause, _ = getattr(err, "cause", None) or err, self.groups.release(replica_id)
            why = f"{type(cause).__name__}: {cause}"
            return settle(entry.future, LoadReport(replica_id, slot.device_id, False, why))
        for device_id in self.groups.devices(replica_id) or (slot.device_id,):
            self.flow.slots[device_id].replicas[replica_id] = size = max(need, mib)  # on each
        self.flow.replica_dev[replica_id] = slot.device_id
        self.flow.room.used(replica_id, self.now())
        settle(entry.future, LoadReport(replica_id, slot.device_id, True, "loaded", load_ms, size,
                                        entry.evicted))  # fmt: skip

    def fail(self, slot: Slot, why: str = "device lost", only: str = "") -> None:
        """``slot``'s actor was lost (its loads and groups fail), or only ``only``'s load
        failed (its placement group was not ready in time)."""
        gone = {only} if only else self.groups.lost(slot.device_id, self.flow.slots,
                                                      self.flow.replica_dev)  # fmt: skip
        for replica_id, loading in list(self.pending.items()):
            if (loading.device_id == slot.device_id and not only) or replica_id in gone:
                del self.pending[replica_id]
                settle(loading.future, LoadReport(replica_id, loading.device_id, False, why))

    def stop(self) -> None:
        """The executor stops: every load in progress fails."""
        for replica_id, loading in self.pending.items():
            settle(loading.future, LoadReport(replica_id, "?", False, "executor stopped"))
        self.pending.clear()

    def unload(self, replica_id: str) -> concurrent.futures.Future[int]:
        if replica_id not in self.flow.replica_dev:
            raise ExecutorError(f"replica {replica_id!r} is not loaded")
        return self._drop(replica_id)[2].future()

    def evict(self, replica_id: str, reason: str) -> None:
        device_id, freed, _ = self._drop(replica_id)
        self.pump.emit(ReplicaEvicted(replica_id, device_id, freed, reason))

    def _drop(self, replica_id: str) -> tuple[str, int, Any]:
        """Forget a loaded replica on every device it holds and unload it from its actor:
        (its device, the MiB it held there, the unload's reference)."""
        slots = self.flow.slots
        device_id = self.flow.replica_dev.pop(replica_id)
        freed = slots[device_id].replicas.get(replica_id, 0)
        for held in self.groups.release(replica_id) or (device_id,):
            slots[held].replicas.pop(replica_id, None)
        self.flow.room.forget(replica_id)
        return device_id, freed, slots[device_id].actor.unload.remote(replica_id)
