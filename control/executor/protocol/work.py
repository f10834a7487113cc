"""What a caller hands the executor: devices, models, batches of steps and their inputs.

Frozen values shared by every side: the live runtime builds them, the host side of an executor
sends them to the process running the model (pickled as they are), and the twin builds
:class:`StepKey` per simulated item. No I/O, no torch.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from control.core.values import value

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
    #: the precision the replica runs at (``fp32``: as loaded; ``bf16``, ``int8``, ``int4``:
    #: a precision variant, converted by a maintained library when loaded)
    precision: str = "fp32"

    def __post_init__(self) -> None:
        if self.task not in TASKS:
            raise ExecutorError(f"ModelRef.task {self.task!r} is not one of {TASKS}")
        if self.source not in SOURCE_KINDS:
            raise ExecutorError(f"ModelRef.source {self.source!r} is not one of {SOURCE_KINDS}")


@dataclass(frozen=True)
class DeviceInfo:
    """One device a worker process owns."""

    device_id: str  # "cuda:0" or "cpu:3"
    kind: str  # "cuda" or "cpu"
    index: int
    memory_budget_mib: int  # what replicas on it may use together
    cpu_core: int | None = None  # the core a CPU slot is pinned to
    #: the cluster node holding it (a topology domain), for a multi-node backend; None: the
    #: executor's own machine
    node: str | None = None
    #: what the backend knows of it besides (``address``, ``gpu_type``): (name, value) pairs
    labels: tuple[tuple[str, str], ...] = ()


@value  # built per item by the twin (sim.executor) as well
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
    #: generate: the prompt is already in the model's chat format (a chat the gateway rendered
    #: with the model's template), so it is not wrapped as a user turn again
    templated: bool = False

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
class AdapterRef:
    """A LoRA adapter a generate item runs with: ``name`` is its identity on the replica (a
    PEFT adapter name: letters, digits, ``-`` and ``_``), ``path`` its local PEFT folder."""

    name: str
    path: str

    def __post_init__(self) -> None:
        if not self.name or not self.name.replace("-", "").replace("_", "").isalnum():
            raise ExecutorError(f"AdapterRef.name {self.name!r} must be letters, digits, - or _")


@dataclass(frozen=True)
class BatchItem:
    """One step of a batch. ``inputs`` maps input names to literals or :class:`InputRef`.

    ``return_output``: the step's output goes to the caller (a workflow output), so the worker
    sends it back with the result (as plain lists) instead of waiting for a ``fetch_output``
    round trip; the worker still holds it for later steps. ``adapter``: a generate item's LoRA
    adapter (None: the base model); the folder travels with the item, so a replica loads an
    adapter it has never seen without asking anyone.
    """

    step: StepKey
    idempotency_key: str
    inputs: Mapping[str, Any]
    params: GenParams = GenParams()
    return_output: bool = False
    adapter: AdapterRef | None = None


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
