"""Inputs of a placement policy: an immutable snapshot of the cluster.

A :class:`ClusterSnapshot` holds the devices (with memory, interconnect domain, node, status and
the precisions they run), the models in registration order (with memory, tensor-parallel degree
and the precisions they ship in, preferred first), the headroom reservations of the tenancy half
and the plan in force now. Nothing here changes after construction.
"""

from __future__ import annotations

from dataclasses import dataclass

from control.core.placement.plan import PlacementPlan, PlanError
from control.core.tenancy.base import HeadroomSpec
from control.core.types import DeviceSpec, ModelSpec


@dataclass(frozen=True)
class DeviceEntry:
    """A device as placement sees it. Empty ``precisions``: the device runs any precision."""

    spec: DeviceSpec
    precisions: frozenset[str] = frozenset()

    @property
    def device_id(self) -> str:
        return self.spec.device_id

    @property
    def domain(self) -> str:
        """Interconnect domain; a device without one forms a domain with its node's devices."""
        return self.spec.interconnect_group or f"node:{self.spec.node_id}"


@dataclass(frozen=True)
class ModelEntry:
    """A model as placement sees it. ``precisions`` in order of preference; empty: any."""

    spec: ModelSpec
    precisions: tuple[str, ...] = ()

    @property
    def key(self) -> str:
        return self.spec.key


def precision_for(model: ModelEntry, device: DeviceEntry) -> str | None:
    """The model's most preferred precision the device runs; "any" when either side is
    unconstrained; None when they share none (the model cannot run there)."""
    if not model.precisions:
        return "any"
    if not device.precisions:
        return model.precisions[0]
    for p in model.precisions:
        if p in device.precisions:
            return p
    return None


@dataclass(frozen=True)
class ClusterSnapshot:
    devices: tuple[DeviceEntry, ...]
    models: tuple[ModelEntry, ...]  # registration order (the naive baseline follows it)
    headroom: tuple[HeadroomSpec, ...] = ()
    current: PlacementPlan | None = None

    def __post_init__(self) -> None:
        ids = [d.device_id for d in self.devices]
        if len(set(ids)) != len(ids):
            raise PlanError(f"ClusterSnapshot.devices={sorted(ids)!r}: device ids must be distinct")
        keys = [m.key for m in self.models]
        if len(set(keys)) != len(keys):
            raise PlanError(f"ClusterSnapshot.models={sorted(keys)!r}: model keys must be distinct")
        known = set(ids)
        for h in self.headroom:
            if not 0 <= h.reserved_milli <= 1000:
                raise PlanError(
                    f"HeadroomSpec.reserved_milli={h.reserved_milli!r}: must be in 0..1000"
                )
            unknown = sorted(h.device_ids - known)
            if unknown:
                raise PlanError(
                    f"HeadroomSpec.device_ids={unknown!r}: unknown devices in {h.reservation_id}"
                )

    def reserved_mib(self) -> dict[str, int]:
        """Device id -> MiB kept free for headroom: each reservation covering the device keeps
        ``reserved_milli`` thousandths of its memory (rounded up), summed, capped at the memory."""
        mem = {d.device_id: d.spec.memory_mib for d in self.devices}
        out = dict.fromkeys(mem, 0)
        for h in self.headroom:
            for d in h.device_ids:
                out[d] += -(-mem[d] * h.reserved_milli // 1000)
        return {d: min(v, mem[d]) for d, v in out.items()}

    def reservations_of(self) -> dict[str, tuple[str, ...]]:
        """Device id -> ids of the reservations covering it (sorted)."""
        out: dict[str, list[str]] = {}
        for h in self.headroom:
            if h.reserved_milli > 0:
                for d in h.device_ids:
                    out.setdefault(d, []).append(h.reservation_id)
        return {d: tuple(sorted(v)) for d, v in out.items()}
