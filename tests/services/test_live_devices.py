"""A device the live executor found on a cluster node goes into the device registry: created
once (its node too), set up again when seen again, and read back as the same core device
(node, NVLink domain), so the live-config feed and the core agree about it."""

from __future__ import annotations

from control.executor.protocol import DeviceInfo
from control.runtime.joins import spec_of
from control.services.fleet_state import load_fleet_state
from control.services.live_devices import mark_device_left, register_device
from db.session import session_scope

NODE = "ab12cd34" + "0" * 48
GPU = DeviceInfo("ab12cd34/cuda:1", "cuda", 1, 72_000, node=NODE,
                 labels=(("address", "10.0.0.7"), ("gpu_type", "H100"),
                         ("nvlink", "nvlink:ab12cd34")))  # fmt: skip


def test_a_cluster_device_is_registered_once_and_read_back_as_the_core_sees_it(services):
    spec = spec_of(GPU)
    assert (spec.node_id, spec.interconnect_group, spec.kind) == (NODE, "nvlink:ab12cd34", "gpu")
    row_id = register_device(services, GPU, spec)
    (node,) = services.nodes.list(name=NODE)
    assert node.address == "10.0.0.7" and node.status == "up"
    row = services.devices.get(row_id)
    assert row.is_real and row.kind == "cuda" and row.node_id == node.id
    assert row.labels["gpu_type"] == "H100"
    with session_scope(services.factory) as session:
        fleet = load_fleet_state(session, include_declared=False)
    assert [d for d in fleet.devices if d.device_id == GPU.device_id] == [spec]
    services.devices.update("test", row_id, status="down")
    assert register_device(services, GPU, spec) == row_id  # seen again: the same row, up
    assert services.devices.get(row_id).status == "up"
    assert len(services.devices.list(name=GPU.device_id)) == 1
    assert len(services.nodes.list(name=NODE)) == 1


def test_a_device_whose_node_left_is_set_down_and_its_node_with_its_last_device(services):
    other = DeviceInfo("ab12cd34/cuda:2", "cuda", 2, 72_000, node=NODE, labels=GPU.labels)
    first = register_device(services, GPU, spec_of(GPU))
    second = register_device(services, other, spec_of(other))
    assert mark_device_left(services, GPU.device_id) == first
    assert services.devices.get(first).status == "down"
    assert services.nodes.list(name=NODE)[0].status == "up"  # its other device still serves
    assert mark_device_left(services, other.device_id) == second
    assert services.devices.get(second).status == "down"
    assert services.nodes.list(name=NODE)[0].status == "down"
    actors = {e.actor for e in services.audit.list(entity_type="device", entity_id=first)}
    assert actors == {"executor"}  # audited as the executor's writes
    assert mark_device_left(services, "unknown/cpu:0") is None
