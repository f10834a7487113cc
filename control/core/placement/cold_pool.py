"""The cold pool: devices kept out of hot placements so cold loads never pause a hot replica.

``max(count, ceil(up devices x fraction))`` devices are chosen (always leaving one hot device),
preferring, in order: devices already cold (in the device spec or the current plan), devices
big enough for every single-device model (any cold load fits), nodes with fewer cold devices
(spread), small interconnect domains (keep whole domains for tensor parallelism), smaller
memory (keep the large devices hot), snapshot order. Models with no demand get one replica on
the cold pool when it has room (kept warm there rather than taking hot memory).
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field

from control.core.placement.placing import StagePolicy, by_memory, place_one
from control.core.placement.plan import PlanError
from control.core.placement.workspace import Workspace


@dataclass(frozen=True)
class ColdPoolConfig:
    count: int = field(default=1, metadata={"help": "devices kept for cold loads (at least)"})
    fraction_milli: int = field(
        default=0, metadata={"help": "share of up devices kept cold, in thousandths (50 = 5 %)"}
    )
    idle_models_to_cold: bool = field(
        default=True,
        metadata={"help": "models with no demand get their replica on the cold pool when it fits"},
    )

    def __post_init__(self) -> None:
        if self.count < 0:
            raise PlanError(f"ColdPoolConfig.count={self.count!r}: must be >= 0")
        if not 0 <= self.fraction_milli <= 1000:
            raise PlanError(
                f"ColdPoolConfig.fraction_milli={self.fraction_milli!r}: must be in 0..1000"
            )


def choose_cold(ws: Workspace, config: ColdPoolConfig) -> set[str]:
    """The device ids of the cold pool (see the module docstring for the preferences)."""
    up = list(ws.devices)
    want = max(config.count, -(-len(up) * config.fraction_milli // 1000))
    want = min(want, max(len(up) - 1, 0))
    current = set(ws.snapshot.current.cold_devices) if ws.snapshot.current else set()
    singles = [m.spec.memory_mib for m in ws.models.values() if m.spec.tp_degree == 1]
    need = max(singles, default=0)
    domain_size = Counter(e.domain for e in ws.devices.values())
    chosen: set[str] = set()
    per_node: Counter[str] = Counter()
    for _ in range(want):
        best = min(
            (d for d in up if d not in chosen),
            key=lambda d: (
                not (ws.devices[d].spec.pool == "cold" or d in current),
                ws.free[d] < need,
                per_node[ws.node(d)],
                domain_size[ws.devices[d].domain],
                ws.devices[d].spec.memory_mib,
                ws.index[d],
            ),
        )
        chosen.add(best)
        per_node[ws.node(best)] += 1
    return chosen


class ColdPoolPlacement(StagePolicy):
    name = "cold_pool"
    config_type = ColdPoolConfig

    def place(self, ws: Workspace, config: ColdPoolConfig) -> None:
        """Set the cold pool (must run before anything is placed), then park idle models."""
        ws.set_cold(choose_cold(ws, config))
        if not (config.idle_models_to_cold and ws.cold):
            return
        for key in by_memory(ws):
            if ws.count[key] == 0 and ws.target(key) > 0 and ws.demand.of(key).arrival_rate == 0:
                place_one(
                    ws, key, "cold", "no demand, kept warm in the cold pool", record_failure=False
                )
