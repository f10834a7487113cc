"""What the executor reports to its caller: load reports, worker status, and the events of
:meth:`~control.executor.base.Executor.events` and ``poll``.

All are frozen values. Events are emitted in order on the executor's pump thread (see
:mod:`control.executor.base` for the stream's contract: each submitted item completes exactly
once as an :class:`ItemCompleted`). Split off from :mod:`~control.executor.base`, which
re-exports every name here, only to keep modules small.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # annotations only: base imports this module
    from control.executor.base import ItemResult, StepKey


@dataclass(frozen=True)
class LoadReport:
    replica_id: str
    device_id: str
    ok: bool
    reason: str
    load_ms: float = 0.0
    memory_mib: int = 0
    evicted: tuple[str, ...] = ()


@dataclass(frozen=True)
class RunningBatch:
    """A batch a worker runs now, as its status shows it."""

    batch_id: str
    running_for_s: float  # since it started, or joined a running decode loop
    deadline_s: float  # it counts as hung past this many seconds of running


@dataclass(frozen=True)
class WorkerStatus:
    """The latest state of one worker (see :meth:`Executor.heartbeat`).

    ``running`` lists every batch its main thread runs now, in start order: one, or several
    when batches of a generate replica joined its running decode loop (continuous batching).
    """

    device_id: str
    pid: int | None
    alive: bool
    last_heartbeat_age_s: float
    restarts: int
    busy: bool
    replicas: tuple[str, ...]
    used_mib: int
    running: tuple[RunningBatch, ...] = ()

    @property
    def running_batches(self) -> tuple[str, ...]:
        """The ids of the running batches, in start order."""
        return tuple(r.batch_id for r in self.running)

    @property
    def running_count(self) -> int:
        return len(self.running)

    @property
    def running_batch(self) -> str | None:
        """The batch started first of those running (the one its loop began with), or None."""
        return self.running[0].batch_id if self.running else None


# ---- events ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class ItemCompleted:
    result: ItemResult


@dataclass(frozen=True)
class TokenDelta:
    """A piece of streamed text of a generate item (in order; ``index`` counts from 0)."""

    idempotency_key: str
    step: StepKey
    index: int
    text: str


@dataclass(frozen=True)
class WorkerDown:
    """A worker crashed or stopped heartbeating; its replicas and held outputs are gone."""

    device_id: str
    reason: str
    lost_replicas: tuple[str, ...]
    failed_items: tuple[str, ...]  # idempotency keys reported failed-retriable


@dataclass(frozen=True)
class WorkerUp:
    device_id: str
    pid: int
    restarts: int


@dataclass(frozen=True)
class ReplicaEvicted:
    replica_id: str
    device_id: str
    freed_mib: int
    reason: str


@dataclass(frozen=True)
class BreakerChanged:
    replica_id: str
    state: str  # "closed" | "open" | "half_open"
    reason: str


ExecutorEvent = ItemCompleted | TokenDelta | WorkerDown | WorkerUp | ReplicaEvicted | BreakerChanged
