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
from control.runtime.joins import spec_of
from control.runtime.live import InitialReplica

LOCAL_NODE = "local"


def device_specs(
    devices: Iterable[DeviceInfo], node_id: str = LOCAL_NODE
) -> tuple[DeviceSpec, ...]:
    """Core view of the executor's devices: one interconnect group per host; a device of a
    cluster node is in that node and its NVLink domain (:func:`~control.runtime.joins.spec_of`)."""
    return tuple(spec_of(d, node_id) for d in devices)


def one_of_each(model_keys: Sequence[str], device_ids: Sequence[str]) -> tuple[InitialReplica, ...]:
    """One replica per model, models spread round-robin over the devices (no active plan)."""
    if not device_ids:
        raise ValueError("device_ids is empty: nothing to place replicas on")
    return tuple(
        InitialReplica(key, device_ids[i % len(device_ids)]) for i, key in enumerate(model_keys)
    )
