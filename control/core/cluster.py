"""The fleet as the core sees it: devices, replicas, the batches they run, the loads it issued.

``Cluster`` keeps the indexes no decision may rebuild by scanning (replicas per model, replicas
with queued work, the cold pool), the batches in flight (and those the core dropped, whose late
results it ignores), and the bookkeeping of loads: speculative-preload outcomes and the loads it
cancelled (their late reports are ignored).
"""

from __future__ import annotations

from collections import Counter

from control.core.state import DeviceRecord, InflightBatch, ReplicaRecord
from control.core.types import ModelSpec, ReplicaState


class Cluster:
    """Devices and replicas with the indexes the engine decides from, the batches in flight on
    them (or on the host), and the loads the core issued."""

    def __init__(self) -> None:
        self.devices: dict[str, DeviceRecord] = {}
        self.replicas: dict[str, ReplicaRecord] = {}
        self.by_model: dict[str, dict[str, ReplicaRecord]] = {}
        self.backlogged: set[str] = set()  # replicas with a non-empty queue
        self._cold: tuple[DeviceRecord, ...] | None = None  # see ``cold_devices``
        self.batches: dict[str, InflightBatch] = {}
        self.dropped_batches: set[str] = set()  # batches failed by the core (late results ignored)
        self.preload: Counter[str] = Counter()  # speculative loads: issued, hits, misses
        self.evicted_loading: set[str] = set()  # loads cancelled by the core (late reports)
        #: device down -> its replicas to restore when it is up again (``core.restore``):
        #: (model, pool, replicas of the model serving before the loss, why it went down)
        self.lost: dict[str, list[tuple[ModelSpec, str, int, str]]] = {}
        #: model key -> its autoscaling ``max_replicas``: no load adds a replica past it
        self.replica_caps: dict[str, int] = {}

    def devices_changed(self) -> None:
        """Call after adding a device or replacing a device's spec (its pool may change)."""
        self._cold = None

    def cold_devices(self) -> tuple[DeviceRecord, ...]:
        """Devices of the cold pool (up or not), in ``devices`` order. Cached: stealing asks
        on every step while work is queued, and pools change only with a device's spec."""
        if self._cold is None:
            self._cold = tuple(d for d in self.devices.values() if d.spec.pool == "cold")
        return self._cold

    def add_replica(self, rec: ReplicaRecord) -> None:
        self.replicas[rec.replica_id] = rec
        self.by_model.setdefault(rec.model.key, {})[rec.replica_id] = rec
        for d in rec.devices:
            dev = self.devices[d.device_id]
            dev.used_mib += rec.model.memory_mib
            dev.replicas.add(rec.replica_id)

    def remove_replica(self, replica_id: str) -> ReplicaRecord | None:
        """Forget a replica and free its memory; returns it (its queue is the caller's)."""
        rec = self.replicas.pop(replica_id, None)
        if rec is None:
            return None
        self.by_model.get(rec.model.key, {}).pop(replica_id, None)
        self.backlogged.discard(replica_id)
        for d in rec.devices:
            dev = self.devices.get(d.device_id)
            if dev is not None:
                dev.used_mib -= rec.model.memory_mib
                dev.replicas.discard(replica_id)
        return rec

    def serving(self, model_key: str) -> list[ReplicaRecord]:
        """Replicas of the model that can take new work (routable, ready or loading), in
        insertion order."""
        return [
            r
            for r in self.by_model.get(model_key, {}).values()
            if r.routable and r.state in (ReplicaState.READY, ReplicaState.LOADING)
        ]

    def any_serving(self, model_key: str) -> bool:
        """``bool(serving(model_key))`` without building the list."""
        for r in self.by_model.get(model_key, {}).values():
            if r.routable and r.state in (ReplicaState.READY, ReplicaState.LOADING):
                return True
        return False

    def slot_of(self, rec: ReplicaRecord) -> tuple[str, tuple[str, ...]]:
        """(model key, device ids): a replica's place in a placement plan."""
        return (rec.model.key, tuple(d.device_id for d in rec.devices))

    def device_busy(self, device_id: str) -> bool:
        """True when any replica on the device has work queued or in flight."""
        return any(
            self.replicas[r].running or self.replicas[r].queue
            for r in self.devices[device_id].replicas
        )
