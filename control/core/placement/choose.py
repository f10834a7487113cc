"""Device choice shared by the placement stages: one device, or a tensor-parallel group inside
one interconnect domain.

Both take the feasible devices only (room after headroom, a shared precision, the right pool,
not already holding the model) and rank them by a key built from the stage's preferences:
``spread`` (fewest replicas of the model on the node first), ``affinity`` (most traffic with the
neighbours already on the device first), stickiness (devices of the current plan first), then
best fit (least memory left over) and snapshot order as the final tie-break.
"""

from __future__ import annotations

from control.core.placement.workspace import Group, Workspace


def _device_key(
    ws: Workspace, key: str, d: str, aff: dict[str, float], cur: set[str], spread: bool
) -> tuple:
    node_count = ws.on_node.get((key, ws.node(d)), 0) if spread else 0
    return (node_count, -aff.get(d, 0.0), d not in cur, ws.free[d] - ws.mem(key), ws.index[d])


def feasible(ws: Workspace, key: str, pool: str) -> list[str]:
    """Devices of ``pool`` that can take one more replica (or shard) of ``key`` now."""
    mem, free, hosted = ws.mem(key), ws.free, ws.hosted
    return [d for d in ws.candidates(key, pool) if free[d] >= mem and key not in hosted[d]]


def pick_device(
    ws: Workspace, key: str, pool: str, *, spread: bool = False, affinity: bool = True
) -> str | None:
    """The best device for one single-device replica of ``key``, or None when none fits.

    Same ranking as ``_device_key``, written as one flat loop: this is the planner's hot path
    (a 1,000-device fleet is scanned once per replica)."""
    mem, free, hosted, index, on_node = ws.mem(key), ws.free, ws.hosted, ws.index, ws.on_node
    aff = ws.affinity(key) if affinity else {}
    cur = ws.current_devices(key)
    node_of = ws.node_of
    best, best_key = None, None
    for d in ws.candidates(key, pool):
        f = free[d]
        if f < mem or key in hosted[d]:
            continue
        k = (
            on_node.get((key, node_of[d]), 0) if spread else 0,
            -aff.get(d, 0.0),
            d not in cur,
            f - mem,
            index[d],
        )
        if best_key is None or k < best_key:
            best, best_key = d, k
    return best


def pick_group(
    ws: Workspace, key: str, pool: str, *, spread: bool = False, affinity: bool = True
) -> Group | None:
    """The best ``tp_degree`` devices of one interconnect domain for a replica of ``key``, or
    None when no domain has that many feasible devices. Never crosses domains."""
    k = ws.models[key].spec.tp_degree
    by_domain: dict[str, list[str]] = {}
    for d in feasible(ws, key, pool):
        by_domain.setdefault(ws.devices[d].domain, []).append(d)
    aff = ws.affinity(key) if affinity else {}
    cur = ws.current_devices(key)
    best: tuple | None = None
    best_group: Group | None = None
    for domain in sorted(by_domain):
        devs = by_domain[domain]
        if len(devs) < k:
            continue
        chosen = sorted(devs, key=lambda d: _device_key(ws, key, d, aff, cur, False))[:k]
        score = (
            ws.on_node.get((key, ws.node(chosen[0])), 0) if spread else 0,
            -sum(aff.get(d, 0.0) for d in chosen),
            sum(d not in cur for d in chosen),
            sum(ws.free[d] for d in chosen) - k * ws.mem(key),
            min(ws.index[d] for d in chosen),
        )
        if best is None or score < best:
            best, best_group = score, tuple(sorted(chosen, key=ws.index.__getitem__))
    return best_group


def pick(
    ws: Workspace, key: str, pool: str, *, spread: bool = False, affinity: bool = True
) -> Group | None:
    """One device or a TP group, by the model's ``tp_degree``."""
    if ws.models[key].spec.tp_degree > 1:
        return pick_group(ws, key, pool, spread=spread, affinity=affinity)
    d = pick_device(ws, key, pool, spread=spread, affinity=affinity)
    return None if d is None else (d,)
