"""Routing contract: the global scheduler picks a replica queue for each ready step.

Called by the engine once per ready model step (and for re-routing). A policy reads candidate
replicas through the ``Candidate`` protocol and changes nothing; it returns a ``RouteChoice``
whose reason a person can read, or None when there is no candidate.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Protocol

from control.core.latency import LatencyModel
from control.core.routing.adapter_lru import AdapterLru
from control.core.routing.prefix_index import PrefixIndex
from control.core.routing.transfer import TransferCosts
from control.core.types import BLOCK_TOKENS, DeviceSpec
from control.core.values import value


class Candidate(Protocol):
    replica_id: str
    device: DeviceSpec  # primary device

    @property
    def loading(self) -> bool: ...

    ready_at: float  # predicted end of loading (loading replicas)
    busy_until: float  # when it can next start new work (end of the batch in flight)
    queue_us: int  # predicted service time of everything queued there
    prefill_until: float  # continuous batching: end of the prefills scheduled on the loop
    loop_seqs: int  # continuous batching: sequences running in the loop (else 0)
    prefix: PrefixIndex
    adapters: AdapterLru  # the LoRA adapters it holds (generate replicas)


@value
class StepDemand:
    model_key: str
    input_tokens: int
    output_tokens: int
    prefix_blocks: tuple[int, ...]
    session_id: str | None
    input_devices: tuple[DeviceSpec | None, ...]
    #: bytes of each input (empty: not sized, each costs its tier's latency)
    input_bytes: tuple[int, ...] = ()
    #: the LoRA adapter it runs with ("": none) and what loading it costs a replica lacking it
    #: (0: unknown, the replica's model's ``adapter_load_s``)
    adapter: str = ""
    adapter_load_us: int = 0


@value
class RouteScore:
    replica_id: str
    total_us: int
    queue_us: int
    service_us: int
    transfer_us: int
    load_us: int
    saving_us: int
    hit_blocks: int


#: How many of the best-scored candidates a ``RouteChoice`` keeps (the request timeline shows
#: them; more would cost every routing decision and tell an operator little).
MAX_ROUTE_CANDIDATES = 3


@value
class RouteChoice:
    score: RouteScore
    affinity: bool
    reason: str
    #: the best-scored candidates, lowest predicted completion first (at most
    #: ``MAX_ROUTE_CANDIDATES``; the chosen one among them unless affinity kept a worse one)
    candidates: tuple[RouteScore, ...] = ()


@value
class RoutingContext:
    now: float
    latency: LatencyModel
    transfer: TransferCosts
    sessions: Mapping[str, str]  # session id -> replica that served it last
    block_tokens: int = BLOCK_TOKENS  # prompt tokens per prefix block


class RoutingPolicy(Protocol):
    def choose(
        self, demand: StepDemand, candidates: Sequence[Candidate], ctx: RoutingContext
    ) -> RouteChoice | None: ...
