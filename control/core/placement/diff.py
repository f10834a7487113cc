"""Plan diffs: what changes, replica by replica, when ``new`` replaces ``old``.

Per (model, device group) the replicas both plans hold are unchanged (with a pool change when
the pool differs); the old plan's surplus replicas of a model are paired with the new plan's
surplus replicas of the same model as moves (leave group A for group B), and what stays
unpaired is an eviction (old) or a load (new). Every entry is one replica, so the lists are
exact: ``apply_diff(old, diff(old, new)).placements == new.placements``.
"""

from __future__ import annotations

from dataclasses import dataclass

from control.core.placement.plan import Placement, PlacementPlan, PlanError

Group = tuple[str, ...]


@dataclass(frozen=True)
class Load:
    model_key: str
    device_ids: Group
    pool: str
    reason: str


@dataclass(frozen=True)
class Eviction:
    model_key: str
    device_ids: Group
    pool: str
    reason: str


@dataclass(frozen=True)
class Move:
    """One replica of ``model_key`` leaves ``from_devices`` for ``to_devices``."""

    model_key: str
    from_devices: Group
    to_devices: Group
    pool: str  # the pool at the destination
    reason: str


@dataclass(frozen=True)
class PoolChange:
    model_key: str
    device_ids: Group
    old_pool: str
    new_pool: str
    replicas: int


@dataclass(frozen=True)
class PlanDiff:
    loads: tuple[Load, ...] = ()
    evictions: tuple[Eviction, ...] = ()
    moves: tuple[Move, ...] = ()
    pool_changes: tuple[PoolChange, ...] = ()
    unchanged: tuple[Placement, ...] = ()  # replicas kept in place, as the new plan has them

    @property
    def empty(self) -> bool:
        """True when applying the diff changes nothing."""
        return not (self.loads or self.evictions or self.moves or self.pool_changes)

    def summary(self) -> str:
        return (
            f"{len(self.loads)} loads, {len(self.evictions)} evictions, {len(self.moves)} moves, "
            f"{len(self.pool_changes)} pool changes, {sum(p.replicas for p in self.unchanged)} unchanged"
        )


def diff(old: PlacementPlan | None, new: PlacementPlan) -> PlanDiff:
    """The replica-exact difference from ``old`` (None: nothing placed) to ``new``."""
    before = {p.slot: p for p in (old.placements if old else ())}
    after = {p.slot: p for p in new.placements}
    unchanged: list[Placement] = []
    pool_changes: list[PoolChange] = []
    gone: dict[str, list[Placement]] = {}
    came: dict[str, list[Placement]] = {}
    for slot in sorted(before.keys() | after.keys()):
        o, n = before.get(slot), after.get(slot)
        keep = min(o.replicas if o else 0, n.replicas if n else 0)
        if keep:
            assert o is not None and n is not None  # keep > 0: both sides place the slot
            unchanged.append(Placement(n.model_key, n.device_ids, keep, n.pool, n.reason))
            if o.pool != n.pool:
                pool_changes.append(PoolChange(n.model_key, n.device_ids, o.pool, n.pool, keep))
        if o and o.replicas > keep:
            gone.setdefault(o.model_key, []).extend([o] * (o.replicas - keep))
        if n and n.replicas > keep:
            came.setdefault(n.model_key, []).extend([n] * (n.replicas - keep))
    loads, evictions, moves = [], [], []
    for model in sorted(gone.keys() | came.keys()):
        out, into = gone.get(model, []), came.get(model, [])
        for a, b in zip(out, into, strict=False):
            moves.append(Move(model, a.device_ids, b.device_ids, b.pool, b.reason))
        for a in out[len(into) :]:
            evictions.append(Eviction(model, a.device_ids, a.pool, "not in the new plan"))
        for b in into[len(out) :]:
            loads.append(Load(model, b.device_ids, b.pool, b.reason))
    return PlanDiff(
        tuple(loads), tuple(evictions), tuple(moves), tuple(pool_changes), tuple(unchanged)
    )


def apply_diff(old: PlacementPlan | None, d: PlanDiff, policy: str = "manual") -> PlacementPlan:
    """The placements ``old`` becomes under ``d``. Raises PlanError when ``d`` removes a replica
    ``old`` does not hold (the diff was made against another plan)."""
    slots: dict[tuple[str, Group], list] = {
        p.slot: [p.replicas, p.pool, p.reason] for p in (old.placements if old else ())
    }

    def take(model: str, group: Group) -> None:
        s = slots.get((model, group))
        if not s or s[0] < 1:
            raise PlanError(f"PlanDiff: no replica of {model} on {group} to remove in the old plan")
        s[0] -= 1

    def put(model: str, group: Group, pool: str, reason: str) -> None:
        s = slots.setdefault((model, group), [0, pool, reason])
        s[0] += 1
        s[1], s[2] = pool, reason

    for e in d.evictions:
        take(e.model_key, e.device_ids)
    for m in d.moves:
        take(m.model_key, m.from_devices)
        put(m.model_key, m.to_devices, m.pool, m.reason)
    for ld in d.loads:
        put(ld.model_key, ld.device_ids, ld.pool, ld.reason)
    for u in d.unchanged:
        s = slots.get(u.slot)
        if s is None or s[0] < u.replicas:
            raise PlanError(f"PlanDiff: unchanged {u.slot} holds fewer than {u.replicas} replicas")
        s[1], s[2] = u.pool, u.reason
    placements = tuple(
        Placement(k, g, n, pool, why) for (k, g), (n, pool, why) in slots.items() if n > 0
    )
    return PlacementPlan(placements, policy=policy)
