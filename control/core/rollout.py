"""Placement convergence: roll the fleet to a desired placement without dropping work.

``PlacementChanged`` names a target (model, device group) -> (replicas, pool); the
``placement`` phase of every step moves the fleet towards it, each transition an action with a
reason a driver can audit:

1. missing replicas are loaded on their target devices (``LoadModel``); they take no work while
   loading, so no hot replica is paused and nothing is routed to a cold replica;
2. a new replica that reports loaded (and warm) becomes routable (``ReplicaRoutable``);
3. once every issued load is routable, surplus replicas are drained (``DrainReplica``): no new
   work, their queued steps move to other replicas of the model (``MoveStep``), work in flight
   finishes; a drained replica with nothing left is evicted (``EvictReplica``);
4. a load that did not fit waits until evictions free its memory;
5. ``RolloutTransition(... "completed")`` when every slot holds its count; canary splits apply.

A failed load aborts the rollout and converges back to the placement held when it started (a
rollback, done the same way); ``RollbackRequested`` does that for the last completed rollout.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from control.core.actions import (
    DrainReplica,
    LoadModel,
    MoveStep,
    ReplicaRoutable,
    RolloutTransition,
)
from control.core.context import CoreState
from control.core.errors import UnknownDeviceError, UnknownModelError
from control.core.loads import evict, load_us
from control.core.queueing import dequeue, route
from control.core.state import ReplicaRecord
from control.core.types import ReplicaState

Slot = tuple[str, tuple[str, ...]]
Target = dict[Slot, tuple[int, str]]
Splits = dict[str, tuple[tuple[str, int], ...]]
_ACTIVE = ("loading", "draining")


@dataclass
class Rollout:
    """One rollout in progress (or the last one, kept for the snapshot)."""

    plan_id: str
    target: Target
    splits: Splits
    previous: Target  # the fleet when it started: restored when it fails
    previous_splits: Splits
    started_at: float
    rollback: bool = False
    state: str = "loading"
    pending: set[str] = field(default_factory=set)  # new replicas loading, not routable
    blocked: list[Slot] = field(default_factory=list)  # loads waiting for memory
    draining: set[str] = field(default_factory=set)
    loaded: int = 0
    evicted: int = 0
    moved: int = 0
    reason: str = ""


def current_target(st: CoreState) -> Target:
    """The fleet as a placement: routable or loading replicas per slot (drains excluded)."""
    out: Target = {}
    for rec in st.cluster.replicas.values():
        if rec.draining or rec.state not in (ReplicaState.READY, ReplicaState.LOADING):
            continue
        slot = st.cluster.slot_of(rec)
        count, _ = out.get(slot, (0, rec.pool))
        out[slot] = (count + 1, rec.pool)
    return out


def check_placements(st: CoreState, placements: tuple, splits: tuple) -> None:  # noqa: ANN001
    """Raise naming the first unknown model or device of a ``PlacementChanged``."""
    for model_key, device_ids, _, _ in placements:
        if model_key not in st.models:
            raise UnknownModelError(model_key)
        for d in device_ids:
            if d not in st.cluster.devices:
                raise UnknownDeviceError(d)
    for _, variants in splits:
        for key, _ in variants:
            if key not in st.models:
                raise UnknownModelError(key)


def begin(st: CoreState, plan_id: str, target: Target, splits: Splits, reason: str,
          rollback: bool = False) -> None:  # fmt: skip
    """Start converging to ``target``; a rollout still running is superseded (its loads in
    progress are kept and judged against the new target)."""
    old = st.rollout if st.rollout is not None and st.rollout.state in _ACTIVE else None
    ro = Rollout(plan_id, target, splits, current_target(st), dict(st.splits), st.now, rollback)
    if not st.placement_history:
        st.placement_history.append(("initial", dict(ro.previous), dict(st.splits)))
    if old is not None:
        ro.pending, ro.draining = set(old.pending), set(old.draining)
        ro.previous, ro.previous_splits = old.previous, old.previous_splits
        _transition(st, old, "aborted", f"superseded by plan {plan_id}")
    st.rollout = ro
    kind = "rollback" if rollback else "rollout"
    st.emit(RolloutTransition(plan_id, "", "loading", f"{kind} of plan {plan_id}: {reason}"))
    st.counters[f"{kind}s.started"] += 1


def _transition(st: CoreState, ro: Rollout, to: str, reason: str) -> None:
    st.emit(RolloutTransition(ro.plan_id, ro.state, to, reason))
    ro.state, ro.reason = to, reason


def _fits(st: CoreState, model_key: str, device_ids: tuple[str, ...]) -> bool:
    need = st.models[model_key].memory_mib
    devs = st.cluster.devices
    return all(devs[d].up and devs[d].free_mib >= need for d in device_ids)


def _load(st: CoreState, ro: Rollout, slot: Slot, pool: str) -> None:
    model_key, device_ids = slot
    model = st.models[model_key]
    specs = tuple(st.cluster.devices[d].spec for d in device_ids)
    rid = st.next_id(f"{model_key}@{device_ids[0]}#")
    rec = ReplicaRecord(
        rid, model, specs, pool, ReplicaState.LOADING, st.config.prefix_capacity_blocks
    )
    rec.ready_at = st.now + load_us(st, model, specs[0]) / 1e6
    rec.routable, rec.plan_id, rec.last_used = False, ro.plan_id, st.now
    rec.load_reason = f"plan {ro.plan_id} wants {model_key} on {', '.join(device_ids)}"
    st.cluster.add_replica(rec)
    ro.pending.add(rid)
    why = f"{rec.load_reason}; it takes no work until loaded and warm"
    st.emit(LoadModel(rid, model_key, device_ids, pool, False, why))


def _slots(st: CoreState, ro: Rollout) -> dict[Slot, list[ReplicaRecord]]:
    have: dict[Slot, list[ReplicaRecord]] = {s: [] for s in ro.target}
    for rec in st.cluster.replicas.values():
        if rec.state in (ReplicaState.READY, ReplicaState.LOADING):
            have.setdefault(st.cluster.slot_of(rec), []).append(rec)
    return have


def _keep_order(rec: ReplicaRecord) -> tuple:
    """Replicas kept first: routable ones (old before new), then loading ones."""
    return (rec.draining, not rec.routable, rec.plan_id is not None, rec.replica_id)


def _reconcile(st: CoreState, ro: Rollout) -> None:
    """Issue loads for missing replicas, undrain replicas the target wants back, pick surplus."""
    ro.blocked = []
    surplus: list[ReplicaRecord] = []
    for slot, recs in sorted(_slots(st, ro).items()):
        want, pool = ro.target.get(slot, (0, "hot"))
        recs.sort(key=_keep_order)
        kept, extra = recs[:want], recs[want:]
        for rec in kept:
            if rec.draining:
                rec.draining, rec.routable = False, True
                ro.draining.discard(rec.replica_id)
                why = f"plan {ro.plan_id} keeps {rec.replica_id}: it takes work again"
                st.emit(ReplicaRoutable(rec.replica_id, rec.model.key, why))
        for _ in range(want - len(kept)):
            if _fits(st, *slot):
                _load(st, ro, slot, pool)
            else:
                ro.blocked.append(slot)
        surplus.extend(extra)
    for rec in surplus:
        if rec.replica_id in ro.pending or (not rec.routable and not rec.draining):
            ro.pending.discard(rec.replica_id)  # a new replica the target no longer wants
            evict(st, rec, f"plan {ro.plan_id} no longer wants {rec.replica_id} (never routed)")
            ro.evicted += 1
        elif not rec.draining and not ro.pending:
            _drain(st, ro, rec)


def _drain(st: CoreState, ro: Rollout, rec: ReplicaRecord) -> None:
    if ro.state == "loading":
        _transition(st, ro, "draining", "every new replica is routable; surplus ones drain")
    rec.draining, rec.routable = True, False
    ro.draining.add(rec.replica_id)
    why = f"plan {ro.plan_id} moves {rec.model.key} off {rec.replica_id}: no new work"
    st.emit(DrainReplica(rec.replica_id, rec.model.key, tuple(d.device_id for d in rec.devices),
                         why))  # fmt: skip
    st.sessions = {s: r for s, r in st.sessions.items() if r != rec.replica_id}


def _move_queue(st: CoreState, ro: Rollout, rec: ReplicaRecord) -> None:
    """Queued steps go to other routable replicas of the model (kept when there are none)."""
    if not rec.queue or not st.cluster.serving(rec.model.key):
        return
    for step in list(rec.queue.values()):
        dequeue(st, step, dispatched=False)
        route(st, step)
        if step.replica_id is not None:
            why = f"{rec.replica_id} drains for plan {ro.plan_id}; {step.key} moves"
            st.emit(MoveStep(step.key, rec.replica_id, step.replica_id, why))
            ro.moved += 1


def advance(st: CoreState) -> None:
    """The ``placement`` phase: move an active rollout one step further (see module doc)."""
    ro = st.rollout
    if ro is None or ro.state not in _ACTIVE:
        return
    lost = sorted(r for r in ro.pending if r not in st.cluster.replicas)
    ro.pending.difference_update(lost)
    if lost:
        _abort(st, ro, f"load of {lost[0]} failed")
        return
    for rid in sorted(ro.pending):
        rec = st.cluster.replicas[rid]
        if rec.state == ReplicaState.READY:
            ro.pending.discard(rid)
            rec.routable = True
            ro.loaded += 1
            st.dirty.add(rid)
            why = f"{rid} loaded and warm for plan {ro.plan_id}: routable"
            st.emit(ReplicaRoutable(rid, rec.model.key, why))
    _reconcile(st, ro)
    for rid in sorted(ro.draining):
        drec = st.cluster.replicas.get(rid)
        if drec is None:
            ro.draining.discard(rid)
            continue
        _move_queue(st, ro, drec)
        if not drec.running and not drec.queue:
            ro.draining.discard(rid)
            evict(st, drec, f"{rid} drained for plan {ro.plan_id}: nothing queued or in flight")
            ro.evicted += 1
    _settle(st, ro)


def _settle(st: CoreState, ro: Rollout) -> None:
    if ro.pending or ro.draining:
        return
    if ro.blocked:
        model, devs = ro.blocked[0]
        _abort(st, ro, f"{model} does not fit on {', '.join(devs)} even after the drains")
        return
    st.splits = dict(ro.splits)
    st.placement_history.append((ro.plan_id, dict(ro.target), dict(ro.splits)))
    _transition(st, ro, "completed", f"every slot of plan {ro.plan_id} holds its replicas "
                f"({ro.loaded} loaded, {ro.evicted} evicted, {ro.moved} moved)")  # fmt: skip


def _abort(st: CoreState, ro: Rollout, why: str) -> None:
    """Stop the rollout; converge back to where it started (a failed rollback just stops)."""
    st.counters["rollouts.aborted"] += 1
    if ro.rollback:
        _transition(st, ro, "failed", f"rollback failed ({why}); fleet left as it is")
        return
    _transition(st, ro, "aborted", f"{why}: restoring the placement held before")
    ro.state = "aborted"
    nxt = Rollout(f"{ro.plan_id}:rollback", ro.previous, ro.previous_splits, ro.previous,
                  ro.previous_splits, st.now, True)  # fmt: skip
    nxt.pending, nxt.draining = ro.pending, ro.draining
    st.rollout = nxt
    st.emit(RolloutTransition(nxt.plan_id, "", "loading", f"rollback after: {why}"))
    st.counters["rollbacks.started"] += 1
    advance(st)


def request_rollback(st: CoreState, reason: str) -> None:
    """Converge to the placement before the last completed rollout (refused when none)."""
    hist = st.placement_history
    if len(hist) < 2:
        st.emit(RolloutTransition("", "", "refused", f"no earlier plan to roll back to ({reason})"))
        return
    _, target, splits = hist[-2]
    begin(st, f"{hist[-1][0]}:rollback", dict(target), dict(splits), reason, rollback=True)
