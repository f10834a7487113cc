"""The scratchpad of one ``plan()`` call: free memory per device, what each device holds, how
many replicas each model has, and the failures met on the way.

A Workspace is created by a policy's ``plan``, changed only by placement stages of that call and
turned into an immutable :class:`PlacementPlan` by :meth:`Workspace.finish`; it is never shared,
so the policies stay pure functions of (snapshot, demand, config).
"""

from __future__ import annotations

from control.core.placement.demand import Demand
from control.core.placement.inputs import ClusterSnapshot, DeviceEntry, ModelEntry, precision_for
from control.core.placement.plan import BindingConstraint, Placement, PlacementPlan, Unplaced
from control.core.placement.replicas import ReplicaTarget

Group = tuple[str, ...]


class Workspace:
    def __init__(
        self, snapshot: ClusterSnapshot, demand: Demand, targets: dict[str, ReplicaTarget]
    ) -> None:
        self.snapshot = snapshot
        self.demand = demand
        self.targets = targets
        self.models: dict[str, ModelEntry] = {m.key: m for m in snapshot.models}
        # only up devices take placements; dict order is the snapshot's order
        self.devices: dict[str, DeviceEntry] = {
            d.device_id: d for d in snapshot.devices if d.spec.status == "up"
        }
        self.index = {d: i for i, d in enumerate(self.devices)}
        self.node_of = {d: e.spec.node_id for d, e in self.devices.items()}
        reserved = snapshot.reserved_mib()
        self.reserved = {d: reserved[d] for d in self.devices}
        self.free = {d: e.spec.memory_mib - self.reserved[d] for d, e in self.devices.items()}
        self.cold: set[str] = set()
        self.hosted: dict[str, dict[str, int]] = {d: {} for d in self.devices}
        self.where: dict[str, dict[str, int]] = {k: {} for k in self.models}  # model -> device -> n
        self.slots: dict[tuple[str, Group], list] = {}  # (model, group) -> [replicas, pool, reason]
        self.count: dict[str, int] = dict.fromkeys(self.models, 0)
        self.on_node: dict[tuple[str, str], int] = {}
        self.neighbours = demand.neighbours()
        self.failures: dict[str, str] = {}
        self.binding: dict[tuple[str, str], str] = {}  # (kind, subject) -> detail (first wins)
        self.current: dict[str, set[Group]] = {}
        for p in snapshot.current.placements if snapshot.current else ():
            self.current.setdefault(p.model_key, set()).add(p.device_ids)
        self._eligible: dict[tuple[str, str], list[str]] = {}

    # ----- queries -------------------------------------------------------------------------
    def target(self, key: str) -> int:
        t = self.targets.get(key)
        return t.count if t else 0

    def missing(self, key: str) -> int:
        return max(0, self.target(key) - self.count[key])

    def mem(self, key: str) -> int:
        return self.models[key].spec.memory_mib

    def node(self, device_id: str) -> str:
        return self.node_of[device_id]

    def candidates(self, key: str, pool: str) -> list[str]:
        """Up devices of ``pool`` that run one of the model's precisions (snapshot order)."""
        ck = (key, pool)
        hit = self._eligible.get(ck)
        if hit is None:
            model, want_cold = self.models[key], pool == "cold"
            hit = [
                d
                for d, e in self.devices.items()
                if (d in self.cold) == want_cold and precision_for(model, e) is not None
            ]
            self._eligible[ck] = hit
        return hit

    def affinity(self, key: str) -> dict[str, float]:
        """Device -> req/s of traffic between ``key`` and the replicas it holds now."""
        out: dict[str, float] = {}
        for other, rate in self.neighbours.get(key, {}).items():
            for d in self.where.get(other, ()):
                out[d] = out.get(d, 0.0) + rate
        return out

    def current_devices(self, key: str) -> set[str]:
        return {d for g in self.current.get(key, ()) for d in g}

    # ----- changes -------------------------------------------------------------------------
    def set_cold(self, device_ids: set[str]) -> None:
        """Make ``device_ids`` the cold pool (before anything is placed)."""
        self.cold = set(device_ids)
        self._eligible.clear()

    def add(self, key: str, group: Group, pool: str, reason: str) -> None:
        """Record one replica of ``key`` on ``group``; every device must have room (the caller
        checked)."""
        mem = self.mem(key)
        for d in group:
            self.free[d] -= mem
            self.hosted[d][key] = self.hosted[d].get(key, 0) + 1
            self.where[key][d] = self.where[key].get(d, 0) + 1
        node = self.node(group[0])
        self.on_node[(key, node)] = self.on_node.get((key, node), 0) + 1
        self.count[key] += 1
        slot = self.slots.get((key, group))
        if slot is None:
            self.slots[(key, group)] = [1, pool, reason]
        else:
            slot[0] += 1
        self.failures.pop(key, None)

    def fail(self, key: str, reason: str, constraints: dict[tuple[str, str], str]) -> None:
        """Note why the next replica of ``key`` could not be placed (the last word wins) and
        which constraints bound (the first detail recorded for a constraint is kept)."""
        self.failures[key] = reason
        for ck, detail in constraints.items():
            self.binding.setdefault(ck, detail)

    def finish(self, policy: str) -> PlacementPlan:
        """The plan: placements, models short of their target with the reason, constraints."""
        placements = [
            Placement(k, g, n, pool, why) for (k, g), (n, pool, why) in self.slots.items()
        ]
        unplaced = []
        for key in self.models:
            short = self.missing(key)
            if short:
                why = self.failures.get(key, "no stage of this policy placed it")
                placed = self.count[key]
                if placed:
                    why = f"placed {placed} of {self.target(key)} replicas; {why}"
                unplaced.append(Unplaced(key, why, short))
        for key, t in self.targets.items():
            if t.capped:
                self.binding.setdefault(("max_replicas", key), t.reason)
        binding = tuple(BindingConstraint(k, s, why) for (k, s), why in self.binding.items())
        return PlacementPlan(tuple(placements), tuple(unplaced), binding, tuple(self.cold), policy)
