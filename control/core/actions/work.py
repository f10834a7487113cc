"""Actions that run work: batches of step attempts (``Dispatch`` of ``BatchItem``s, each input
bound to where its data lives), a queued step moved between replicas, a failed step retried."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import field
from types import MappingProxyType

from control.core.routing.base import RouteChoice
from control.core.types import InputRef
from control.core.values import value
from control.core.variant_choice import VariantDecision

_EMPTY: Mapping[str, object] = MappingProxyType({})


@value
class InputBinding:
    """One input field of a step and where its data lives (several refs: a merged map output,
    in chunk order)."""

    target_field: str
    refs: tuple[InputRef, ...]


@value
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
    #: when the step became ready, and when it joined the queue it left (the core's clock):
    #: the request timeline's queue wait
    ready_at: float = 0.0
    enqueued_at: float = 0.0
    #: the routing decision that queued it, with the scores of the best candidates (None: a
    #: host tool, or a step bound late without scoring while ``BindingConfig.explain`` is off)
    route: RouteChoice | None = None
    #: the LoRA adapter the step runs with ("": the base model)
    adapter: str = ""
    #: which precision variant of the node's model runs it and why (None: no variants)
    variant: VariantDecision | None = None


@value
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
    #: of ``predicted_us``: loading the batch's LoRA adapters the replica lacks (the core's
    #: mirror); the twin's executor waits it out, a live replica really loads them
    adapter_load_us: int = 0


@value
class MoveStep:
    """A queued step moved between replica queues (work stealing or re-routing)."""

    key: str
    from_replica: str | None
    to_replica: str
    reason: str


@value
class StepRetried:
    failed_key: str
    new_key: str
    attempt: int
    idempotency_key: str
    reason: str
    #: "timeout": the failed attempt outlived its node's ``timeout_s``; the retry runs under a
    #: fresh idempotency key at once (``dag.reissue``); the late result is discarded
    cause: str = ""


@value
class StepPreempted:
    """A step of a lower class that borrowed a reservation's headroom and had not started is
    taken back for a class the reservation holds it for, and requeued (never failed). When it
    had been dispatched (``dispatched``) its attempt ``key`` is abandoned: the driver cancels it
    on the executor (best effort; a result that still comes is discarded and billed once) and
    ``new_key`` is its next attempt; a step only queued on the replica keeps its key."""

    request_id: str
    key: str
    new_key: str
    node_id: str
    tenant_id: str
    priority_class: str
    replica_id: str
    dispatched: bool
    reason: str
