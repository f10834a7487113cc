"""Devices that join the live fleet: a node of the executor's cluster came (``DeviceJoined``),
or was there at start without being in the blueprint (the fleet read from the database names
the devices it knows; a backend over a cluster finds its own).

Each joined device is described in core terms (:func:`spec_of`: its node and NVLink domain
are the core's topology domains), added to the runtime's blueprint
(so a restart of its worker restores it, and the live-config feed knows it), told to the
runtime's ``on_device_joined`` hook (the wiring registers it in the device registry), given
the runtime's index replicas, and announced to the core with ``DeviceUp``: from then on the
core may place replicas on it and route work to them. A device that leaves goes down as any
lost worker (``WorkerDown``), through the completions; one gone for good (its node left:
``WorkerDown.gone``) is told to the runtime's ``on_device_left`` hook (:func:`leave`: the
wiring marks it down in the device registry). It stays in the blueprint, down: a node id is
never reused, so no ``DeviceUp`` ever comes for it.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import replace
from typing import TYPE_CHECKING

from control.core.events import DeviceUp
from control.core.types import DeviceSpec
from control.executor.protocol import DeviceInfo
from control.runtime.state import Ingest, Record

if TYPE_CHECKING:
    from control.runtime.live import LiveRuntime

log = logging.getLogger(__name__)

#: The runtime's ``on_device_joined`` hook: the device as the executor reports it, and as the
#: core sees it. Called on the loop thread; must not block.
OnJoined = Callable[[DeviceInfo, DeviceSpec], None]

#: The runtime's ``on_device_left`` hook: the id of a device gone for good. Called on the loop
#: thread; must not block.
OnLeft = Callable[[str], None]

#: the label of a device (``DeviceInfo.labels``) naming its NVLink domain, when a backend
#: over a cluster knows it (the GPUs of one node share it)
NVLINK_LABEL = "nvlink"


def spec_of(d: DeviceInfo, node_id: str = "local") -> DeviceSpec:
    """Core view of one executor device. A device of a cluster node (``DeviceInfo.node``) is
    in that node (a topology domain) and in its NVLink domain (label ``nvlink``; else its
    node, whose CPU slots share it) as its interconnect group; one without is on ``node_id``."""
    return DeviceSpec(
        device_id=d.device_id,
        node_id=d.node or node_id,
        kind="gpu" if d.kind == "cuda" else "cpu",
        accelerator=d.kind,
        memory_mib=d.memory_budget_mib,
        interconnect_group=dict(d.labels).get(NVLINK_LABEL) or d.node or node_id,
    )


def adopt(rt: LiveRuntime) -> None:
    """At start, before the core is built: the executor's cluster devices (``node`` set) the
    blueprint lacks join it (the core then starts with them). The local executor's devices
    have no node: the blueprint alone says which of them serve."""
    known = {d.device_id for d in rt.blueprint.devices}
    for info in rt.executor.devices():
        if info.node is not None and info.device_id not in known:
            _add(rt, info)


def join(rt: LiveRuntime, info: DeviceInfo) -> list[Record]:
    """A device that joined while serving: the records that tell the core (loop thread)."""
    if info.device_id in {d.device_id for d in rt.blueprint.devices}:
        return []  # known already (a node can only join once; its device ids are its own)
    spec = _add(rt, info)
    if spec is None:
        return []
    if rt.actuator is not None:
        for index in rt.config.indexes:
            rt.actuator.spawn(rt._load_index(index, info.device_id, 0))
    return [Ingest(DeviceUp(spec))]


def _add(rt: LiveRuntime, info: DeviceInfo) -> DeviceSpec | None:
    if info.memory_budget_mib <= 0:
        log.warning("device %s joined without a memory budget: not used", info.device_id)
        return None
    spec = spec_of(info)
    rt.blueprint = replace(rt.blueprint, devices=(*rt.blueprint.devices, spec))
    log.info("device %s joined (node %s, group %s)", spec.device_id, spec.node_id,
             spec.interconnect_group)  # fmt: skip
    if rt.on_device_joined is not None:
        try:
            rt.on_device_joined(info, spec)
        except Exception:  # the registry's failure must not keep the device from serving
            log.exception("on_device_joined failed for %s", info.device_id)
    return spec


def leave(rt: LiveRuntime, device_id: str) -> None:
    """A device gone for good (its node left the cluster): told to ``on_device_left``."""
    log.warning("device %s left the fleet for good", device_id)
    if rt.on_device_left is not None:
        try:
            rt.on_device_left(device_id)
        except Exception:  # the registry's failure must not stop the loop
            log.exception("on_device_left failed for %s", device_id)
