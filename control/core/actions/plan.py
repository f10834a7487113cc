"""One step's actions: the ``Action`` union, the phases of a step in order, and ``StepPlan``, the
actions of one step in the order the driver applies them with the phase each came from."""

from __future__ import annotations

from collections.abc import Mapping

from control.core.actions.canary import CanaryTransition
from control.core.actions.fleet import (
    DrainReplica,
    EvictReplica,
    LoadModel,
    ReplicaRoutable,
    RolloutTransition,
)
from control.core.actions.runs import Preempt, Reject, RunFinished
from control.core.actions.work import Dispatch, MoveStep, StepPreempted, StepRetried
from control.core.values import value

Action = (
    Dispatch
    | Reject
    | Preempt
    | LoadModel
    | EvictReplica
    | MoveStep
    | StepRetried
    | StepPreempted
    | RunFinished
    | ReplicaRoutable
    | DrainReplica
    | RolloutTransition
    | CanaryTransition
)

#: Phases of one step, in order. ``StepPlan.phases`` maps each to the actions it produced.
PHASES: tuple[str, ...] = (
    "admission",
    "completions",
    "timeouts",
    "reclaims",
    "placement",
    "routing",
    "loads",
    "stealing",
    "batching",
)


@value
class StepPlan:
    now: float
    actions: tuple[Action, ...]
    phases: Mapping[str, tuple[Action, ...]]

    def of_type(self, kind: type) -> tuple[Action, ...]:
        """The actions of one type, in plan order."""
        return tuple(a for a in self.actions if isinstance(a, kind))


class PhaseView(Mapping):
    """``StepPlan.phases`` built on first read: phase -> its actions, in plan order.

    Grouping costs a pass over the step's actions and a dict per step; drivers only iterate
    ``StepPlan.actions``, so the grouping is done only when someone asks for it. Read-only; the
    tagged list it is given must not change afterwards (the engine hands over a fresh list)."""

    __slots__ = ("_tagged", "_grouped")

    def __init__(self, tagged: list[tuple[str, Action]]) -> None:
        self._tagged = tagged
        self._grouped: dict[str, tuple[Action, ...]] | None = None

    def _group(self) -> dict[str, tuple[Action, ...]]:
        if self._grouped is None:
            by_phase: dict[str, list[Action]] = {p: [] for p in PHASES}
            for ph, a in self._tagged:
                acts = by_phase.get(ph)
                if acts is not None:
                    acts.append(a)
            self._grouped = {p: tuple(acts) for p, acts in by_phase.items()}
        return self._grouped

    def __getitem__(self, phase: str) -> tuple[Action, ...]:
        return self._group()[phase]

    def __iter__(self):  # noqa: ANN204
        return iter(PHASES)

    def __len__(self) -> int:
        return len(PHASES)

    def __repr__(self) -> str:
        return f"PhaseView({self._group()!r})"
