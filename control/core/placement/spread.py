"""Replicas from demand, spread for availability.

Each model gets ``ceil(rate x service time / target utilization)`` replicas (see
``replicas.py``). Extra replicas are placed in rounds, one per model per round (largest first),
so a shortage of memory is shared rather than starving the last models. Each replica goes to a
device that holds no replica of the model yet, on the node with the fewest of its replicas,
then nearest its neighbours, then best fit.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from control.core.placement.demand import Demand
from control.core.placement.inputs import ClusterSnapshot
from control.core.placement.placing import StagePolicy, by_memory, place_one
from control.core.placement.replicas import ReplicaConfig, ReplicaTarget, replica_targets
from control.core.placement.workspace import Workspace


@dataclass(frozen=True)
class SpreadConfig:
    replicas: ReplicaConfig = field(
        default_factory=ReplicaConfig,
        metadata={"help": "how demand turns into replica counts (used when spread runs alone)"},
    )
    across_nodes: bool = field(
        default=True, metadata={"help": "prefer nodes holding fewer replicas of the model"}
    )
    affinity: bool = field(
        default=True, metadata={"help": "then prefer devices holding the model's neighbours"}
    )


class SpreadPlacement(StagePolicy):
    name = "spread"
    config_type = SpreadConfig

    def targets(
        self, snapshot: ClusterSnapshot, demand: Demand, config: Any
    ) -> dict[str, ReplicaTarget]:
        return replica_targets(snapshot, demand, config.replicas)

    def place(self, ws: Workspace, config: SpreadConfig) -> None:
        """Place replicas until every model reaches its target or nothing more fits."""
        order = by_memory(ws)
        stuck: set[str] = set()
        progress = True
        while progress:
            progress = False
            for key in order:
                if key in stuck or not ws.missing(key):
                    continue
                lead = "spread replica" if ws.count[key] else "first replica"
                got = place_one(
                    ws, key, "hot", lead, spread=config.across_nodes, affinity=config.affinity
                )
                if got is None:
                    stuck.add(key)
                else:
                    progress = True
