"""Actions returned by ``ControlCore.step(now)``; a driver carries them out and decides nothing.

Every action is a frozen dataclass with a ``reason`` a person can read. ``StepPlan`` groups the
actions of one step in the order the driver should apply them, and names the phase each came
from.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType

from control.core.frozen import fast_init
from control.core.types import InputRef

_EMPTY: Mapping[str, object] = MappingProxyType({})


@dataclass(frozen=True)
class InputBinding:
    """One input field of a step and where its data lives (several refs: a merged map output,
    in chunk order)."""

    target_field: str
    refs: tuple[InputRef, ...]

    def __init__(self, target_field: str, refs: tuple[InputRef, ...]) -> None:
        object.__setattr__(self, "target_field", target_field)
        object.__setattr__(self, "refs", refs)


fast_init(InputBinding)


@dataclass(frozen=True)
class BatchItem:
    key: str  # run/node[#chunk]/attempt: unique per attempt
    request_id: str
    node_id: str
    attempt: int
    chunk: int | None
    idempotency_key: str  # the same for every attempt of the step
    task: str  # model task or tool name
    inputs: tuple[InputBinding, ...]
    input_tokens: int
    max_output_tokens: int
    prefix_blocks: tuple[int, ...] = ()
    predicted_hit_blocks: int = 0
    params: Mapping[str, object] = field(default_factory=lambda: _EMPTY)

    def __init__(
        self,
        key: str,
        request_id: str,
        node_id: str,
        attempt: int,
        chunk: int | None,
        idempotency_key: str,
        task: str,
        inputs: tuple[InputBinding, ...],
        input_tokens: int,
        max_output_tokens: int,
        prefix_blocks: tuple[int, ...] = (),
        predicted_hit_blocks: int = 0,
        params: Mapping[str, object] = _EMPTY,
    ) -> None:
        object.__setattr__(self, "key", key)
        object.__setattr__(self, "request_id", request_id)
        object.__setattr__(self, "node_id", node_id)
        object.__setattr__(self, "attempt", attempt)
        object.__setattr__(self, "chunk", chunk)
        object.__setattr__(self, "idempotency_key", idempotency_key)
        object.__setattr__(self, "task", task)
        object.__setattr__(self, "inputs", inputs)
        object.__setattr__(self, "input_tokens", input_tokens)
        object.__setattr__(self, "max_output_tokens", max_output_tokens)
        object.__setattr__(self, "prefix_blocks", prefix_blocks)
        object.__setattr__(self, "predicted_hit_blocks", predicted_hit_blocks)
        object.__setattr__(self, "params", params)


fast_init(BatchItem)


@dataclass(frozen=True)
class Dispatch:
    """Run ``items`` as one batch on ``replica_id`` (None with ``tool`` set: run on the host)."""

    batch_id: str
    replica_id: str | None
    model_key: str | None
    tool: str | None
    device_ids: tuple[str, ...]
    items: tuple[BatchItem, ...]
    padded_tokens: int
    predicted_us: int
    reason: str

    def __init__(
        self,
        batch_id: str,
        replica_id: str | None,
        model_key: str | None,
        tool: str | None,
        device_ids: tuple[str, ...],
        items: tuple[BatchItem, ...],
        padded_tokens: int,
        predicted_us: int,
        reason: str,
    ) -> None:
        object.__setattr__(self, "batch_id", batch_id)
        object.__setattr__(self, "replica_id", replica_id)
        object.__setattr__(self, "model_key", model_key)
        object.__setattr__(self, "tool", tool)
        object.__setattr__(self, "device_ids", device_ids)
        object.__setattr__(self, "items", items)
        object.__setattr__(self, "padded_tokens", padded_tokens)
        object.__setattr__(self, "predicted_us", predicted_us)
        object.__setattr__(self, "reason", reason)


fast_init(Dispatch)


@dataclass(frozen=True)
class Reject:
    request_id: str
    reason: str
    retry_after_s: float

    def __init__(self, request_id: str, reason: str, retry_after_s: float) -> None:
        object.__setattr__(self, "request_id", request_id)
        object.__setattr__(self, "reason", reason)
        object.__setattr__(self, "retry_after_s", retry_after_s)


fast_init(Reject)


@dataclass(frozen=True)
class Preempt:
    """Cancel a run: drop its queued steps; the driver cancels ``cancel_keys`` in flight."""

    request_id: str
    cancel_keys: tuple[str, ...]
    reason: str

    def __init__(self, request_id: str, cancel_keys: tuple[str, ...], reason: str) -> None:
        object.__setattr__(self, "request_id", request_id)
        object.__setattr__(self, "cancel_keys", cancel_keys)
        object.__setattr__(self, "reason", reason)


fast_init(Preempt)


@dataclass(frozen=True)
class LoadModel:
    replica_id: str
    model_key: str
    device_ids: tuple[str, ...]
    pool: str  # "cold": a cold load, on the cold pool only
    speculative: bool
    reason: str

    def __init__(
        self,
        replica_id: str,
        model_key: str,
        device_ids: tuple[str, ...],
        pool: str,
        speculative: bool,
        reason: str,
    ) -> None:
        object.__setattr__(self, "replica_id", replica_id)
        object.__setattr__(self, "model_key", model_key)
        object.__setattr__(self, "device_ids", device_ids)
        object.__setattr__(self, "pool", pool)
        object.__setattr__(self, "speculative", speculative)
        object.__setattr__(self, "reason", reason)


fast_init(LoadModel)


@dataclass(frozen=True)
class EvictReplica:
    replica_id: str
    model_key: str
    device_ids: tuple[str, ...]
    reason: str

    def __init__(
        self, replica_id: str, model_key: str, device_ids: tuple[str, ...], reason: str
    ) -> None:
        object.__setattr__(self, "replica_id", replica_id)
        object.__setattr__(self, "model_key", model_key)
        object.__setattr__(self, "device_ids", device_ids)
        object.__setattr__(self, "reason", reason)


fast_init(EvictReplica)


@dataclass(frozen=True)
class MoveStep:
    """A queued step moved between replica queues (work stealing or re-routing)."""

    key: str
    from_replica: str | None
    to_replica: str
    reason: str

    def __init__(self, key: str, from_replica: str | None, to_replica: str, reason: str) -> None:
        object.__setattr__(self, "key", key)
        object.__setattr__(self, "from_replica", from_replica)
        object.__setattr__(self, "to_replica", to_replica)
        object.__setattr__(self, "reason", reason)


fast_init(MoveStep)


@dataclass(frozen=True)
class StepRetried:
    failed_key: str
    new_key: str
    attempt: int
    idempotency_key: str
    reason: str

    def __init__(
        self, failed_key: str, new_key: str, attempt: int, idempotency_key: str, reason: str
    ) -> None:
        object.__setattr__(self, "failed_key", failed_key)
        object.__setattr__(self, "new_key", new_key)
        object.__setattr__(self, "attempt", attempt)
        object.__setattr__(self, "idempotency_key", idempotency_key)
        object.__setattr__(self, "reason", reason)


fast_init(StepRetried)


@dataclass(frozen=True)
class RunFinished:
    request_id: str
    status: str  # "succeeded" | "failed" | "preempted" | "timed_out"
    outputs: Mapping[str, tuple[InputRef, ...]]
    error: str | None
    reason: str

    def __init__(
        self,
        request_id: str,
        status: str,
        outputs: Mapping[str, tuple[InputRef, ...]],
        error: str | None,
        reason: str,
    ) -> None:
        object.__setattr__(self, "request_id", request_id)
        object.__setattr__(self, "status", status)
        object.__setattr__(self, "outputs", outputs)
        object.__setattr__(self, "error", error)
        object.__setattr__(self, "reason", reason)


fast_init(RunFinished)


@dataclass(frozen=True)
class ReplicaRoutable:
    """A replica loaded (and warmed) for a rollout now takes new work."""

    replica_id: str
    model_key: str
    reason: str

    def __init__(self, replica_id: str, model_key: str, reason: str) -> None:
        object.__setattr__(self, "replica_id", replica_id)
        object.__setattr__(self, "model_key", model_key)
        object.__setattr__(self, "reason", reason)


fast_init(ReplicaRoutable)


@dataclass(frozen=True)
class DrainReplica:
    """No new work goes to this replica; its queued steps move away, in-flight work finishes,
    then it is evicted (an ``EvictReplica`` follows)."""

    replica_id: str
    model_key: str
    device_ids: tuple[str, ...]
    reason: str

    def __init__(
        self, replica_id: str, model_key: str, device_ids: tuple[str, ...], reason: str
    ) -> None:
        object.__setattr__(self, "replica_id", replica_id)
        object.__setattr__(self, "model_key", model_key)
        object.__setattr__(self, "device_ids", device_ids)
        object.__setattr__(self, "reason", reason)


fast_init(DrainReplica)


@dataclass(frozen=True)
class RolloutTransition:
    """A rollout changed stage: "loading", "draining", "completed", "aborted", "failed",
    "refused" (``from_state`` is "" when it starts)."""

    plan_id: str
    from_state: str
    to_state: str
    reason: str

    def __init__(self, plan_id: str, from_state: str, to_state: str, reason: str) -> None:
        object.__setattr__(self, "plan_id", plan_id)
        object.__setattr__(self, "from_state", from_state)
        object.__setattr__(self, "to_state", to_state)
        object.__setattr__(self, "reason", reason)


fast_init(RolloutTransition)


Action = (
    Dispatch
    | Reject
    | Preempt
    | LoadModel
    | EvictReplica
    | MoveStep
    | StepRetried
    | RunFinished
    | ReplicaRoutable
    | DrainReplica
    | RolloutTransition
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


@dataclass(frozen=True)
class StepPlan:
    now: float
    actions: tuple[Action, ...]
    phases: Mapping[str, tuple[Action, ...]]

    def __init__(
        self, now: float, actions: tuple[Action, ...], phases: Mapping[str, tuple[Action, ...]]
    ) -> None:
        object.__setattr__(self, "now", now)
        object.__setattr__(self, "actions", actions)
        object.__setattr__(self, "phases", phases)

    def of_type(self, kind: type) -> tuple[Action, ...]:
        """The actions of one type, in plan order."""
        return tuple(a for a in self.actions if isinstance(a, kind))


fast_init(StepPlan)


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
