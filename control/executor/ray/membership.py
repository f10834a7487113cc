"""The cluster's membership kept current: which nodes are alive, read from Ray's node table.

A Ray driver has no cheap public subscription to node changes (the GCS's node channel is
internal to Ray), so the executor reads the node table (``ray.nodes()``: one GCS call, about
a millisecond here) on its tick and :class:`Membership` diffs it against the nodes it knew:

* a node that JOINED (alive, not known) gives its devices, made as at start
  (:func:`~control.executor.ray.cluster.cluster_devices`); a GPU node whose GPU memory is not
  known yet is left for later (``waiting``) until the executor has asked a GPU of it;
* a node that LEFT (known, then absent or no longer alive) gives its node id: the executor
  reports its devices' actors lost (their in-flight items retriable once, their outputs gone)
  and never starts an actor there again.

A node id is never reused by Ray, so a node that left and whose machine comes back is a new
node: it joins with new devices. :class:`Membership` is bookkeeping over the table it is
given (no Ray call); :class:`NodeWatch` applies it to the executor's device slots.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import ray

from control.executor.protocol import DeviceInfo, DeviceJoined
from control.executor.ray.cluster import NODE_PREFIX, Placement, cluster_devices, gpu_memory_mib
from control.executor.ray.flow import Flow
from control.executor.ray.pump import Pump
from control.executor.ray.slots import Slot

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Change:
    """What one read of the node table changed."""

    joined: tuple[tuple[DeviceInfo, Placement], ...] = ()  # devices of the nodes that joined
    left: tuple[str, ...] = ()  # node ids
    #: GPU nodes that joined whose GPU memory is unknown: ask it, then :meth:`Membership.add`
    probe: tuple[str, ...] = ()

    def __bool__(self) -> bool:
        return bool(self.joined or self.left or self.probe)


class Membership:
    def __init__(self, driver_node: str, gpu_memory_mib: int = 0) -> None:
        self.driver_node = driver_node
        self.gpu_memory_mib = gpu_memory_mib  # of the GPUs seen so far (0: none asked yet)
        self.known: set[str] = set()  # alive node ids whose devices the executor has
        self.waiting: set[str] = set()  # joined GPU nodes whose memory is being asked

    def update(self, nodes: list[Mapping[str, Any]]) -> Change:
        """Diff the node table ``nodes`` (as ``ray.nodes()`` lists them) with what is known."""
        alive = {str(n["NodeID"]): n for n in nodes if n.get("Alive")}
        left = tuple(sorted(n for n in self.known | self.waiting if n not in alive))
        self.known.difference_update(left)
        self.waiting.difference_update(left)
        fresh = [n for node_id, n in sorted(alive.items())
                 if node_id not in self.known and node_id not in self.waiting]  # fmt: skip
        probe = tuple(str(n["NodeID"]) for n in fresh if _gpus(n) and not self.gpu_memory_mib)
        self.waiting.update(probe)
        ready = [n for n in fresh if str(n["NodeID"]) not in probe]
        return Change(self._devices(ready), left, probe)

    def add(self, node: Mapping[str, Any], gpu_memory_mib: int) -> Change:
        """A GPU node of ``probe`` whose GPU memory is now known (0: still unknown: its GPUs
        get no budget and take no replica). Nothing when it left meanwhile."""
        node_id = str(node["NodeID"])
        if node_id not in self.waiting:
            return Change()
        self.waiting.discard(node_id)
        if gpu_memory_mib and not self.gpu_memory_mib:
            self.gpu_memory_mib = gpu_memory_mib
        return Change(self._devices([node], gpu_memory_mib or self.gpu_memory_mib))

    def _devices(self, nodes: list[Mapping[str, Any]],
                 gpu_memory_mib: int | None = None) -> tuple[tuple[DeviceInfo, Placement], ...]:  # fmt: skip
        self.known.update(str(n["NodeID"]) for n in nodes)
        mib = self.gpu_memory_mib if gpu_memory_mib is None else gpu_memory_mib
        return tuple(cluster_devices(list(nodes), self.driver_node, mib))


def _gpus(node: Mapping[str, Any]) -> bool:
    return bool(node.get("Resources", {}).get("GPU"))


class NodeWatch:
    """Applies what :class:`Membership` finds to the executor's slots (pump thread, under the
    executor's lock): a joined node's devices get a slot and an actor each, and a
    ``DeviceJoined`` once their actor answers; a left node's actors are reported lost
    (``Flow.lost``: ``WorkerDown``, in-flight items retriable once) and its slots are gone."""

    def __init__(self, flow: Flow, pump: Pump, members: Membership) -> None:
        self.flow, self.pump, self.members = flow, pump, members
        self.joining: dict[str, Slot] = {}  # device id -> slot whose actor has not answered

    def begin(self, nodes: list[Mapping[str, Any]]) -> None:
        """The devices of ``start`` (known from ``devices()`` on: no ``DeviceJoined``)."""
        change = self.members.update(nodes)
        for device, place in change.joined:
            self._add(device, place)
        self.joining.clear()
        self.apply(Change(probe=change.probe))  # GPUs of unknown memory come when asked

    def tick(self, nodes: list[Mapping[str, Any]]) -> None:
        """Diff the node table read now; report the joined devices whose actor is up."""
        self.apply(self.members.update(nodes))
        for device_id, slot in list(self.joining.items()):
            if slot.up:
                del self.joining[device_id]
                self.pump.emit(DeviceJoined(slot.device))
            elif slot.gone:
                del self.joining[device_id]

    def apply(self, change: Change) -> None:
        for node_id in change.left:
            log.warning("node %s left the cluster", node_id)
            for slot in self.flow.slots.values():
                if slot.place.node_id != node_id or slot.gone:
                    continue
                if self.joining.pop(slot.device_id, None) is not None:  # never announced
                    slot.generation += 1  # nothing ran there: its late replies are ignored
                    slot.actor_hex, slot.up = "", False
                elif slot.actor_hex:  # its actor (or the one restarted for it) is gone with it
                    self.flow.lost(slot, f"node {node_id[:NODE_PREFIX]} left the cluster")
                slot.gone = True
        for device, place in change.joined:
            log.info("device %s joined (node %s)", device.device_id, place.node_id)
            self._add(device, place)
        for node_id in change.probe:
            threading.Thread(target=self._probe, args=(node_id,), daemon=True).start()

    def _add(self, device: DeviceInfo, place: Placement) -> None:
        slot = self.flow.slots[device.device_id] = Slot(device, place)
        self.joining[device.device_id] = slot
        self.flow.start_actor(slot)

    def _probe(self, node_id: str) -> None:
        """A thread of its own: ask a GPU of a joined node its memory (blocks), then add it."""
        mib = gpu_memory_mib(node_id)
        node = {"NodeID": node_id, "Alive": True}
        node.update(next((n for n in ray.nodes() if n["NodeID"] == node_id), {}))
        self.pump.call(lambda _: self.apply(self.members.add(node, mib)))
