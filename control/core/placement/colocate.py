"""Co-location of workflow neighbours, weighted by the traffic between them.

Single-device models still without a replica are merged into affinity groups: neighbour pairs
are taken heaviest traffic first and two groups merge when some hot device could hold both
(memory after headroom, shared precision). Groups are packed largest first onto the device with
the most traffic to neighbours already placed there (e.g. beside a tensor-parallel LLM), then
best fit. A group that fits nowhere is placed member by member. Fewer cross-device hops means
fewer transfers between the steps of a run.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from control.core.placement.choose import feasible
from control.core.placement.inputs import precision_for
from control.core.placement.placing import StagePolicy, describe, place_one
from control.core.placement.plan import PlanError
from control.core.placement.workspace import Workspace


@dataclass(frozen=True)
class ColocateConfig:
    min_traffic_rps: float = field(
        default=0.0,
        metadata={"help": "neighbour pairs with less traffic than this are not grouped"},
    )
    max_group_models: int = field(default=4, metadata={"help": "most models in one affinity group"})

    def __post_init__(self) -> None:
        if self.max_group_models < 1:
            raise PlanError(
                f"ColocateConfig.max_group_models={self.max_group_models!r}: must be >= 1"
            )


def _can_host(ws: Workspace, members: list[str], d: str, total: int) -> bool:
    return (
        ws.free[d] >= total
        and all(precision_for(ws.models[k], ws.devices[d]) is not None for k in members[1:])
        and not any(k in ws.hosted[d] for k in members[1:])
    )


def _hosts(ws: Workspace, members: list[str]) -> list[str]:
    """Hot devices with room for all ``members`` at once that run each one's precision."""
    total = sum(ws.mem(k) for k in members)
    return [d for d in feasible(ws, members[0], "hot") if _can_host(ws, members, d, total)]


def _has_host(ws: Workspace, members: list[str]) -> bool:
    """Whether some hot device could hold all ``members`` (stops at the first one)."""
    total = sum(ws.mem(k) for k in members)
    return any(_can_host(ws, members, d, total) for d in feasible(ws, members[0], "hot"))


def affinity_groups(ws: Workspace, config: ColocateConfig) -> list[list[str]]:
    """Groups of unplaced single-device models (every such model is in exactly one group)."""
    todo = [
        k
        for k in ws.models
        if ws.count[k] == 0 and ws.target(k) > 0 and ws.models[k].spec.tp_degree == 1
    ]
    group_of = {k: [k] for k in todo}
    edges = sorted(ws.demand.traffic.items(), key=lambda kv: (-kv[1], kv[0]))
    for (a, b), rate in edges:
        if rate <= 0 or rate < config.min_traffic_rps or a not in group_of or b not in group_of:
            continue
        ga, gb = group_of[a], group_of[b]
        if ga is gb or len(ga) + len(gb) > config.max_group_models:
            continue
        merged = sorted(ga + gb)
        if _has_host(ws, merged):
            for k in merged:
                group_of[k] = merged
    unique = {id(g): g for g in group_of.values()}
    return sorted(unique.values(), key=lambda g: (-sum(ws.mem(k) for k in g), g))


class ColocatePlacement(StagePolicy):
    name = "colocate"
    config_type = ColocateConfig

    def place(self, ws: Workspace, config: ColocateConfig) -> None:
        """First replica of every unplaced single-device model, neighbours together."""
        for members in affinity_groups(ws, config):
            if len(members) == 1 or not self._place_group(ws, members):
                for k in members:
                    place_one(ws, k, "hot", "near its neighbours")

    def _place_group(self, ws: Workspace, members: list[str]) -> bool:
        hosts = _hosts(ws, members)
        if not hosts:
            return False
        aff: dict[str, float] = {}
        for k in members:
            for d, rate in ws.affinity(k).items():
                aff[d] = aff.get(d, 0.0) + rate
        total = sum(ws.mem(k) for k in members)
        cur = set().union(*(ws.current_devices(k) for k in members))
        d = min(
            hosts, key=lambda d: (-aff.get(d, 0.0), d not in cur, ws.free[d] - total, ws.index[d])
        )
        for k in members:
            others = [o for o in members if o != k]
            rate = sum(ws.neighbours.get(k, {}).get(o, 0.0) for o in others)
            target = ws.targets.get(k)
            why = f"co-located with {', '.join(others)} ({rate:.1f} req/s between them): {describe(ws, k, (d,))}"
            if target is not None:
                why += f"; replica {ws.count[k] + 1} of {target.count} ({target.reason})"
            ws.add(k, (d,), "hot", why)
        return True
