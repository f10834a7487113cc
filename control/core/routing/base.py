"""Routing contract: the global scheduler picks a replica queue for each ready step.

Called by the engine once per ready model step (and for re-routing). A policy reads candidate
replicas through the ``Candidate`` protocol and changes nothing; it returns a ``RouteChoice``
whose reason a person can read, or None when there is no candidate.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Protocol

from control.core.frozen import fast_init
from control.core.latency import LatencyModel
from control.core.routing.prefix_index import PrefixIndex
from control.core.routing.transfer import TransferCosts
from control.core.types import DeviceSpec


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


@dataclass(frozen=True)
class StepDemand:
    model_key: str
    input_tokens: int
    output_tokens: int
    prefix_blocks: tuple[int, ...]
    session_id: str | None
    input_devices: tuple[DeviceSpec | None, ...]

    def __init__(
        self,
        model_key: str,
        input_tokens: int,
        output_tokens: int,
        prefix_blocks: tuple[int, ...],
        session_id: str | None,
        input_devices: tuple[DeviceSpec | None, ...],
    ) -> None:
        object.__setattr__(self, "model_key", model_key)
        object.__setattr__(self, "input_tokens", input_tokens)
        object.__setattr__(self, "output_tokens", output_tokens)
        object.__setattr__(self, "prefix_blocks", prefix_blocks)
        object.__setattr__(self, "session_id", session_id)
        object.__setattr__(self, "input_devices", input_devices)


fast_init(StepDemand)


@dataclass(frozen=True)
class RouteScore:
    replica_id: str
    total_us: int
    queue_us: int
    service_us: int
    transfer_us: int
    load_us: int
    saving_us: int
    hit_blocks: int

    def __init__(
        self,
        replica_id: str,
        total_us: int,
        queue_us: int,
        service_us: int,
        transfer_us: int,
        load_us: int,
        saving_us: int,
        hit_blocks: int,
    ) -> None:
        object.__setattr__(self, "replica_id", replica_id)
        object.__setattr__(self, "total_us", total_us)
        object.__setattr__(self, "queue_us", queue_us)
        object.__setattr__(self, "service_us", service_us)
        object.__setattr__(self, "transfer_us", transfer_us)
        object.__setattr__(self, "load_us", load_us)
        object.__setattr__(self, "saving_us", saving_us)
        object.__setattr__(self, "hit_blocks", hit_blocks)


fast_init(RouteScore)


@dataclass(frozen=True)
class RouteChoice:
    score: RouteScore
    affinity: bool
    reason: str

    def __init__(self, score: RouteScore, affinity: bool, reason: str) -> None:
        object.__setattr__(self, "score", score)
        object.__setattr__(self, "affinity", affinity)
        object.__setattr__(self, "reason", reason)


fast_init(RouteChoice)


@dataclass(frozen=True)
class RoutingContext:
    now: float
    latency: LatencyModel
    transfer: TransferCosts
    sessions: Mapping[str, str]  # session id -> replica that served it last

    def __init__(
        self,
        now: float,
        latency: LatencyModel,
        transfer: TransferCosts,
        sessions: Mapping[str, str],
    ) -> None:
        object.__setattr__(self, "now", now)
        object.__setattr__(self, "latency", latency)
        object.__setattr__(self, "transfer", transfer)
        object.__setattr__(self, "sessions", sessions)


fast_init(RoutingContext)


class RoutingPolicy(Protocol):
    def choose(
        self, demand: StepDemand, candidates: Sequence[Candidate], ctx: RoutingContext
    ) -> RouteChoice | None: ...
