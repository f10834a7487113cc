"""Best-fit decreasing memory bin-packing.

Models are taken largest footprint first (memory x tensor-parallel degree); each gets its first
replica on the device with the least memory left over after it, counting device memory minus
the headroom reservations keep free and only devices that run one of the model's precisions.
A tensor-parallel model takes ``tp_degree`` devices of one interconnect domain. As a stage it
places first replicas only (extra replicas are the spreading stage's job).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from control.core.placement.placing import StagePolicy, by_memory, place_one
from control.core.placement.workspace import Workspace


@dataclass(frozen=True)
class BestFitConfig:
    affinity: bool = field(
        default=False,
        metadata={
            "help": "rank devices by traffic with neighbours before best fit (off: memory only)"
        },
    )


class BestFitPlacement(StagePolicy):
    name = "best_fit"
    config_type = BestFitConfig

    def place(self, ws: Workspace, config: BestFitConfig) -> None:
        """First replica of every model that has none yet and a target of at least one."""
        for key in by_memory(ws):
            if ws.count[key] == 0 and ws.target(key) > 0:
                place_one(ws, key, "hot", "best fit", affinity=config.affinity)
