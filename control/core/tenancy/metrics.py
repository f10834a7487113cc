"""Fairness metrics over recorded service, for the twin's reports and the console.

Pure functions over ``ServiceSample`` (service given to a tenant at an instant, in cost units)
and ``BacklogInterval`` (when a tenant had work queued). Definitions follow Sheng et al.
(OSDI 2024): in every window of ``window_s`` seconds (stepped by ``step_s``), take the tenants
backlogged throughout the window and the spread (max - min) of their service divided by weight;
**Max Diff** is the largest spread, **Avg Diff** the mean, **Diff Var** the population variance.
Jain's index is computed per window over the same weighted figures and averaged.
"""

from __future__ import annotations

import bisect
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from control.core.values import value


@value
class ServiceSample:
    t: float
    tenant_id: str
    amount: int


@dataclass(frozen=True)
class BacklogInterval:
    tenant_id: str
    start: float
    end: float


@dataclass(frozen=True)
class FairnessSummary:
    max_diff: float
    avg_diff: float
    diff_var: float
    jain: float
    windows: int  # windows with at least two backlogged tenants


@dataclass(frozen=True)
class ShareEntry:
    """Share of all service a tenant received vs. its weight's share, in thousandths."""

    received_milli: int
    entitled_milli: int


class _Series:
    """Per-tenant cumulative service for O(log n) window sums."""

    def __init__(self, samples: Iterable[ServiceSample]) -> None:
        per: dict[str, list[tuple[float, int]]] = {}
        for s in samples:
            per.setdefault(s.tenant_id, []).append((s.t, s.amount))
        self.times: dict[str, list[float]] = {}
        self.prefix: dict[str, list[int]] = {}
        for tenant_id, pts in per.items():
            pts.sort()
            self.times[tenant_id] = [t for t, _ in pts]
            acc, prefix = 0, [0]
            for _, amount in pts:
                acc += amount
                prefix.append(acc)
            self.prefix[tenant_id] = prefix

    def between(self, tenant_id: str, t0: float, t1: float) -> int:
        """Service in [t0, t1)."""
        times = self.times.get(tenant_id)
        if not times:
            return 0
        i, j = bisect.bisect_left(times, t0), bisect.bisect_left(times, t1)
        return self.prefix[tenant_id][j] - self.prefix[tenant_id][i]


def merge_backlog(intervals: Iterable[BacklogInterval]) -> dict[str, list[tuple[float, float]]]:
    """Per tenant, sorted disjoint backlog intervals (touching ones merged)."""
    per: dict[str, list[tuple[float, float]]] = {}
    for iv in sorted(intervals, key=lambda iv: (iv.tenant_id, iv.start)):
        spans = per.setdefault(iv.tenant_id, [])
        if spans and iv.start <= spans[-1][1]:
            spans[-1] = (spans[-1][0], max(spans[-1][1], iv.end))
        else:
            spans.append((iv.start, iv.end))
    return per


def _covers(spans: list[tuple[float, float]], t0: float, t1: float) -> bool:
    i = bisect.bisect_right(spans, (t0, float("inf"))) - 1
    return i >= 0 and spans[i][0] <= t0 and spans[i][1] >= t1


def jain_index(values: Sequence[float]) -> float:
    """(sum x)^2 / (n * sum x^2); 1.0 for an empty or all-zero list (nobody is treated worse)."""
    squares = sum(v * v for v in values)
    if not values or squares == 0:
        return 1.0
    return sum(values) ** 2 / (len(values) * squares)


def window_spreads(
    samples: Iterable[ServiceSample],
    backlog: Iterable[BacklogInterval],
    weights: Mapping[str, int],
    window_s: float,
    step_s: float,
    start: float,
    end: float,
) -> list[tuple[float, list[float]]]:
    """(window start, weighted service of each tenant backlogged throughout) per window."""
    if window_s <= 0 or step_s <= 0:
        raise ValueError(f"window_s and step_s must be > 0, got {window_s}, {step_s}")
    series, spans = _Series(samples), merge_backlog(backlog)
    out = []
    t0 = start
    while t0 + window_s <= end + 1e-9:
        t1 = t0 + window_s
        values = [
            series.between(t, t0, t1) / weights.get(t, 1)
            for t in sorted(spans)
            if _covers(spans[t], t0, t1)
        ]
        out.append((t0, values))
        t0 += step_s
    return out


def fairness_summary(
    samples: Sequence[ServiceSample],
    backlog: Sequence[BacklogInterval],
    weights: Mapping[str, int],
    window_s: float,
    step_s: float,
    start: float,
    end: float,
) -> FairnessSummary:
    """Max Diff, Avg Diff, Diff Var and mean Jain over windows with >= 2 backlogged tenants."""
    diffs, jains = [], []
    for _, values in window_spreads(samples, backlog, weights, window_s, step_s, start, end):
        if len(values) >= 2:
            diffs.append(max(values) - min(values))
            jains.append(jain_index(values))
    if not diffs:
        return FairnessSummary(0.0, 0.0, 0.0, 1.0, 0)
    mean = sum(diffs) / len(diffs)
    var = sum((d - mean) ** 2 for d in diffs) / len(diffs)
    return FairnessSummary(max(diffs), mean, var, sum(jains) / len(jains), len(diffs))


def service_over_time(
    samples: Iterable[ServiceSample], window_s: float, start: float, end: float
) -> dict[str, list[int]]:
    """Per tenant, service in consecutive windows [start + k*window_s, ...) up to ``end``."""
    series = _Series(samples)
    count = max(0, int((end - start) // window_s))
    return {
        t: [
            series.between(t, start + k * window_s, start + (k + 1) * window_s)
            for k in range(count)
        ]
        for t in sorted(series.times)
    }


def share_vs_entitled(
    samples: Iterable[ServiceSample], weights: Mapping[str, int]
) -> dict[str, ShareEntry]:
    """Share of total service received vs. weight share, over the tenants in ``weights``."""
    totals = {t: 0 for t in weights}
    for s in samples:
        if s.tenant_id in totals:
            totals[s.tenant_id] += s.amount
    all_service, all_weight = sum(totals.values()), sum(weights.values())
    return {
        t: ShareEntry(
            totals[t] * 1000 // all_service if all_service else 0,
            weights[t] * 1000 // all_weight if all_weight else 0,
        )
        for t in sorted(weights)
    }
