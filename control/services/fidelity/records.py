"""What the live side of the fidelity check measures, as plain records both sides share."""

from __future__ import annotations

from dataclasses import dataclass, field

from control.core.latency import LatencyRow
from sim.driver import Arrival


@dataclass(frozen=True)
class BatchSeen:
    size: int
    device_ms: float  # the worker's measured compute time
    wall_ms: float  # the driver's dispatch to completion


@dataclass(frozen=True)
class RequestSeen:
    """One request as either side saw it."""

    e2e_s: float
    batch_size: int
    device_ms: float  # device time of the batch it ran in


@dataclass(frozen=True)
class Overheads:
    """The runtime's own time, measured on the profile requests (medians, microseconds)."""

    busy_us: int  # per batch, on the replica's busy path
    run_us: int  # per run, off the busy path


@dataclass(frozen=True)
class Round:
    """One replay of the slice and the in-worker table that brackets it: the samples of the
    profiles measured right before and right after it, pooled (request ids carry the round,
    ``~k``)."""

    table: tuple[LatencyRow, ...]
    requests: list[Arrival]  # as submitted (offsets from the round's start)
    seen: dict[str, RequestSeen]  # its succeeded requests


@dataclass(frozen=True)
class LiveOutcome:
    profiles: tuple[tuple[LatencyRow, ...], ...]  # in-worker tables, in the order measured
    rounds: tuple[Round, ...]  # the slice's replays, each between two of the profiles
    overheads: Overheads
    sigma_milli: int  # scatter of the worker's device times around the table (see SimExecutor)
    rate_factor: float
    nice: int | None = None  # priority the check's threads ran at (None: left alone)
    #: per phase: [ms the worker ran, ms it waited for the CPU] (the scheduler's share)
    cpu_ms: dict[str, list[float]] = field(default_factory=dict)

    @property
    def before(self) -> tuple[LatencyRow, ...]:
        return self.profiles[0]

    @property
    def after(self) -> tuple[LatencyRow, ...]:
        return self.profiles[-1]

    @property
    def requests(self) -> list[Arrival]:
        """Every round's requests (ids unique across rounds)."""
        return [a for r in self.rounds for a in r.requests]

    @property
    def seen(self) -> dict[str, RequestSeen]:
        return {rid: s for r in self.rounds for rid, s in r.seen.items()}
