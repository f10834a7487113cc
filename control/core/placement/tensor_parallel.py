"""Tensor-parallel groups first: every model with ``tp_degree`` > 1 gets its first replica on
``tp_degree`` devices of one interconnect domain (a group never crosses domains), largest
footprint first, while whole domains are still free."""

from __future__ import annotations

from dataclasses import dataclass, field

from control.core.placement.placing import StagePolicy, by_memory, place_one
from control.core.placement.workspace import Workspace


@dataclass(frozen=True)
class TensorParallelConfig:
    affinity: bool = field(
        default=True,
        metadata={"help": "prefer domains whose devices already hold the model's neighbours"},
    )


class TensorParallelPlacement(StagePolicy):
    name = "tensor_parallel"
    config_type = TensorParallelConfig

    def place(self, ws: Workspace, config: TensorParallelConfig) -> None:
        """First replica of each TP model without one; failures are recorded with the reason."""
        for key in by_memory(ws):
            spec = ws.models[key].spec
            if spec.tp_degree > 1 and ws.count[key] == 0 and ws.target(key) > 0:
                place_one(ws, key, "hot", "tensor parallel", affinity=config.affinity)
