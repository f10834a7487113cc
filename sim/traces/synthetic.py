"""Synthetic arrivals: Poisson and Gamma-burst processes with a seeded RNG."""

from __future__ import annotations

import random
from dataclasses import dataclass

from sim.traces.records import TraceRequest


@dataclass(frozen=True)
class SyntheticSpec:
    """An arrival process. ``cv`` = 1 is Poisson; ``cv`` > 1 gives Gamma bursts."""

    rate_rps: float
    duration_s: float
    cv: float = 1.0
    input_tokens: int = 256
    output_tokens: int = 32
    tenant: str | None = None

    def __post_init__(self) -> None:
        for name in ("rate_rps", "duration_s", "cv"):
            if getattr(self, name) <= 0:
                raise ValueError(f"{name} must be > 0, got {getattr(self, name)}")


def generate(spec: SyntheticSpec, rng: random.Random) -> list[TraceRequest]:
    """Arrivals over ``[0, duration_s)`` with Gamma inter-arrival times of mean 1/rate.

    Shape k = 1/cv^2 and scale = 1/(rate k) keep the mean rate and give the requested coefficient
    of variation; k = 1 is the exponential (Poisson) case.
    """
    shape = 1.0 / (spec.cv**2)
    scale = 1.0 / (spec.rate_rps * shape)
    out, t = [], 0.0
    while True:
        t += rng.gammavariate(shape, scale)
        if t >= spec.duration_s:
            return out
        out.append(
            TraceRequest(
                arrival_s=t,
                input_tokens=spec.input_tokens,
                output_tokens=spec.output_tokens,
                tenant=spec.tenant,
            )
        )


def merge(*streams: list[TraceRequest]) -> list[TraceRequest]:
    """Merge several arrival streams into one sorted by arrival (stable for ties)."""
    return sorted((r for s in streams for r in s), key=lambda r: r.arrival_s)
