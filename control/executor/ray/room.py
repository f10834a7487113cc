"""Room for a replica on the Ray executor's devices, made by evicting least-recently-used idle
replicas as on the local executor (the choice is
:class:`~control.executor.host.lru.ReplicaTable`'s).

The table is built afresh for each load from what the executor knows then, so there is no
second record to keep true: the replicas the devices hold (``Slot.replicas``; a multi-device
replica on every device of its group, the first running it), the loads in progress (their
planned MiB reserved on each of their devices, never evicted) and when each replica was last
used (:meth:`Room.used`: loaded, submitted to, a batch of it ended). A replica is idle when no
batch of it is queued for or running on an actor; only idle replicas are evicted.

A load is refused, naming why, only when even evicting every idle replica of a device would not
make room there (a multi-device replica: on any device of its group, see
:func:`~control.executor.ray.groups.refusal`); a refused load evicts nothing.
"""

from __future__ import annotations

import concurrent.futures
from collections.abc import Mapping
from dataclasses import dataclass

from control.executor.host.lru import EvictionPlan, ReplicaTable
from control.executor.ray import groups
from control.executor.ray.slots import Slot


@dataclass
class Loading:
    """A load in progress: where it goes, what it reserves, what was evicted for it."""

    device_id: str  # the device that runs the replica
    future: concurrent.futures.Future
    devices: tuple[str, ...] = ()  # every device it holds (the first runs it)
    need_mib: int = 0  # planned MiB on each of them
    evicted: tuple[str, ...] = ()


class Room:
    def __init__(self) -> None:
        self.last_used: dict[str, float] = {}  # replica id -> when it was last used

    def used(self, replica_id: str, now: float) -> None:
        self.last_used[replica_id] = now

    def forget(self, replica_id: str) -> None:
        self.last_used.pop(replica_id, None)

    def table(self, slots: Mapping[str, Slot], homes: Mapping[str, str],
              loading: Mapping[str, Loading]) -> ReplicaTable:  # fmt: skip
        """The replicas of every device now, with their MiB, last use and batches in flight
        (``homes``: replica id -> the device running it)."""
        busy = {b.replica_id for s in slots.values() for b in (*s.queue, *s.running.values())}
        table = ReplicaTable()
        for slot in slots.values():
            for replica_id, mib in slot.replicas.items():
                if replica_id in table.entries:
                    continue
                home = homes.get(replica_id, slot.device_id)
                held = tuple(d for d, s in slots.items() if d != home and replica_id in s.replicas)
                table.add(replica_id, home, mib, self.last_used.get(replica_id, 0.0), held)
                table.entries[replica_id].in_flight = int(replica_id in busy)
        for replica_id, load in loading.items():
            table.add(replica_id, load.device_id, load.need_mib, 0.0, load.devices[1:])
            table.entries[replica_id].in_flight = 1  # never evicted while it loads
        return table

    def plan(self, slots: Mapping[str, Slot], homes: Mapping[str, str],
             loading: Mapping[str, Loading], devices: tuple[str, ...],
             need: int) -> EvictionPlan:  # fmt: skip
        """Whether ``need`` MiB fits on each of ``devices`` (a replica held on all of them),
        and which idle replicas to evict for it (LRU first; nothing when it does not fit)."""
        table = self.table(slots, homes, loading)

        def fit(slot: Slot) -> EvictionPlan:
            return table.plan(slot.device_id, need, slot.device.memory_budget_mib)

        why = groups.refusal(slots, devices, need, lambda s: fit(s).fits)
        if why is not None:
            return EvictionPlan(False, (), why)
        plans = [fit(slots[d]) for d in devices]  # each fits: refusal() checked a group's
        if len(plans) == 1:
            return plans[0]
        evict = tuple(dict.fromkeys(v for p in plans for v in p.evict))
        return EvictionPlan(True, evict, "; ".join(p.reason for p in plans))
