"""Figures of one side over the slice, the errors between the sides, and their spread."""

from __future__ import annotations

import statistics
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from typing import Any

from control.services.fidelity.records import RequestSeen
from sim.stats import percentile

#: The goal of issue 7: p50 and p99 error at most 10%, SLO attainment within 2 points.
GOAL = {"p50_error": 0.10, "p99_error": 0.10, "slo_attainment_error_pp": 2.0}


@dataclass(frozen=True)
class Side:
    """Latency figures of one side (live or twin) over the slice."""

    p50_s: float
    p99_s: float
    slo_attainment: float
    succeeded: int


def summarize(e2e: Mapping[str, float], total: int, slo_s: float) -> Side:
    """Percentiles over succeeded requests; SLO attainment over all ``total`` requests."""
    values = sorted(e2e.values())
    if not values:
        return Side(0.0, 0.0, 0.0, 0)
    met = sum(v <= slo_s for v in values)
    return Side(percentile(values, 50) or 0.0, percentile(values, 99) or 0.0, met / total,
                len(values))  # fmt: skip


def pooled(runs: Sequence[Mapping[str, RequestSeen]]) -> dict[str, RequestSeen]:
    """Several replays of one slice as one sample (keys ``<request id>#<replay>``), for
    :func:`summarize` with ``total`` times the replays and for :func:`breakdown`."""
    return {f"{rid}#{k}": s for k, run in enumerate(runs) for rid, s in run.items()}


def breakdown(seen: Mapping[str, RequestSeen]) -> dict[str, float]:
    """Where a side's time went, per request: its batch's device time versus everything else
    (queueing, batching delay, the runtime's overheads); and the batch sizes formed."""
    if not seen:
        return {}
    device = sorted(s.device_ms for s in seen.values())
    wait = sorted(s.e2e_s * 1000 - s.device_ms for s in seen.values())
    return {
        "mean_batch_size": round(statistics.mean(s.batch_size for s in seen.values()), 3),
        "device_ms_p50": round(percentile(device, 50) or 0.0, 2),
        "device_ms_mean": round(statistics.mean(device), 2),
        "wait_ms_p50": round(percentile(wait, 50) or 0.0, 2),
        "wait_ms_p99": round(percentile(wait, 99) or 0.0, 2),
    }


def compare_sides(live: Side, twin: Side) -> tuple[float, float, float]:
    """(p50 relative error, p99 relative error, SLO attainment error in points: twin - live)."""

    def rel(t: float, x: float) -> float:
        return abs(t - x) / x if x > 0 else float("inf")

    return (rel(twin.p50_s, live.p50_s), rel(twin.p99_s, live.p99_s),
            (twin.slo_attainment - live.slo_attainment) * 100)  # fmt: skip


def goal_met(result: Mapping[str, Any]) -> bool:
    return (
        result["p50_error"] <= GOAL["p50_error"]
        and result["p99_error"] <= GOAL["p99_error"]
        and abs(result["slo_attainment_error_pp"]) <= GOAL["slo_attainment_error_pp"]
    )


def side_dict(side: Side, seen: Mapping[str, RequestSeen]) -> dict[str, Any]:
    """A side's summary as stored: rounded figures plus the breakdown."""
    figures = {k: round(v, 5) if isinstance(v, float) else v for k, v in asdict(side).items()}
    return figures | breakdown(seen)


def spread(runs: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """Median, min and max of each error over repeated runs (the figure of merit is the
    median; min..max shows how much this machine's noise moves it)."""
    out: dict[str, Any] = {}
    for key in GOAL:
        values = [float(r[key]) for r in runs]
        out[key] = {"median": round(statistics.median(values), 4),
                    "min": round(min(values), 4), "max": round(max(values), 4)}  # fmt: skip
    return out
