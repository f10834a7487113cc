"""What the executor reports back: item results, load reports, worker status, and the events of
:meth:`~control.executor.protocol.Executor.events` (and of the listener given to ``start``).

All are frozen values, shared by every side: a worker builds the :class:`ItemResult` of each
item it ran, the host side of an executor turns what its workers say into events, the live
runtime consumes them, and the twin builds an :class:`ItemResult` per simulated item. Each
submitted item completes exactly once as an :class:`ItemCompleted` (see
:class:`~control.executor.protocol.Executor`).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from control.core.values import value
from control.executor.protocol.work import DeviceInfo, ExecutorError, StepKey

#: Why an item failed (``ItemResult.cause``):
#: ``worker_down``: its worker crashed or its pipe closed (retriable elsewhere);
#: ``hang``: its batch ran past its progress deadline and the worker was killed (retriable);
#: ``unavailable``: the replica is not loaded, its breaker is open, or an input was lost with
#: the worker that held it (retriable elsewhere);
#: ``model_error``: the batch raised inside the model (retriable; repeated ones open the breaker);
#: ``bad_input``: this item's inputs are unusable (final: running it again cannot help; never
#: counts toward the replica's breaker; ``ItemResult.field`` names the input when one is to blame);
#: ``cancelled``: cancelled before it started (final for this submission, never stored: a later
#: submit of the same key runs).
FAILURE_CAUSES: tuple[str, ...] = (
    "worker_down",
    "hang",
    "unavailable",
    "model_error",
    "bad_input",
    "cancelled",
)


@value  # built per item by the twin (sim.executor) as well
class ItemResult:
    """Outcome of one item. The full output stays in the worker (see ``fetch_output``); a copy
    comes back in ``output`` only when the item asked for it (``BatchItem.return_output``)."""

    step: StepKey
    idempotency_key: str
    replica_id: str
    device_id: str
    ok: bool
    error: str | None = None
    retriable: bool = False  # True: the core may run it again elsewhere under the same key
    input_tokens: int = 0
    output_tokens: int = 0
    device_ms: float = 0.0  # the batch's measured compute time, shared by its items
    first_token_ms: float | None = None  # generate: batch start to this item's first token
    prefix_hit_tokens: int = 0
    label: str | None = None  # router/classify decision
    item_count: int = 0  # vectors, documents or scores produced
    batch_size: int = 1
    replayed: bool = False  # a duplicate submit answered from the idempotency store
    cause: str | None = None  # why it failed, one of FAILURE_CAUSES (None when ok)
    output: Any = None  # the plain output value, only for items sent with ``return_output``
    field: str | None = None  # bad_input: the input to blame (``text``, ``documents[3]``)
    #: an input was lost (cause ``unavailable``): the executor node ids whose outputs are gone
    #: (``rerank``, ``map#2``), so the core recomputes only those
    lost: tuple[str, ...] | None = None
    #: bytes of this item's inputs that moved to its worker from another one (shared memory
    #: on the local executor, Ray's object store across actors and nodes); 0: all held there
    moved_bytes: int = 0

    def __post_init__(self) -> None:
        if self.ok and self.cause is not None:
            raise ExecutorError(f"ItemResult.cause must be None when ok, got {self.cause!r}")
        if self.cause is not None and self.cause not in FAILURE_CAUSES:
            raise ExecutorError(f"ItemResult.cause {self.cause!r} is not one of {FAILURE_CAUSES}")


#: Failure causes that are about the replica and count toward its breaker. The others are not:
#: ``bad_input`` is about one item; ``unavailable`` about another worker (an input lost with
#: it) or a refusal before the batch ran; ``cancelled`` about nobody; ``worker_down`` is one
#: crash that its restart handles (the worker reloads its replicas), and counting each batch
#: it took down would open the reloaded replica's breaker for a single crash.
REPLICA_FAULTS: frozenset[str] = frozenset({"model_error", "hang"})


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
    """The latest state of one worker (see ``Executor.heartbeat``).

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
    """A worker crashed or stopped heartbeating; its replicas and held outputs are gone.

    ``gone``: the device itself is gone for good (its node left a cluster): no worker is
    started for it again, no ``WorkerUp`` follows. A worker lost before its node was seen
    leaving gives a ``WorkerDown`` without ``gone`` first (a restart is tried), then one with
    it. Only a backend over a cluster sets it; the local executor's devices never go."""

    device_id: str
    reason: str
    lost_replicas: tuple[str, ...]
    failed_items: tuple[str, ...]  # idempotency keys reported failed-retriable
    gone: bool = False


@dataclass(frozen=True)
class WorkerUp:
    device_id: str
    pid: int
    restarts: int


@dataclass(frozen=True)
class DeviceJoined:
    """A device that came after ``start`` (a node joined the cluster) and can take work now:
    the consumer adds it to its fleet (the devices of ``start`` are ``Executor.devices()``).
    Its node leaving later is a ``WorkerDown`` with ``gone`` of each of its devices, never
    followed by a ``WorkerUp``. Only a backend over a cluster emits it: the local executor's
    devices are fixed at construction and it never does."""

    device: DeviceInfo


@dataclass(frozen=True)
class ReplicaEvicted:
    replica_id: str
    device_id: str
    freed_mib: int
    reason: str


@dataclass(frozen=True)
class BreakerChanged:
    """A replica's circuit breaker changed state. ``open``: the executor refuses the replica's
    batches (``unavailable``) for ``probe_in_s`` seconds, then lets one through, the probe, whose
    outcome reports ``closed`` or ``open`` again. The live runtime hands it to the core, which
    routes around the replica meanwhile (:mod:`control.core.breakers`)."""

    replica_id: str
    state: str  # "closed" | "open" | "half_open"
    reason: str
    probe_in_s: float = 0.0  # open: seconds until the probe may go


ExecutorEvent = (
    ItemCompleted
    | TokenDelta
    | WorkerDown
    | WorkerUp
    | DeviceJoined
    | ReplicaEvicted
    | BreakerChanged
)

#: Called with every event, in order, on the thread the executor delivers on (see ``start``).
EventListener = Callable[[ExecutorEvent], None]
