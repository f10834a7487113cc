"""Whether a placement target's tensor-parallel groups can be held, decided when it arrives.

A model with ``tp_degree`` k > 1 runs on a group of k devices of ONE interconnect domain (a
device's ``interconnect_group``, else its node), each with room for it. A target
(``PlacementChanged``) that names a group no domain can give would never converge: its load
would wait for memory forever, or span domains the interconnect does not join. So it is refused
as it arrives, with a sentence naming the model, its degree and the domains, before anything
moves.

Room is judged against the target itself, not the fleet now: a rollout drains what the target
drops before it waits on memory, so a device's room for a group is its memory less what the
target's OTHER placements put on it. A device that is down has no room.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping

from control.core.state import DeviceRecord
from control.core.types import ModelSpec

#: (model key, device ids, replicas, pool): a ``PlacementChanged`` row
Row = tuple[str, tuple[str, ...], int, str]


def domain_of(device: DeviceRecord) -> str:
    """A device's interconnect domain: its group, else its node (the core's cold loads too)."""
    return device.spec.interconnect_group or device.spec.node_id


def group_refusal(
    models: Mapping[str, ModelSpec], devices: Mapping[str, DeviceRecord], rows: tuple[Row, ...]
) -> tuple[str, str] | None:
    """(model key, why) of the first row whose tensor-parallel group cannot be held (the module
    doc), or None when every group can. Models and devices must be known (checked before)."""
    placed: Counter[str] = Counter()
    for key, group, replicas, _ in rows:
        for d in group:
            placed[d] += models[key].memory_mib * replicas
    for key, group, replicas, _ in rows:
        model = models[key]
        if model.tp_degree > 1:
            why = _why_not(model, group, replicas, devices, placed)
            if why is not None:
                return key, why
    return None


def _why_not(
    model: ModelSpec, group: tuple[str, ...], replicas: int,
    devices: Mapping[str, DeviceRecord], placed: Counter[str],
) -> str | None:  # fmt: skip
    own = model.memory_mib * replicas
    free = [d for d, rec in devices.items()
            if rec.up and rec.spec.memory_mib - (placed[d] - (own if d in group else 0)) >= own]  # fmt: skip
    per_domain = Counter(domain_of(devices[d]) for d in free)
    k, mib = model.tp_degree, own
    if not per_domain or max(per_domain.values()) < k:
        most = max(per_domain.values(), default=0)
        where = ", ".join(f"{name}: {n}" for name, n in sorted(per_domain.items())) or "none"
        return (f"tp_degree {k}: no interconnect domain has {k} devices free for {mib} MiB "
                f"(at most {most}; free devices per domain: {where})")  # fmt: skip
    spans = sorted({domain_of(devices[d]) for d in group})
    if len(spans) > 1:
        best = max(sorted(per_domain), key=lambda name: per_domain[name])
        return (f"tp_degree {k}: the group {list(group)} spans interconnect domains "
                f"{', '.join(spans)}; a group stays in one domain ({best} has "
                f"{per_domain[best]} devices free)")  # fmt: skip
    short = [d for d in group if d not in free]
    if short:
        return (f"tp_degree {k}: device(s) {', '.join(short)} of the group in domain {spans[0]} "
                f"have no {mib} MiB free for it (down, or full with the target's other "
                f"placements)")  # fmt: skip
    return None
