"""Value types of the orchestration half of the core: models, devices, requests, results.

All are frozen dataclasses. Quantities are integers (MiB, tokens, microseconds); times are
seconds on the driver's clock (``now``), passed in and never read here.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from types import MappingProxyType

from control.core.autoscale_rules import autoscaling_problems
from control.core.values import keeps_dict, value
from control.core.variants import VARIANT_SEP

#: Model tasks a workflow node can run.
TASKS: tuple[str, ...] = ("embed", "rerank", "generate", "classify")
#: Tool steps the executor runs on the host (no model replica, no batching).
TOOLS: tuple[str, ...] = ("vector_search", "router", "segment")
#: Default tokens per prefix-cache block (Mooncake trace convention: one hash per 512 tokens);
#: ``CoreConfig.prefix_block_tokens`` sets it (the live gateway's blocks are smaller).
BLOCK_TOKENS = 512
#: Pools a device can belong to. Cold loads only ever land on the cold pool.
POOLS: tuple[str, ...] = ("hot", "cold")

_EMPTY: Mapping[str, object] = MappingProxyType({})


def _require(cond: bool, owner: str, name: str, value: object, rule: str) -> None:
    if not cond:
        raise ValueError(f"{owner}.{name}={value!r}: {rule}")


@keeps_dict  # serialized with vars()
@dataclass(frozen=True)
class ModelSpec:
    """A servable model version. ``key`` (``name:version``) identifies it everywhere."""

    name: str
    version: str
    task: str
    memory_mib: int
    load_time_s: float = 2.0  # used only when the latency model has no load row
    max_batch_size: int = 8
    max_batch_tokens: int = 16384  # padded tokens: max prompt length in the batch x batch size
    tp_degree: int = 1  # devices one replica spans (same interconnect group)
    #: Iteration-level (continuous) batching: a replica of this generate model takes new
    #: sequences into its running decode loop. The core may then dispatch a batch to a replica
    #: that is already running others, as long as their sequences together stay within
    #: ``max_batch_size``; each dispatched batch still completes as one ``BatchResult`` (when
    #: its last sequence ends). An executor that cannot join runs such batches one after the
    #: other: results stay right, only the core's predictions are off.
    continuous_batching: bool = False
    #: Chunked prefill (continuous batching only; 0: off). A joining batch's prompts are
    #: prefilled over several loop iterations of at most this many tokens each (the running
    #: sequences' decode tokens count in it), and the running sequences decode one token every
    #: iteration meanwhile instead of stalling for a whole prompt ("stall-free" batching, as
    #: in Sarathi-Serve and vLLM). Smaller chunks bound the stall per token; each chunk costs a
    #: forward of its own, so the prefill itself takes somewhat longer.
    prefill_chunk_tokens: int = 0
    #: Autoscaling (``control.core.autoscaler``), on while ``max_replicas`` is set: between
    #: ``min_replicas`` and ``max_replicas`` replicas; one more when the predicted queue delay
    #: exceeds ``scale_out_delay_s`` (None: no scale-out on backlog); one fewer, drained, after
    #: ``idle_s`` without work (None: no scale-in), down to zero when ``min_replicas`` is 0.
    min_replicas: int = 0
    max_replicas: int | None = None
    scale_out_delay_s: float | None = None
    idle_s: float | None = None
    #: Precision variants (``control.core.variants``): the precision this replica kind runs
    #: at, and for a variant the key of its base model (empty for the base itself). A variant
    #: is keyed ``name:version@precision`` and placed, routed and billed as a model of its own.
    precision: str = "fp32"
    base: str = ""
    #: LoRA adapters (generate models; ``control.core.routing.adapters``): at most this many
    #: held by one replica (least recently used evicted), and the time to load one that is not
    #: held (used when the adapter has no measured load time)
    max_adapters: int = 8
    adapter_load_s: float = 0.2
    #: a variant's measured quality against its base (``ModelVariant.quality["score"]``);
    #: None: not measured (never serves ``exact``, see ``control.core.variant_choice``)
    quality_score: float | None = None

    def __post_init__(self) -> None:
        _require(self.task in TASKS, "ModelSpec", "task", self.task, f"one of {TASKS}")
        _require(self.memory_mib > 0, "ModelSpec", "memory_mib", self.memory_mib, "must be > 0")
        _require(
            self.max_batch_size >= 1, "ModelSpec", "max_batch_size", self.max_batch_size, ">= 1"
        )
        _require(
            self.max_batch_tokens >= 1,
            "ModelSpec",
            "max_batch_tokens",
            self.max_batch_tokens,
            ">= 1",
        )
        _require(self.tp_degree >= 1, "ModelSpec", "tp_degree", self.tp_degree, ">= 1")
        _require(
            not self.continuous_batching or self.task == "generate",
            "ModelSpec",
            "continuous_batching",
            self.continuous_batching,
            "only generate models batch continuously (task is " + repr(self.task) + ")",
        )
        _require(
            self.prefill_chunk_tokens >= 0,
            "ModelSpec",
            "prefill_chunk_tokens",
            self.prefill_chunk_tokens,
            ">= 0",
        )
        _require(
            not self.prefill_chunk_tokens or self.continuous_batching,
            "ModelSpec",
            "prefill_chunk_tokens",
            self.prefill_chunk_tokens,
            "chunked prefill needs continuous_batching (the decode loop it interleaves with)",
        )
        _require(self.max_adapters >= 1, "ModelSpec", "max_adapters", self.max_adapters, ">= 1")
        _require(
            self.adapter_load_s >= 0, "ModelSpec", "adapter_load_s", self.adapter_load_s, ">= 0"
        )
        scaling = (self.min_replicas, self.max_replicas, self.scale_out_delay_s, self.idle_s)
        for name, why in autoscaling_problems(*scaling):
            raise ValueError(f"ModelSpec.{name}={getattr(self, name)!r}: {why}")

    @property
    def key(self) -> str:
        # a plain property (not cached in the instance dict): callers serialize specs by vars()
        if self.base:
            return f"{self.name}:{self.version}{VARIANT_SEP}{self.precision}"
        return f"{self.name}:{self.version}"


@keeps_dict  # serialized with vars()
@dataclass(frozen=True)
class DeviceSpec:
    """One accelerator (or CPU worker slot). ``accelerator`` keys the latency tables."""

    device_id: str
    node_id: str
    kind: str  # "gpu" | "cpu"
    accelerator: str  # device type for latency tables, e.g. "h100", "cpu"
    memory_mib: int
    interconnect_group: str = ""  # devices sharing NVLink (or one host's CPU slots)
    pool: str = "hot"
    status: str = "up"

    def __post_init__(self) -> None:
        _require(self.memory_mib > 0, "DeviceSpec", "memory_mib", self.memory_mib, "must be > 0")
        _require(self.pool in POOLS, "DeviceSpec", "pool", self.pool, f"one of {POOLS}")


class ReplicaState(StrEnum):
    LOADING = "loading"
    READY = "ready"
    FAILED = "failed"
    UNLOADED = "unloaded"


@dataclass(frozen=True)
class DoneStep:
    """A step an earlier process completed (a resumed run's): its node is done without
    running it again (``control.core.dag.resume``)."""

    node_id: str
    chunk: int | None = None
    route_label: str | None = None
    item_count: int | None = None


@dataclass(frozen=True)
class Request:
    """One workflow run asked for by a tenant. ``deadline`` is absolute driver-clock seconds.
    ``expires_at`` (the same clock): the run is ended ``timed_out`` at that instant if it is
    still going, whatever it waits for (``run_bounds``); None: no bound in the core."""

    request_id: str
    tenant_id: str
    workflow: str
    priority_class: str = "standard"
    deadline: float | None = None
    session_id: str | None = None
    prompt_tokens: int = 0
    max_output_tokens: int = 0
    prefix_blocks: tuple[int, ...] = ()  # chained hashes, one per whole block of the prompt
    idempotency_key: str | None = None
    inputs: Mapping[str, object] = field(
        default_factory=lambda: _EMPTY
    )  # small metadata only, never payloads
    expires_at: float | None = None
    #: steps completed before a restart (a resumed run): done, not run again
    completed: tuple[DoneStep, ...] = ()
    #: a LoRA adapter (its name on replicas, e.g. ``lora-7``; empty: none) for the run's
    #: generate steps on the base model ``adapter_model``; ``adapter_load_s``: its measured
    #: load time (0: the model's ``adapter_load_s``)
    adapter: str = ""
    adapter_model: str = ""
    adapter_load_s: float = 0.0
    #: quality class asked for (``exact``/``balanced``/``fast``); None: the tenant's default,
    #: else its priority class's (``control.core.variant_choice``)
    quality: str | None = None

    def __post_init__(self) -> None:
        _require(self.prompt_tokens >= 0, "Request", "prompt_tokens", self.prompt_tokens, ">= 0")
        _require(
            self.max_output_tokens >= 0,
            "Request",
            "max_output_tokens",
            self.max_output_tokens,
            ">= 0",
        )


@value
class InputRef:
    """Where one input of a step lives: a field of an upstream output held on a device.

    ``device_id``/``replica_id`` are None for request inputs and tool outputs (host memory).
    ``chunk`` selects one chunk of a map node's output (or of a split source), else None.
    """

    run_id: str
    node_id: str  # "input" for the request's own inputs
    field: str
    device_id: str | None
    replica_id: str | None
    chunk: int | None = None


@value
class StepResult:
    """What the executor reports for one item of a finished batch (small metadata only)."""

    key: str
    ok: bool = True
    input_tokens: int = 0
    output_tokens: int = 0
    prefix_hit_blocks: int = 0
    first_token: bool = False
    route_label: str | None = None  # a router's chosen branch label
    item_count: int | None = None  # a split source's number of items (feeds a map node)
    error: str | None = None
    #: why it failed, when the executor said (its ``ItemResult.cause``); ``bad_input`` is final
    fault: str | None = None
    field: str | None = None  # bad_input: the node input to blame (``text``, ``documents[3]``)
    #: an input was lost: the outputs gone, as (node id, chunk); None: not said (all inputs)
    lost: tuple[tuple[str, int | None], ...] | None = None
    #: where the output is held when the batch had no replica of the core's (an index tool
    #: step: the runtime picks the index replica), so a loss of that device is recovered
    held_on: tuple[str, str] | None = None


@value
class BatchResult:
    """Completion of one dispatched batch; ``device_us`` is the measured device time."""

    batch_id: str
    device_us: int
    items: tuple[StepResult, ...]
