"""Multi-device (tensor parallel) replicas on Ray: one placement group per replica.

A replica whose load names a group of k devices (``Executor.load(..., group=)``: the core's
group, one interconnect domain) must have all k on ONE node, each with room for it (made by
evicting idle replicas where needed: :mod:`.room`). It is then
reserved as a Ray placement group, ``STRICT_PACK``, one bundle per device (each bundle holds
the replica's MiB of the node's ``memory`` resource), pinned to that node by its node-id label;
the replica is loaded (on the group's first device) only once every bundle is ready, and the
load fails, naming the group, when they are not ready within :data:`READY_S`. The model code
of this executor does not shard (CPU, tiny models): the replica runs on the first device, and
holds its MiB on every device of the group (each device lists it and counts it) until it is
unloaded or one of its devices is lost, which loses the replica (the runtime loads it again).
"""

from __future__ import annotations

import threading
from collections import Counter
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import ray
from ray.util.placement_group import NODE_ID_LABEL_KEY, placement_group, remove_placement_group

from control.executor.ray.pump import Handler, Pump
from control.executor.ray.slots import Slot

MIB = 1024 * 1024
#: seconds a placement group may take to be ready before its load fails
READY_S = 30.0


def refusal(slots: Mapping[str, Slot], devices: tuple[str, ...], need: int,
            fits: Callable[[Slot], bool]) -> str | None:  # fmt: skip
    """Why a replica on ``devices`` (of ``need`` MiB on each) cannot load now, or None.
    ``fits(slot)``: whether ``need`` MiB fits on the slot's device, evicting idle replicas if
    need be (:mod:`.room`); a single device's room is left to the caller's plan."""
    first = slots[devices[0]]
    if len(devices) == 1:
        return None if first.up else f"{first.device_id} is down"
    group = [slots[d] for d in devices]
    room = lambda s: s.up and not s.gone and fits(s)  # noqa: E731
    if len({s.place.node_id for s in group}) == 1 and all(room(s) for s in group):
        return None
    k = len(devices)
    free = Counter(s.place.node_id for s in slots.values() if room(s))
    node, most = free.most_common(1)[0] if free else ("-", 0)
    return (f"tp_degree {k}: needs {k} devices with {need} MiB free on one node; no node has "
            f"{k} free in the group {list(devices)} (most free: {most}, on node {node[:8]})")  # fmt: skip


@dataclass
class Held:
    devices: tuple[str, ...]  # the first runs the replica
    pg: Any  # its placement group


class Groups:
    """The placement groups of the multi-device replicas (loading or loaded)."""

    def __init__(self) -> None:
        self.held: dict[str, Held] = {}

    def reserve(self, replica_id: str, node_id: str, devices: tuple[str, ...], need: int,
                pump: Pump, go: Handler, late: Callable[[str], None]) -> None:  # fmt: skip
        """Ask Ray for the group's bundles on ``node_id``; on the pump thread, ``go(None)``
        once all are ready, or ``late(reason)`` (its bundles freed) when not within
        :data:`READY_S`."""
        k = len(devices)
        pg = placement_group([{"memory": max(need, 1) * MIB} for _ in devices], "STRICT_PACK",
                             bundle_label_selector=[{NODE_ID_LABEL_KEY: node_id}] * k)  # fmt: skip
        self.held[replica_id] = Held(devices, pg)
        ready = pg.ready()
        pump.watch(ready, lambda f: go(None) if f.exception() is None else None)

        def check(_: Any) -> None:
            held = self.held.get(replica_id)
            if held is not None and held.pg is pg and not ray.wait([ready], timeout=0)[0]:
                self.release(replica_id)
                late(f"tp_degree {k}: the placement group of {k} bundles ({need} MiB each) on "
                     f"node {node_id[:8]} was not ready within {READY_S:.0f} s")  # fmt: skip

        timer = threading.Timer(READY_S, pump.call, (check,))
        timer.daemon = True  # never keeps the process alive
        timer.start()

    def devices(self, replica_id: str) -> tuple[str, ...]:
        held = self.held.get(replica_id)
        return held.devices if held is not None else ()

    def release(self, replica_id: str) -> tuple[str, ...]:
        """Free the replica's bundles; its devices (none when it had no group)."""
        held = self.held.pop(replica_id, None)
        if held is None:
            return ()
        try:
            remove_placement_group(held.pg)
        except Exception:  # noqa: BLE001 (the cluster is going: nothing left to free)
            pass
        return held.devices

    def lost(self, device_id: str, slots: Mapping[str, Slot], replica_dev: dict) -> set[str]:
        """``device_id``'s actor was lost: every group holding it is no more (unloaded from
        the device running it, its bundles freed). Returns those replicas."""
        broken = {r for r, h in self.held.items() if device_id in h.devices}
        for replica_id in broken:
            home = self.held[replica_id].devices[0]
            if replica_dev.pop(replica_id, None) and home != device_id and slots[home].up:
                slots[home].actor.unload.remote(replica_id)
            for held in self.release(replica_id):
                slots[held].replicas.pop(replica_id, None)
        return broken

    def held_mib(self, slot: Slot) -> int:
        """MiB the device holds for groups it does not run (its actor does not count them)."""
        return sum(slot.replicas.get(r, 0) for r, h in self.held.items()
                   if slot.device_id in h.devices[1:])  # fmt: skip
