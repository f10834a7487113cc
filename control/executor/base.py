"""The executor interface: what the live driver (asyncio) may ask of the devices.

One :class:`Executor` owns the local devices. The driver calls it from its event loop:

* ``start()`` once, then ``devices()`` to learn what exists (``cuda:N`` or ``cpu:N`` slots);
* ``load(replica_id, model_ref, device_id)`` returns a :class:`concurrent.futures.Future` that
  resolves to a :class:`LoadReport` (await it with ``asyncio.wrap_future``); a model that cannot
  load resolves to a report with ``ok=False`` and a reason, never an exception;
* ``submit(batch)`` never blocks and never raises for expected outcomes: every item of every batch
  comes back exactly once as an :class:`ItemCompleted` event (ok, error, or failed-retriable when a
  worker dies), keyed by its idempotency key;
* ``events()`` is an async iterator of :class:`ExecutorEvent` (completions, token deltas of
  generate items, workers down/up, evictions, breaker changes); ``poll(timeout)`` is the same
  stream for synchronous callers (tests, the profiler);
* ``fetch_output(run_id, node_id)`` returns a future of the full output value (text, vector,
  scores) of a completed step, still held by the worker that produced it;
* ``cancel(idempotency_keys)`` is best effort: items not yet started (queued in a worker, or
  waiting for inputs) come back as failed with ``cause="cancelled"``; items already running
  finish normally;
* ``heartbeat()`` is the latest status of every worker; ``stop()`` ends the workers.

A failed item carries a structured ``ItemResult.cause`` (see :data:`FAILURE_CAUSES`); ``error``
is the human sentence. Callers branch on ``cause``, never on the text.

Inputs of an item are literal values or :class:`InputRef` references to fields of earlier steps'
outputs. Outputs stay in the worker that produced them; when the consumer runs elsewhere the
executor moves the value worker to worker (tensors through shared memory), never through JSON.

A multi-node backend (a Ray actor per device) implements the same Protocol.
"""

from __future__ import annotations

import concurrent.futures
from collections.abc import AsyncIterator, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol

from control.core.frozen import fast_init

# re-exported: what the executor reports is part of this interface (callers import it here)
from control.executor.reports import BreakerChanged as BreakerChanged
from control.executor.reports import ExecutorEvent as ExecutorEvent
from control.executor.reports import ItemCompleted as ItemCompleted
from control.executor.reports import LoadReport as LoadReport
from control.executor.reports import ReplicaEvicted as ReplicaEvicted
from control.executor.reports import RunningBatch as RunningBatch
from control.executor.reports import TokenDelta as TokenDelta
from control.executor.reports import WorkerDown as WorkerDown
from control.executor.reports import WorkerStatus as WorkerStatus
from control.executor.reports import WorkerUp as WorkerUp

#: Tasks an adapter can run. ``noop`` echoes its inputs (hop-overhead measurements, tests).
TASKS: tuple[str, ...] = (
    "embed",
    "rerank",
    "generate",
    "classify",
    "vector_search",
    "router",
    "noop",
)

#: Where a model comes from. ``tiny`` builds a small random model from a config (tests).
SOURCE_KINDS: tuple[str, ...] = ("minilm", "smollm2", "hf", "tiny", "tool")


#: Why an item failed (``ItemResult.cause``):
#: ``worker_down``: its worker crashed or its pipe closed (retriable elsewhere);
#: ``hang``: its batch ran past its progress deadline and the worker was killed (retriable);
#: ``unavailable``: the replica is not loaded, its breaker is open, or an input was lost with
#: the worker that held it (retriable elsewhere);
#: ``model_error``: the batch raised inside the model (retriable; repeated ones open the breaker);
#: ``bad_input``: this item's inputs are unusable (final: running it again cannot help);
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


class ExecutorError(Exception):
    """Misuse of the executor (unknown device or replica, bad input); names the bad value."""


@dataclass(frozen=True)
class ModelRef:
    """Which model a replica runs and where its weights come from.

    ``source`` is one of :data:`SOURCE_KINDS`; ``path`` is the local folder for ``hf`` and the
    architecture name for ``tiny`` (``gpt2``, ``bert``, ``bert-cls``); ``options`` are
    task-specific (vector_search: ``documents`` and ``embed_model``; router: ``rules``;
    classify: ``labels``). ``expected_mib`` lets the caller state the memory it planned for
    (weights plus KV cache and activations); the device budget is charged the larger of it and
    the measured size.
    """

    name: str
    task: str
    source: str
    path: str | None = None
    options: Mapping[str, Any] = field(default_factory=dict)
    expected_mib: int | None = None

    def __post_init__(self) -> None:
        if self.task not in TASKS:
            raise ExecutorError(f"ModelRef.task {self.task!r} is not one of {TASKS}")
        if self.source not in SOURCE_KINDS:
            raise ExecutorError(f"ModelRef.source {self.source!r} is not one of {SOURCE_KINDS}")


@dataclass(frozen=True)
class DeviceInfo:
    """One local device a worker process owns."""

    device_id: str  # "cuda:0" or "cpu:3"
    kind: str  # "cuda" or "cpu"
    index: int
    memory_budget_mib: int  # what replicas on it may use together
    cpu_core: int | None = None  # the core a CPU slot is pinned to


@fast_init  # built per item by the twin (sim.executor) as well
@dataclass(frozen=True)
class StepKey:
    """A step attempt: the core's unique key for one execution of one DAG node."""

    run_id: str
    node_id: str
    attempt: int = 0

    def __str__(self) -> str:
        return f"{self.run_id}/{self.node_id}#{self.attempt}"


@dataclass(frozen=True)
class InputRef:
    """A field of an earlier step's output (held by the worker that ran it)."""

    run_id: str
    node_id: str
    field: str


@dataclass(frozen=True)
class GenParams:
    """Parameters of an item. Only generate uses the sampling ones; ``top_k`` is for search."""

    max_tokens: int = 32
    temperature: float = 0.0  # 0: greedy
    top_p: float = 1.0
    stop: tuple[str, ...] = ()
    seed: int = 0
    top_k: int = 3
    stream: bool = False
    busy_ms: int = 0  # noop only: simulated step work of this many ms

    def __post_init__(self) -> None:
        if self.max_tokens < 1:
            raise ExecutorError(f"GenParams.max_tokens must be >= 1, got {self.max_tokens}")
        if self.temperature < 0:
            raise ExecutorError(f"GenParams.temperature must be >= 0, got {self.temperature}")
        if not 0 < self.top_p <= 1:
            raise ExecutorError(f"GenParams.top_p must be in (0, 1], got {self.top_p}")
        if self.top_k < 1:
            raise ExecutorError(f"GenParams.top_k must be >= 1, got {self.top_k}")


@dataclass(frozen=True)
class BatchItem:
    """One step of a batch. ``inputs`` maps input names to literals or :class:`InputRef`.

    ``return_output``: the step's output goes to the caller (a workflow output), so the worker
    sends it back with the result (as plain lists) instead of waiting for a ``fetch_output``
    round trip; the worker still holds it for later steps.
    """

    step: StepKey
    idempotency_key: str
    inputs: Mapping[str, Any]
    params: GenParams = GenParams()
    return_output: bool = False


@dataclass(frozen=True)
class Batch:
    """Items for one replica, run together (padded) by its adapter.

    ``expected_ms`` is the caller's prediction of the batch's device time (the core's
    ``predicted_us``); the executor derives the batch's hang deadline from it (see
    ``ExecutorConfig.hang_multiple``). None: the executor uses its own estimate.
    """

    batch_id: str
    replica_id: str
    items: tuple[BatchItem, ...]
    expected_ms: float | None = None

    def __post_init__(self) -> None:
        if not self.items:
            raise ExecutorError(f"Batch {self.batch_id!r} has no items")
        if self.expected_ms is not None and self.expected_ms < 0:
            raise ExecutorError(f"Batch.expected_ms must be >= 0, got {self.expected_ms}")


@fast_init  # built per item by the twin (sim.executor) as well
@dataclass(frozen=True)
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

    def __post_init__(self) -> None:
        if self.ok and self.cause is not None:
            raise ExecutorError(f"ItemResult.cause must be None when ok, got {self.cause!r}")
        if self.cause is not None and self.cause not in FAILURE_CAUSES:
            raise ExecutorError(f"ItemResult.cause {self.cause!r} is not one of {FAILURE_CAUSES}")


class Executor(Protocol):
    """What the live driver needs from a set of devices (see the module docstring)."""

    def start(self) -> None: ...

    def stop(self) -> None: ...

    def devices(self) -> list[DeviceInfo]: ...

    def load(
        self, replica_id: str, model_ref: ModelRef, device_id: str
    ) -> concurrent.futures.Future[LoadReport]: ...

    def unload(self, replica_id: str) -> concurrent.futures.Future[int]: ...

    def submit(self, batch: Batch) -> None: ...

    def cancel(self, idempotency_keys: Iterable[str]) -> None: ...

    def events(self) -> AsyncIterator[ExecutorEvent]: ...

    def poll(self, timeout: float) -> ExecutorEvent | None: ...

    def fetch_output(self, run_id: str, node_id: str) -> concurrent.futures.Future[dict]: ...

    def release_run(self, run_id: str) -> None: ...

    def heartbeat(self) -> list[WorkerStatus]: ...
