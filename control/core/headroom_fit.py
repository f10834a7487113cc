"""Headroom before binding: lower-class work never takes the slots a reservation holds back.

The tenancy half's headroom guard (``TenancyPolicy.headroom_check``) is asked at dispatch
(``batcher._headroom_ok``). Asked only there, a step of a class a reservation refuses could
still be bound to a replica on a reserved device (late binding, routing, stealing): it took the
room the allowed classes needed and waited there for the pool to free up, so a critical step
either waited for that room or queued behind flood steps on the other devices. So the core asks
the guard before it binds too, over the pool's projected occupancy: the slots running plus the
steps already bound to replica queues (they start next), the target replica's own running
batches left out (a replica takes work only when it is about to be free: ``binding.room``).

A replica whose reservation refuses some classes is *kept* for the classes it admits: a step of
such a class goes there first (its queue is empty, the others may hold lower-class work).

Pure: reads the cluster and asks the tenancy half (which records the occupancy it saw).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

from control.core.cluster import Cluster
from control.core.context import Policies
from control.core.pending import PendingQueue
from control.core.state import QueuedStep, ReplicaRecord
from control.core.tenancy.base import PRIORITY_CLASSES, PoolUsage

#: Every priority class: what a replica outside any reservation admits.
ALL_CLASSES: frozenset[str] = frozenset(PRIORITY_CLASSES)


def _running(cluster: Cluster, rec: ReplicaRecord) -> int:
    """Steps of ``rec``'s batches in flight."""
    batches = cluster.batches
    total = 0
    for b in rec.running:
        batch = batches.get(b)
        if batch is not None:
            total += len(batch.items)
    return total


def occupancy(pol: Policies, cluster: Cluster) -> dict[str, tuple[int, int]]:
    """Reserved device id -> (slot capacity, slots running or bound) as they are now."""
    out: dict[str, tuple[int, int]] = {}
    replicas = cluster.replicas
    for dev_id in sorted(pol.reserved_devices):
        dev = cluster.devices.get(dev_id)
        if dev is None:
            continue
        cap = used = 0
        for rid in dev.replicas:
            r = replicas.get(rid)
            if r is not None:
                cap += r.model.max_batch_size
                used += len(r.queue) + _running(cluster, r)
        out[dev_id] = (cap or 1, used)
    return out


def projected_usage(
    cluster: Cluster, occupancy: Mapping[str, tuple[int, int]], target: ReplicaRecord,
    extra: Mapping[str, int] | None = None,
) -> dict[str, PoolUsage]:  # fmt: skip
    """Reserved device id -> its slots as ``target`` would find them when it starts its next
    batch: running plus bound (at most the capacity), ``target``'s own running batches left
    out; ``extra`` (replica id -> steps) counts steps about to be bound to other replicas."""
    own = {d.device_id for d in target.devices}
    mine = _running(cluster, target)
    usage: dict[str, PoolUsage] = {}
    for dev_id, (cap, used) in occupancy.items():
        if dev_id in own:
            used -= mine
        if extra:
            for rid in cluster.devices[dev_id].replicas:
                if rid != target.replica_id:
                    used += extra.get(rid, 0)
        usage[dev_id] = PoolUsage(dev_id, cap, min(cap, used))
    return usage


def fitting_classes(
    pol: Policies, cluster: Cluster, rec: ReplicaRecord,
    occupancy: Mapping[str, tuple[int, int]], extra: Mapping[str, int] | None = None,
) -> frozenset[str]:  # fmt: skip
    """The priority classes one more step of which ``rec`` may be bound to now (``extra``:
    as for ``projected_usage``)."""
    device_id = rec.device.device_id
    if device_id not in pol.reserved_devices:
        return ALL_CLASSES
    usage = projected_usage(cluster, occupancy, rec, extra)
    check = pol.tenancy.headroom_check
    return frozenset([c for c in PRIORITY_CLASSES if check(device_id, c, usage).allowed])


def fits(pol: Policies, cluster: Cluster, rec: ReplicaRecord, priority_class: str) -> bool:
    """May one more step of ``priority_class`` be bound to ``rec`` now?"""
    if rec.device.device_id not in pol.reserved_devices:
        return True
    usage = projected_usage(cluster, occupancy(pol, cluster), rec)
    return pol.tenancy.headroom_check(rec.device.device_id, priority_class, usage).allowed


def fitting(
    pol: Policies, cluster: Cluster, candidates: list[ReplicaRecord], priority_class: str
) -> list[ReplicaRecord]:
    """The candidates a step of ``priority_class`` may be bound to; all of them when none
    may (the step then waits on one, for the dispatch check, rather than nowhere)."""
    if not pol.reserved_devices:
        return candidates
    ok = [r for r in candidates if fits(pol, cluster, r, priority_class)]
    return ok or candidates


def kept_from(
    pol: Policies, cluster: Cluster, models: frozenset, priority_class: str
) -> frozenset[str]:
    """Replicas of ``models`` a step of ``priority_class`` may not be bound to now (their
    reservation holds them for other classes): admission spreads the class's backlog over the
    others (``capacity.model_delay_s``)."""
    if not pol.reserved_devices:
        return frozenset()
    kept: list[str] = []
    for key in sorted(m for m in models if m):
        for rec in cluster.by_model.get(key, {}).values():
            if not fits(pol, cluster, rec, priority_class):
                kept.append(rec.replica_id)
    return frozenset(kept)


def room_classes(
    pol: Policies, cluster: Cluster, rooms: Mapping[str, int]
) -> dict[str, frozenset[str]]:
    """Replica id -> the classes it may be bound to now, for every replica with room."""
    reps, occ = cluster.replicas, occupancy(pol, cluster)
    return {rid: fitting_classes(pol, cluster, reps[rid], occ) for rid in rooms}


def held_for(pol: Policies, cluster: Cluster, device_id: str, priority_class: str) -> bool:
    """Does a reservation on ``device_id`` hold slots for ``priority_class``? (The guard lets
    the class in, and not preemptibly, over the device full of preemptible work.)"""
    occ = occupancy(pol, cluster)
    if device_id not in occ:
        return False
    usage = {d: PoolUsage(d, cap, min(cap, n)) for d, (cap, n) in occ.items()}
    cap = occ[device_id][0]
    usage[device_id] = PoolUsage(device_id, cap, cap, cap)
    verdict = pol.tenancy.headroom_check(device_id, priority_class, usage)
    return verdict.allowed and not verdict.preemptible


def kept_rooms(
    pol: Policies, cluster: Cluster, rooms: Mapping[str, int]
) -> dict[str, frozenset[str]] | None:
    """``room_classes``, or None when binding every room full could not make any of them
    refuse a class (no reservation holds anything back here: bind as usual, all at once)."""
    reps, occ = cluster.replicas, occupancy(pol, cluster)
    for rid in rooms:
        if fitting_classes(pol, cluster, reps[rid], occ, rooms) != ALL_CLASSES:
            return room_classes(pol, cluster, rooms)
    return None


def bind_kept(
    pol: Policies, cluster: Cluster, queue: PendingQueue[QueuedStep], rooms: dict[str, int],
    fit: dict[str, frozenset[str]], bind: Callable[[QueuedStep, dict[str, int]], None],
    now: float,
) -> None:  # fmt: skip
    """Bind pending steps one at a time, in fair-share order among the classes some room
    admits: each to a room kept for its class if there is one (``bind`` picks among the rooms
    it is given and binds; the usual routing), else to any room that admits it. The rooms'
    classes are asked again after each binding (the pool fills up)."""
    while fit:
        admitted: set[str] = set()
        for classes in fit.values():
            admitted.update(classes)
        if not admitted:
            return
        taken = queue.take(1, pol.tenancy, now, frozenset(admitted))
        if not taken:
            return
        step = taken[0]
        step.pending_model = None
        cls = step.work.priority_class
        ok = [rid for rid in fit if cls in fit[rid]]
        kept = [rid for rid in ok if fit[rid] != ALL_CLASSES]
        offered = {rid: rooms[rid] for rid in (kept or ok)}
        bind(step, offered)
        rid = step.replica_id or ""
        if rid in rooms:
            rooms[rid] -= 1
            if not rooms[rid]:
                del rooms[rid]
        fit = room_classes(pol, cluster, rooms)
