"""The local devices in core terms, and a default placement, for a ``LiveRuntime``.

The product builds its runtime from the database in ``control/wiring/`` (``load_fleet_state``
gives the blueprint); these helpers serve the paths without a stored fleet (``legato serve``'s
local devices, the fidelity runs, tests and benchmarks): describe what the executor reports in
core terms, and place one replica of each model when no plan exists.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from control.core.types import DeviceSpec
from control.executor.protocol import DeviceInfo
from control.runtime.live import InitialReplica

LOCAL_NODE = "local"


#: the label of a device (``DeviceInfo.labels``) naming its NVLink domain, when a backend
#: over a cluster knows it (the GPUs of one node share it)
NVLINK_LABEL = "nvlink"


def device_specs(
    devices: Iterable[DeviceInfo], node_id: str = LOCAL_NODE
) -> tuple[DeviceSpec, ...]:
    """Core view of the executor's devices. A device of a cluster node (``DeviceInfo.node``)
    is in that node (a topology domain) and its NVLink domain (label ``nvlink``; else its
    node) is its interconnect group; one without is on ``node_id``, one group per host."""
    return tuple(
        DeviceSpec(
            device_id=d.device_id,
            node_id=d.node or node_id,
            kind="gpu" if d.kind == "cuda" else "cpu",
            accelerator=d.kind,
            memory_mib=d.memory_budget_mib,
            interconnect_group=dict(d.labels).get(NVLINK_LABEL) or d.node or node_id,
        )
        for d in devices
    )


def one_of_each(model_keys: Sequence[str], device_ids: Sequence[str]) -> tuple[InitialReplica, ...]:
    """One replica per model, models spread round-robin over the devices (no active plan)."""
    if not device_ids:
        raise ValueError("device_ids is empty: nothing to place replicas on")
    return tuple(
        InitialReplica(key, device_ids[i % len(device_ids)]) for i, key in enumerate(model_keys)
    )
