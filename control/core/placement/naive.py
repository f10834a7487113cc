"""The naive baseline: one replica per model, round-robin over the devices in registration order,
ignoring demand, traffic and neighbours.

A cursor walks the up devices in snapshot order. Each model, in registration order, goes to the
first device at or after the cursor (wrapping once) with room for it (memory after headroom, a
shared precision); the cursor then moves past it. A tensor-parallel model takes that device and
the next ones of the same interconnect domain with room. Hard constraints (memory, headroom,
precision, domains) still hold: the baseline is naive about performance, not invalid.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from control.core.placement.demand import Demand
from control.core.placement.diagnose import diagnose
from control.core.placement.inputs import ClusterSnapshot
from control.core.placement.placing import describe, run_stages
from control.core.placement.plan import PlacementPlan
from control.core.placement.replicas import one_each
from control.core.placement.workspace import Group, Workspace


@dataclass(frozen=True)
class NaiveConfig:
    start: int = field(default=0, metadata={"help": "device position the round-robin starts at"})


class NaivePlacement:
    name = "naive"
    config_type = NaiveConfig

    def plan(
        self, snapshot: ClusterSnapshot, demand: Demand, config: Any | None = None
    ) -> PlacementPlan:
        """One replica per model (``demand`` is ignored by definition)."""
        cfg = NaiveConfig() if config is None else config
        return run_stages(snapshot, demand, one_each(snapshot), [(self, cfg)], self.name)

    def place(self, ws: Workspace, config: NaiveConfig) -> None:
        devices = list(ws.devices)
        if not devices:
            for key in ws.models:
                diagnose(ws, key, "hot")
            return
        cursor = config.start % len(devices)
        for key in ws.models:  # registration order
            found = self._walk(ws, key, devices, cursor)
            if found is None:
                diagnose(ws, key, "hot")
                continue
            group, last = found
            why = f"naive round-robin: {describe(ws, key, group)}"
            ws.add(key, group, "hot", why)
            cursor = (last + 1) % len(devices)

    @staticmethod
    def _walk(ws: Workspace, key: str, devices: list[str], cursor: int) -> tuple[Group, int] | None:
        """First fitting device (and its domain mates for TP) from ``cursor``, wrapping once."""
        k, mem = ws.models[key].spec.tp_degree, ws.mem(key)
        ok = set(ws.candidates(key, "hot"))
        n = len(devices)
        for step in range(n):
            i = (cursor + step) % n
            d = devices[i]
            if d not in ok or ws.free[d] < mem:
                continue
            group, last = [d], i
            domain = ws.devices[d].domain
            for step2 in range(1, n):
                if len(group) == k:
                    break
                j = (i + step2) % n
                e = devices[j]
                if e in ok and ws.free[e] >= mem and ws.devices[e].domain == domain:
                    group.append(e)
                    last = j
            if len(group) == k:
                return tuple(sorted(group, key=ws.index.__getitem__)), last
        return None
