"""Bookkeeping the live runtime keeps beside the core (never decisions): runs waiting for a
caller, batches waiting for their items, which replicas serve indexes, and records for the core.

Records are what the driver feeds the core: ``Submit``, ``Complete``, ``Ingest``. The actuator
and the completion handler return them; the driver alone applies them.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from control.core.actions import BatchItem as CoreItem
from control.core.actions import Dispatch
from control.core.types import BatchResult, Request, StepResult
from control.runtime.timeline import RunTimeline
from control.runtime.types import RunHandle, UsageRecord


@dataclass(frozen=True)
class Submit:
    request: Request


@dataclass(frozen=True)
class Complete:
    result: BatchResult


@dataclass(frozen=True)
class Ingest:
    """A fleet or config event; ``reply`` (admin API) gets None or the core's refusal."""

    event: object
    reply: Any = None  # asyncio.Future | None


@dataclass(frozen=True)
class ExecEvent:
    """An executor event, translated by ``Completions`` when the driver records it."""

    event: object


@dataclass(frozen=True)
class Wake:
    """The core's wake-up is due."""


Record = Submit | Complete | Ingest | ExecEvent | Wake


@dataclass
class RunState:
    """A submitted run until its caller has its result."""

    handle: RunHandle
    request: Request
    kinds: dict[str, str]  # node id -> task or tool name
    models: dict[str, str]  # node id -> model key (model nodes only)
    submitted_at: float
    usage: list[UsageRecord] = field(default_factory=list)
    first_token_at: float | None = None
    #: nodes whose outputs are workflow outputs: their values come back with their results
    output_nodes: frozenset[str] = frozenset()
    #: the caller's sampling for the run's generate steps (see ``mapping.gen_params``)
    sampling: Mapping[str, Any] = field(default_factory=dict)
    #: a durable run: every step's output comes back and is kept with its bill
    durable: bool = False
    #: attempts abandoned for a fresh one (timed out, preempted from borrowed headroom), in
    #: order: node, attempt_key, requeued_as, cause, reason (``reissues``)
    reissued: list[dict[str, str]] = field(default_factory=list)
    #: the spans of its steps and the core's decisions for it, for the request timeline
    timeline: RunTimeline = field(default_factory=RunTimeline)


@dataclass
class PendingBatch:
    """A dispatched batch whose items have not all come back."""

    dispatch: Dispatch
    items: dict[str, CoreItem]  # idempotency key -> core item
    dispatched_at: float
    device: str
    replica: str | None
    results: dict[str, StepResult] = field(default_factory=dict)  # core item key -> result
    device_ms: float = 0.0
    moved_bytes: int = 0  # its items' inputs that moved from other workers (executor's count)

    @property
    def complete(self) -> bool:
        return len(self.results) == len(self.items)

    def batch_result(self) -> BatchResult:
        ordered = tuple(self.results[i.key] for i in self.dispatch.items if i.key in self.results)
        return BatchResult(self.dispatch.batch_id, int(self.device_ms * 1000), ordered)


@dataclass(frozen=True)
class IndexSpec:
    """A vector index served by executor ``vector_search`` replicas (one per listed device)."""

    name: str
    documents: tuple[str, ...]
    embed_ref: Any  # executor ModelRef of the embedding model that built the index


def failed_item(item: CoreItem, error: str) -> StepResult:
    return StepResult(key=item.key, ok=False, error=error)
