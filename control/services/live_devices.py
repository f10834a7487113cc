"""Devices the live executor found for itself (a node of its cluster), in the device registry.

A backend over a cluster reports the devices of the nodes it sees (at start, and as nodes
join: ``DeviceJoined``); the live runtime hands each one to its ``on_device_joined`` hook and
the wiring calls :func:`register_device`, so the registry (``GET /admin/devices``), the usage
ledger's device ids and the live-config feed know it as they know a seeded device. Upsert by
name: the node row (named by its cluster node id) is created when missing, the device row is
created real (``is_real``) or, when it exists (a device seen by an earlier process), set
``up`` again. A device whose node LEFT the cluster (``WorkerDown`` with ``gone``) is set
``down`` by :func:`mark_device_left`, and its node row once none of the node's devices is up
(a node id is never reused: a machine that comes back joins as a new node, with new rows).
Every write goes through the audited services (actor ``executor``). Blocking (database I/O):
call them off the event loop.
"""

from __future__ import annotations

from control.core.types import DeviceSpec
from control.executor import precisions as precision
from control.executor.protocol import DeviceInfo
from control.services import Services

ACTOR = "executor"


def register_device(services: Services, info: DeviceInfo, spec: DeviceSpec) -> int:
    """The registry's id of ``spec``'s device, after making sure it is there and up."""
    labels = dict(info.labels)
    nodes = services.nodes.list(name=spec.node_id)
    if nodes:
        node = nodes[0]
        if node.status != "up":
            services.nodes.update(ACTOR, node.id, status="up")
    else:
        node = services.nodes.create(ACTOR, name=spec.node_id, address=labels.get("address"),
                                     labels={"cluster": True})  # fmt: skip
    found = services.devices.list(name=spec.device_id)
    if found:
        if found[0].status != "up":
            services.devices.update(ACTOR, found[0].id, status="up")
        return found[0].id
    precisions = precision.runnable_on(info.kind)
    row = services.devices.create(
        ACTOR, name=spec.device_id, node_id=node.id, kind=info.kind,
        accelerator=spec.accelerator, memory_mib=spec.memory_mib, precisions=precisions,
        interconnect_group=spec.interconnect_group, is_real=True, labels=labels,
    )  # fmt: skip
    return row.id


def mark_device_left(services: Services, device_id: str) -> int | None:
    """The registry's id of the device named ``device_id``, after setting it ``down`` (and its
    node, when none of the node's devices is up any more); None when the registry lacks it."""
    found = services.devices.list(name=device_id)
    if not found:
        return None
    row = found[0]
    if row.status != "down":
        services.devices.update(ACTOR, row.id, status="down")
    node = services.nodes.get(row.node_id)
    others_up = [d for d in services.devices.list(node_id=node.id, status="up") if d.id != row.id]
    if node.status != "down" and not others_up:
        services.nodes.update(ACTOR, node.id, status="down")
    return row.id
