"""Why a replica could not be placed, and which constraints bound: called by a stage right after
``pick`` found nothing. Records the reason and constraints on the workspace; changes nothing
else."""

from __future__ import annotations

from collections import Counter

from control.core.placement.workspace import Workspace

Found = dict[tuple[str, str], str]


def _size_problem(
    ws: Workspace, key: str, pool: str, compat: list[str], found: Found
) -> str | None:
    """The model does not fit on any compatible device even when empty."""
    mem = ws.mem(key)
    cap = max(ws.devices[d].spec.memory_mib - ws.reserved[d] for d in compat)
    if cap >= mem:
        return None
    raw = max(ws.devices[d].spec.memory_mib for d in compat)
    if raw < mem:
        found[("device_size", key)] = f"needs {mem} MiB per device; the largest is {raw} MiB"
        return f"needs {mem} MiB per device; the largest {pool} device it can run on has {raw} MiB"
    reservations = ws.snapshot.reservations_of()
    for d in compat:
        if ws.devices[d].spec.memory_mib >= mem:
            for rid in reservations.get(d, ()):
                found.setdefault(("headroom", rid), f"keeps {key} ({mem} MiB) off device {d}")
    return f"needs {mem} MiB per device; headroom reservations leave at most {cap} MiB"


def _room_problem(ws: Workspace, key: str, pool: str, compat: list[str], found: Found) -> str:
    """Devices large enough exist but are full, already hold the model, or (TP) are scattered."""
    mem, k = ws.mem(key), ws.models[key].spec.tp_degree
    big = [d for d in compat if ws.devices[d].spec.memory_mib - ws.reserved[d] >= mem]
    room = [d for d in big if ws.free[d] >= mem]
    reservations = ws.snapshot.reservations_of()
    for d in big:
        if ws.free[d] < mem:
            found.setdefault(("memory", d), f"too full for {key} ({mem} MiB)")
            if ws.free[d] + ws.reserved[d] >= mem:
                for rid in reservations.get(d, ()):
                    found.setdefault(("headroom", rid), f"keeps {key} ({mem} MiB) off device {d}")
    open_room = [d for d in room if key not in ws.hosted[d]]
    if room and not open_room:
        found[("spread", key)] = "every device with room already holds one of its replicas"
        return f"every {pool} device with {mem} MiB free already holds a replica of it"
    if k > 1 and open_room:
        domains = Counter(ws.devices[d].domain for d in open_room)
        most = max(domains.values())
        found.setdefault(
            ("tp_domain", key), f"needs {k} devices with room in one domain, found {most}"
        )
        return f"tp_degree {k}: no interconnect domain has {k} devices with {mem} MiB free (at most {most})"
    most_free = max(big, key=lambda d: (ws.free[d], -ws.index[d]))
    return f"no {pool} device has {mem} MiB free (most: {ws.free[most_free]} MiB on {most_free})"


def diagnose(ws: Workspace, key: str, pool: str) -> None:
    """Record on ``ws`` why one more replica of ``key`` does not fit in ``pool``."""
    found: Found = {}
    model = ws.models[key]
    in_pool = [d for d in ws.devices if (d in ws.cold) == (pool == "cold")]
    compat = ws.candidates(key, pool)
    if not in_pool:
        found[("pool", pool)] = f"the {pool} pool has no up device"
        why = f"the {pool} pool has no up device"
    elif not compat:
        found[("precision", key)] = f"no up device runs any of {list(model.precisions)}"
        why = f"no {pool} device runs any of its precisions {list(model.precisions)}"
    else:
        why = (
            _tp_problem(ws, key, compat, found)
            or _size_problem(ws, key, pool, compat, found)
            or _room_problem(ws, key, pool, compat, found)
        )
    if pool == "hot" and ws.cold:
        mem = ws.mem(key)
        spare = [d for d in ws.cold if ws.devices[d].spec.memory_mib - ws.reserved[d] >= mem]
        if spare:
            found.setdefault(("cold_pool", "cold"), f"{len(ws.cold)} devices kept for cold loads")
    ws.fail(key, why, found)


def _tp_problem(ws: Workspace, key: str, compat: list[str], found: Found) -> str | None:
    """No interconnect domain has ``tp_degree`` compatible devices at all."""
    k = ws.models[key].spec.tp_degree
    if k == 1:
        return None
    largest = max(Counter(ws.devices[d].domain for d in compat).values())
    if largest >= k:
        return None
    found[("tp_domain", key)] = f"needs {k} devices in one domain; the largest has {largest}"
    return f"tp_degree {k} needs {k} devices of one interconnect domain; the largest has {largest}"
