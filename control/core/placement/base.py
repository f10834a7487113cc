"""Placement contract: a policy turns an immutable cluster snapshot and a demand estimate into a
:class:`PlacementPlan`; a stage is one step of a composite policy working on a shared
:class:`Workspace`.

``plan`` is a pure function of its arguments: no I/O, no clock, no randomness, and the same
inputs give the same plan. Misuse (a config of the wrong type) raises; what does not fit is
returned in ``PlacementPlan.unplaced``.
"""

from __future__ import annotations

from typing import Any, Protocol

from control.core.placement.demand import Demand
from control.core.placement.inputs import ClusterSnapshot
from control.core.placement.plan import PlacementPlan
from control.core.placement.workspace import Workspace


class PlacementPolicy(Protocol):
    @property
    def name(self) -> str: ...
    @property
    def config_type(self) -> type: ...

    def plan(
        self, snapshot: ClusterSnapshot, demand: Demand, config: Any | None = None
    ) -> PlacementPlan:
        """A plan for ``snapshot`` under ``demand``; ``config`` of ``config_type`` (None: defaults)."""
        ...


class PlacementStage(Protocol):
    @property
    def name(self) -> str: ...
    @property
    def config_type(self) -> type: ...

    def place(self, ws: Workspace, config: Any) -> None:
        """Add placements to ``ws`` (and failures for what does not fit); reads only ``ws``."""
        ...
